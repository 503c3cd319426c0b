import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { it } from 'vitest';
import { call, type ScriptedReply } from '../../../test/harness/llm.ts';
import { eventually } from '../../../test/harness/wait.ts';
import {
  CLUSTER_WAIT,
  holt,
  kubectl,
  NS,
  progress,
  ROOT,
  shownToModel,
  trailOf,
  waitHoltReady,
} from '../ctx.ts';
import { llmServer } from '../fixtures.ts';
import { agentDoc, holtDoc, yamlDocs } from '../manifests.ts';

/** The scripted model: the MCP server's `env` tool, then the Terminal result. */
const SCRIPT: ScriptedReply[] = [
  call('tiny__env', {}),
  call('submit_result', {
    artefact_type: 'Report',
    artefact_payload: 'the MCP server answered',
    summary: 'done',
    structural_type: 'Terminal',
  }),
];

/**
 * A Holt of one LLM agent whose stdio MCP server (src/llm/mcp/fixtures/tiny-server.mjs) is mounted from
 * a ConfigMap into the agent container only: that it runs at all shows where it runs.
 */
function mcpManifests(baseUrl: string): string {
  return yamlDocs([
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'mcp-tiny' },
      data: { 'tiny-server.mjs': readFileSync(join(ROOT, 'src/llm/mcp/fixtures/tiny-server.mjs'), 'utf8') },
    },
    holtDoc('mcp', { llm: {} }),
    agentDoc('mcp-reporter', 'mcp', {
      role: 'Reporter',
      bidding: { strategy: 'exclusive' },
      volumes: [{ name: 'mcp', mountPath: '/mcp', configMap: 'mcp-tiny' }],
      llm: {
        model: 'scripted-mcp',
        baseUrl,
        maxSteps: 4,
        mcpServers: [
          {
            name: 'tiny',
            command: ['/opt/holt/bin/node', '/mcp/tiny-server.mjs'],
            tools: ['env'],
            requireApproval: ['env'],
          },
        ],
      },
      egress: true,
      egressTo: { pods: [{ labels: { app: 'llm-mcp' } }] },
    }),
  ]);
}

/** The real cluster: an Agent's stdio MCP server in its agent container, its call approved by a person. */
export function mcpTests(): void {
  // Its own Holt: it runs beside the lane's other concurrent sections.
  it.concurrent('a stdio MCP server runs in the agent container, with no store credential; its call, approved through holt --kube answer, finishes a workflow', async ({
    expect,
  }) => {
    await kubectl(['apply', '-f', '-'], llmServer(SCRIPT, 'llm-mcp'));
    await kubectl(['apply', '-f', '-'], mcpManifests(`http://llm-mcp.${NS}.svc:8080/v1`));
    await kubectl(['rollout', 'status', 'deploy/llm-mcp', '--timeout=180s']);
    await waitHoltReady('mcp', 1);
    progress('mcp: goal');
    await holt('mcp', ['forage', '--goal', 'Report what the MCP server sees']);
    // The call needs a person's approval: a Question naming the tool, answered with `holt --kube answer`.
    const q = JSON.parse(
      (await holt('mcp', ['questions', '--wait', '-o', 'jsonl'])).trim().split('\n')[0]!,
    ) as {
      id: string;
      type: string;
      payload: string;
    };
    expect(q.type).toBe('ApprovalRequest');
    expect(q.payload).toContain('tiny__env');
    expect(await holt('mcp', ['answer', q.id.slice(0, 8), 'approve'])).toContain(`(answers ${q.id})`);
    const trail = await eventually(
      'the mcp workflow to finish',
      async () => {
        const t = await trailOf('mcp');
        return t.some((a) => a.structural_type === 'Terminal') ? t : undefined;
      },
      CLUSTER_WAIT,
    );
    progress('mcp: approved through holt --kube answer, finished');
    expect(trail.find((a) => a.type === 'Report')?.payload).toBe('the MCP server answered');
    // What the model was shown after the call: the server's environment, as external evidence.
    const shown = await shownToModel('llm-mcp', 'mcp tiny env');
    expect(shown).toContain('authority="external_evidence"');
    expect(shown).toContain('HOLT_AGENT_NAME&quot;:&quot;Reporter');
    for (const name of ['REDIS_URL', 'DATABASE_URL', 'NATS_URL', 'HOLT_LLM_API_KEY', 'PGPASSWORD'])
      expect(shown).not.toContain(name);
    // Its own Holt goes with it (teardown deletes only the lanes' shared ones).
    await kubectl(['delete', 'holt', 'mcp', '--wait=true', '--timeout=180s']);
    await kubectl(['delete', 'agents', '-l', 'e2e.holt.io/holt=mcp', '--wait=true', '--timeout=180s']);
    await kubectl(['delete', 'deployment,service,configmap', 'llm-mcp', '--ignore-not-found']);
    await kubectl(['delete', 'configmap', 'mcp-tiny', '--ignore-not-found']);
  }, 600_000);
}
