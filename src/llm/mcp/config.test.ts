import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { AgentSpec } from '../../api/agent.ts';
import { HoltSpec } from '../../api/holt.ts';
import { loadHoltFile, parseHoltFile } from '../../api/holtfile.ts';
import { mcpHeaderSecrets, pupEnvironment } from '../../api/pupenv.ts';
import { pupPodTemplate } from '../../operator/specs/pup.ts';
import { loadLlmSettings } from '../config.ts';

// llm.mcp_servers from the Holt file to the pup's settings, and where a remote server's token may go.

const file = (servers: string) => `
version: "2"
agents:
  Coder:
    bidding_strategy: exclusive
    environment: [GITHUB_MCP_TOKEN=ghp-not-for-tools, TOOL_VAR=ok]
    llm:
      mcp_servers:
${servers}
`;
const good = `        - {name: everything, command: [mcp-server-everything], tools: [echo], timeout_seconds: 5, require_approval: [echo], env: [TOOL_VAR]}
        - {name: github, url: "https://mcp.example/mcp", headers: {Authorization: {env: GITHUB_MCP_TOKEN, prefix: "Bearer "}}}`;

describe('llm.mcp_servers', () => {
  it('parses into the Agent spec and reaches the pup as HOLT_LLM_MCP_SERVERS', () => {
    const agent = parseHoltFile(file(good)).agents[0]!;
    expect(agent.llm?.mcpServers).toEqual([
      {
        name: 'everything',
        command: ['mcp-server-everything'],
        tools: ['echo'],
        timeoutSeconds: 5,
        requireApproval: ['echo'],
        env: ['TOOL_VAR'],
      },
      {
        name: 'github',
        url: 'https://mcp.example/mcp',
        headers: { Authorization: { env: 'GITHUB_MCP_TOKEN', prefix: 'Bearer ' } },
        timeoutSeconds: 30,
        requireApproval: [],
        env: [],
      },
    ]);
    const env = pupEnvironment(agent, { instance: 'i', role: 'Coder', workspace: '/w', healthPort: 1 });
    const s = loadLlmSettings({ ...env, DATABASE_URL: 'postgres://x' });
    expect(s?.mcpServers.map((m) => m.name)).toEqual(['everything', 'github']);
    // The token's variable is the pup's alone: never among the names passed to tools.
    expect(JSON.parse(env.HOLT_TOOL_ENV ?? '[]')).toEqual(['TOOL_VAR']);
    // holt up: the token leaves the literal environment for the credentials descriptor.
    const local = mcpHeaderSecrets(agent, env, { GITHUB_MCP_TOKEN: 'from-the-shell' });
    expect(local.env.GITHUB_MCP_TOKEN).toBeUndefined();
    expect(local.env.TOOL_VAR).toBe('ok');
    expect(local.secrets).toEqual({ GITHUB_MCP_TOKEN: 'ghp-not-for-tools' });
    const { GITHUB_MCP_TOKEN: _, ...withoutIt } = env;
    expect(mcpHeaderSecrets(agent, withoutIt, { GITHUB_MCP_TOKEN: 'from-the-shell' }).secrets).toEqual({
      GITHUB_MCP_TOKEN: 'from-the-shell',
    });
  });

  it.each([
    [
      'both command and url',
      `        - {name: a, command: [x], url: "http://h/mcp"}`,
      /exactly one of command or url/,
    ],
    ['neither', `        - {name: a}`, /exactly one of command or url/],
    ['a name twice', `        - {name: a, command: [x]}\n        - {name: a, command: [y]}`, /named twice/],
    ['a bad name', `        - {name: A_B, command: [x]}`, /must be 1-32 of \[a-z0-9-\]/],
    [
      'a literal header',
      `        - {name: a, url: "http://h/mcp", headers: {Authorization: "Bearer x"}}`,
      /headers\.Authorization/,
    ],
    [
      'headers on stdio',
      `        - {name: a, command: [x], headers: {A: {env: X}}}`,
      /headers are for a url server/,
    ],
    [
      'a credential passed on',
      `        - {name: a, command: [x], env: [REDIS_URL]}`,
      /REDIS_URL is a credential/,
    ],
  ])('refuses %s', (_, servers, problem) => {
    expect(() => parseHoltFile(file(servers))).toThrow(problem);
  });

  it("on Kubernetes: the header's variable is in the pup container, not in the agent container", () => {
    const agent = {
      ...AgentSpec.parse({
        holt: 'h',
        bidding: { strategy: 'exclusive' },
        env: [
          { name: 'GITHUB_MCP_TOKEN', secretKeyRef: { name: 'gh', key: 'token' } },
          { name: 'TOOL_VAR', value: 'ok' },
        ],
        llm: {
          mcpServers: [
            {
              name: 'github',
              url: 'https://mcp.example/mcp',
              headers: { Authorization: { env: 'GITHUB_MCP_TOKEN' } },
            },
          ],
        },
      }),
      role: 'Coder',
    };
    const pod = pupPodTemplate({
      holt: 'h',
      holtSpec: HoltSpec.parse({}),
      agent,
      mode: 'standard',
      runtimeImage: 'runtime:1',
      workspaceMode: 'ro',
      labels: {},
    });
    const names = (c?: { env?: { name: string }[] }) => (c?.env ?? []).map((e) => e.name);
    const pup = pod.spec?.containers.find((c) => c.name === 'pup');
    const tools = pod.spec?.initContainers?.find((c) => c.name === 'agent');
    expect(names(pup)).toContain('GITHUB_MCP_TOKEN');
    expect(names(tools)).toContain('TOOL_VAR');
    expect(names(tools)).not.toContain('GITHUB_MCP_TOKEN');
    expect(tools?.env?.find((e) => e.name === 'HOLT_TOOL_ENV')?.value).toBe('["TOOL_VAR"]');
  });
});

describe('examples/mcp', () => {
  it('is a valid Holt file with a stdio MCP server', () => {
    const f = loadHoltFile(resolve(import.meta.dirname, '../../../examples/mcp/holt.yml'));
    const servers = f.agents[0]?.llm?.mcpServers ?? [];
    expect(servers.map((s) => [s.name, s.command?.[0], s.requireApproval])).toEqual([
      ['everything', 'npx', ['get-tiny-image']],
    ]);
  });
});
