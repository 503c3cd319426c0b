import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { Blackboard } from '../../blackboard/client.ts';
import { VERSION } from '../../common/version.ts';
import { toMermaid } from '../../graph/render.ts';
import type { HoltAccess } from '../../mcp-server/access.ts';
import { holtMcpServer } from '../../mcp-server/server.ts';
import {
  answerQuestion,
  createGoal,
  drawBoard,
  findArtefact,
  listArtefacts,
  openQuestions,
} from '../board.ts';
import type { KubeHolt } from '../kube.ts';
import { CliError, EXIT, err } from '../output.ts';
import { resolveTarget } from '../resolve.ts';
import { queueKube, queueLocal } from '../send.ts';
import { kubeStatusJson, kubeStatusReport, localStatus, localStatusJson } from '../status-report.ts';
import { checkClean } from './forage.ts';

/**
 * The Holt an MCP client drives, from the functions the other commands use. The local instance is
 * resolved at each call (as each `holt` command resolves it), so `holt mcp` may start before `holt up`
 * and follows the instance through a restart; the blackboard connection is kept while it stays the same.
 */
export function holtAccess(o: { name?: string }, k?: KubeHolt): HoltAccess & { close(): Promise<void> } {
  let open: { key: string; bb: Blackboard } | undefined;
  const board = async (): Promise<Blackboard> => {
    const s = resolveTarget(o.name);
    const key = `${s.name} ${s.redisUrl}`;
    if (open?.key === key) return open.bb;
    await open?.bb.close();
    // One retry: a stopped instance is an error the client sees now, not a call that hangs.
    const bb = Blackboard.connect(s.redisUrl, s.name, { ...s.redisOptions, maxRetriesPerRequest: 1 });
    bb.redis.on('error', () => undefined); // each call reports its own failure
    open = { key, bb };
    return bb;
  };
  return {
    describe: () =>
      k ? `the Holt ${k.namespace}/${k.name}` : `the local Holt instance ${o.name ?? 'of this workspace'}`,
    async startGoal(text, allowDirty, trace) {
      const s = resolveTarget(o.name);
      if (!allowDirty && s.workspace) {
        try {
          checkClean(s.workspace);
        } catch (e) {
          throw new CliError((e as Error).message.replace('--allow-dirty', 'allow_dirty: true'), EXIT.dirty);
        }
      }
      return createGoal(await board(), text, undefined, trace);
    },
    status: async () =>
      k ? kubeStatusJson(k, await kubeStatusReport(k)) : localStatusJson(await localStatus(o.name)),
    artefacts: async (f) => listArtefacts(await board(), f),
    artefact: async (id) => findArtefact(await board(), id),
    questions: async () => openQuestions(await board()),
    answer: async (id, text) => answerQuestion(await board(), id, text),
    send: (role, text) =>
      k ? queueKube(k, 'messages', role, text, {}) : queueLocal('messages', role, text, { name: o.name }),
    async graph(goal) {
      const g = await drawBoard(await board(), goal);
      return toMermaid(g);
    },
    async close() {
      await open?.bb.close();
      open = undefined;
    },
  };
}

/**
 * `holt mcp`: an MCP server on standard input and output for one client (an IDE's assistant), until
 * the client closes standard input. Standard output carries the protocol only; anything else goes to
 * standard error.
 */
export async function mcp(o: { name?: string }, k?: KubeHolt): Promise<void> {
  const access = holtAccess(o, k);
  const server = holtMcpServer(access, VERSION);
  const transport = new StdioServerTransport();
  const closed = new Promise<void>((resolve) => {
    transport.onclose = resolve;
  });
  const stop = () => void server.close().catch(() => undefined);
  process.stdin.once('end', stop);
  // A client gone mid-answer (EPIPE) ends the session, as its closing standard input does.
  process.stdout.on('error', stop);
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  await server.connect(transport);
  err(`holt mcp: serving ${access.describe()} on standard input and output`);
  await closed;
  await access.close();
}
