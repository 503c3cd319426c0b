/**
 * Holt's Redis key and channel names (pkg/blackboard/schema.go), kept byte-for-byte so Holt's own tools
 * can read and write our blackboard. Keys marked "extension" are ours; Holt ignores them.
 */
export function keys(instance: string) {
  const p = `holt:${instance}:`;
  return {
    prefix: p,
    artefact: (id: string) => `${p}artefact:${id}`,
    claim: (id: string) => `${p}claim:${id}`,
    bids: (claimId: string) => `${p}claim:${claimId}:bids`,
    claimByArtefact: (artefactId: string) => `${p}claim_by_artefact:${artefactId}`,
    thread: (logicalId: string) => `${p}thread:${logicalId}`,
    grantQueue: (role: string) => `${p}grant_queue:${role}`,
    agentImages: `${p}agent_images`,
    lock: `${p}lock`,
    /** extension: ZSET artefact id by created_at_ms, for replay and listing without SCAN. */
    artefactIndex: `${p}index:artefacts`,
    /** extension: ZSET claim id by creation ms, for listing and recovery without SCAN. */
    claimIndex: `${p}index:claims`,
    /** extension: SET of the ids of artefacts listing this one in source_artefacts (outputs of its claims). */
    children: (artefactId: string) => `${p}index:children:${artefactId}`,
    /** extension: SET of claim ids not yet complete/terminated nor dormant (may still need bids or execution). */
    activeClaims: `${p}index:active_claims`,
    /** extension: SET of dormant claim ids (nothing left to grant; kept out of the active set, found by recovery). */
    dormantClaims: `${p}index:dormant_claims`,
    /** extension: HASH role -> AgentRegistration JSON (the runtime agent registry). */
    agents: `${p}agents`,
    /** extension: HASH "kind:id" -> Quarantined JSON: stored items set aside (never acted on) and why. */
    quarantine: `${p}quarantine`,
    /** extension: STREAM of workers that died (exit code, signal, last log lines), written by their launcher. */
    workerExits: `${p}worker_exits`,
    /** extension: STRING, RetentionReport JSON: the leader's last retention pass and totals (retention-report.ts). */
    retention: `${p}retention`,
    /** extension: STRING, bumped whenever the registry changes. */
    agentsRevision: `${p}agents:rev`,
    /**
     * extension: ZSET claim id by first-seen ms, the claims one role's pups bid on or were assigned: their
     * re-scan reads it besides index:active_claims, which Holt's own orchestrator does not write.
     */
    pupClaims: (role: string) => `${p}pup:claims:${role}`,
    /** extension: STRING, AgentLoad JSON: open grants per role, written by the leader (agent-load.ts). */
    agentLoad: `${p}agent_load`,
    /** extension: STRING, McpStatusReport JSON: a role's MCP servers as its pup sees them (mcp-status.ts). */
    mcpStatus: (role: string) => `${p}mcp_status:${role}`,
    channels: {
      artefactEvents: `${p}artefact_events`,
      claimEvents: `${p}claim_events`,
      workflowEvents: `${p}workflow_events`,
      /**
       * extension: our own workflow events (bid_timeout, bid_late, grant_reopened, quarantined), kept off
       * workflow_events so Holt's `holt watch` never meets an event it does not know.
       */
      workflowEventsExt: `${p}workflow_events_ext`,
      agentEvents: (role: string) => `${p}agent:${role}:events`,
      /** extension: every claim change (Holt publishes only creations on claim_events). */
      claimUpdates: `${p}claim_updates`,
      /** extension: registry changed. */
      agentsChanged: `${p}agents_changed`,
    },
  };
}

export type Keys = ReturnType<typeof keys>;
