import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { DEFAULT_RUNTIME_IMAGE } from '../../../src/api/common.ts';
import { call, type ScriptedReply } from '../../../test/harness/llm.ts';
import { eventually } from '../../../test/harness/wait.ts';
import {
  CLUSTER_WAIT,
  getJson,
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

const HOLT = 'ts';

/** The scripted model: the ToolServer's `env` tool, then the Terminal result. */
const SCRIPT: ScriptedReply[] = [
  call('tiny__env', {}),
  call('submit_result', {
    artefact_type: 'Report',
    artefact_payload: 'the ToolServer answered',
    summary: 'done',
    structural_type: 'Terminal',
  }),
];

/**
 * A ToolServer of the stdio form: the tests' tiny MCP server (src/llm/mcp/fixtures/tiny-server.mjs,
 * given inline to node) in the runtime image, behind `holt mcp-bridge` that an init container copies
 * in. An LLM Agent of its own Holt names it; nothing of the server runs in the Agent's pod.
 */
function toolServerManifests(baseUrl: string): string {
  const source = readFileSync(join(ROOT, 'src/llm/mcp/fixtures/tiny-server.mjs'), 'utf8');
  return yamlDocs([
    {
      apiVersion: 'holt.io/v1alpha1',
      kind: 'ToolServer',
      metadata: { name: 'tiny' },
      spec: {
        image: DEFAULT_RUNTIME_IMAGE,
        command: ['/opt/holt/bin/node', '--input-type=module', '-e', source],
        env: [{ name: 'TOOLSERVER_OWN', value: 'its own setting' }],
      },
    },
    holtDoc(HOLT, { llm: {} }),
    agentDoc('ts-reporter', HOLT, {
      role: 'Reporter',
      bidding: { strategy: 'exclusive' },
      llm: { model: 'scripted-ts', baseUrl, maxSteps: 4, toolServers: [{ name: 'tiny', tools: ['env'] }] },
      egress: true,
      egressTo: { pods: [{ labels: { app: 'llm-ts' } }] },
    }),
  ]);
}

type ToolServerObj = {
  status?: { conditions?: { type: string; status: string }[]; tools?: { name: string }[]; url?: string };
};

/**
 * From the ToolServer's pod: the address `host` resolves to (cluster DNS is allowed), then whether a
 * TCP connection to it opens ('connected', 'timeout' or the error code; 4 s).
 */
async function reachFromServer(host: string, port: number): Promise<{ ip?: string; result: string }> {
  const js = `const out=(o)=>{console.log(JSON.stringify(o));process.exit(0)};
require('node:dns').lookup(${JSON.stringify(host)},(e,ip)=>{
  if(e) return out({result:'unresolved '+e.code});
  const s=require('node:net').connect({host:ip,port:${port}});
  s.setTimeout(4000,()=>out({ip,result:'timeout'}));
  s.on('connect',()=>out({ip,result:'connected'}));
  s.on('error',(x)=>out({ip,result:x.code||x.message}));
})`;
  const stdout = await kubectl([
    'exec',
    'deploy/toolserver-tiny',
    '-c',
    'server',
    '--',
    '/opt/holt/bin/node',
    '-e',
    js,
  ]);
  return JSON.parse(stdout.trim()) as { ip?: string; result: string };
}

/** The real cluster: a ToolServer's bridged stdio server in its own pod, used by an Agent through its Service. */
export function toolServerTests(): void {
  // Not concurrent: it starts when the lane's concurrent sections are done, so its Holt adds no load
  // to theirs (the lane has time to spare beside the demo lane).
  it("a ToolServer runs a stdio MCP server behind holt mcp-bridge in its own pod; an Agent's call reaches it, and the server reaches no store", async () => {
    await kubectl(['apply', '-f', '-'], llmServer(SCRIPT, 'llm-ts'));
    await kubectl(['apply', '-f', '-'], toolServerManifests(`http://llm-ts.${NS}.svc:8080/v1`));
    await kubectl(['rollout', 'status', 'deploy/llm-ts', '--timeout=180s']);
    // The operator lists the server's tools through the bridge (its own MCP session).
    const ts = await eventually(
      'the ToolServer Ready with its tools listed',
      async () => {
        const t = await getJson<ToolServerObj>(['toolserver', 'tiny']);
        return t?.status?.conditions?.some((k) => k.type === 'Ready' && k.status === 'True') ? t : undefined;
      },
      { ...CLUSTER_WAIT, timeoutMs: 420_000 },
    );
    expect(ts.status?.tools?.map((t) => t.name)).toEqual(expect.arrayContaining(['env', 'touch']));
    progress(`toolserver: Ready, ${ts.status?.tools?.length} tools at ${ts.status?.url}`);
    await waitHoltReady(HOLT, 1);
    await holt(HOLT, ['forage', '--goal', 'Report what the ToolServer sees']);
    const trail = await eventually(
      'the ts workflow to finish',
      async () => {
        const t = await trailOf(HOLT);
        return t.some((a) => a.structural_type === 'Terminal') ? t : undefined;
      },
      CLUSTER_WAIT,
    );
    expect(trail.find((a) => a.type === 'Report')?.payload).toBe('the ToolServer answered');
    // What the model was shown: the environment of the server's process, in the ToolServer's pod (its
    // own setting, its pod's name), with no credential of the pup's.
    const shown = await shownToModel('llm-ts', 'mcp tiny env');
    expect(shown).toContain('authority="external_evidence"');
    expect(shown).toContain('its own setting');
    expect(shown).toContain('toolserver-tiny-');
    for (const name of [
      'REDIS_URL',
      'DATABASE_URL',
      'NATS_URL',
      'HOLT_LLM_API_KEY',
      'PGPASSWORD',
      'HOLT_AGENT_NAME',
    ])
      expect(shown).not.toContain(name);
    // The boundary, from the server's side: its NetworkPolicy lets it reach no store of the Holt.
    // Each store's name resolves (so what stops it is the policy, not a wrong name), and no
    // connection to it opens.
    for (const [store, port] of [
      ['redis', 6379],
      ['postgres', 5432],
      ['nats', 4222],
    ] as const) {
      const r = await reachFromServer(`${HOLT}-${store}.${NS}.svc`, port);
      expect(r.ip, store).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
      expect(r.result, store).not.toBe('connected');
    }
    progress('toolserver: the call went through its Service; the server reaches no store');
    await kubectl(['delete', 'holt', HOLT, '--wait=true', '--timeout=180s']);
    await kubectl(['delete', 'agents', '-l', `e2e.holt.io/holt=${HOLT}`, '--wait=true', '--timeout=180s']);
    await kubectl(['delete', 'toolserver', 'tiny', '--wait=true', '--timeout=180s']);
    await kubectl(['delete', 'deployment,service,configmap', 'llm-ts', '--ignore-not-found']);
  }, 900_000);
}
