import { setTimeout as sleep } from 'node:timers/promises';
import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type { CallToolResult, ServerNotification, ServerRequest } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { Artefact } from '../blackboard/types.ts';
import { parseCarrier } from '../telemetry/carrier.ts';
import type { HoltAccess } from './access.ts';
import { summary, workflowState } from './workflow.ts';

/** wait_for_workflow waits at most this long per call (a client calls again to go on waiting). */
export const MAX_WAIT_S = 600;
/** How often a waiting call looks at the workflow again. */
const POLL_MS = 500;
/** list_artefacts returns at most this many (the newest). */
export const MAX_LIST = 500;
/** The resource lists (artefacts, workflows) name at most this many, the newest. */
const MAX_RESOURCES = 200;

const text = (value: unknown): CallToolResult => ({
  content: [{ type: 'text', text: typeof value === 'string' ? value : JSON.stringify(value, null, 2) }],
});

/**
 * A tool's body, with any error it throws given to the client as a tool error (`isError`) with its
 * message, which says what to do: a model can act on it, and the server goes on serving.
 */
const tool =
  <A>(fn: (args: A, extra: Extra) => Promise<CallToolResult>) =>
  async (args: A, extra: Extra): Promise<CallToolResult> => {
    try {
      return await fn(args, extra);
    } catch (e) {
      return { content: [{ type: 'text', text: (e as Error).message ?? String(e) }], isError: true };
    }
  };

type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

const ID = z.string().trim().min(6, 'an artefact id, or a prefix of at least 6 characters').max(200);

/** An MCP server that drives one Holt through `access`: one per client connection. */
export function holtMcpServer(access: HoltAccess, version: string): McpServer {
  const server = new McpServer(
    { name: 'holt', title: 'Holt', version },
    {
      capabilities: { logging: {} },
      instructions: `Drives ${access.describe()}: a clan of AI agents cooperating through a blackboard of artefacts. start_goal starts a workflow; wait_for_workflow follows it to its end or to a question for you; list_questions and answer_question answer the agents; read_artefact and the holt://artefact/{id} resource show what they made; holt://workflow/{goal}/graph draws it as Mermaid.`,
    },
  );

  server.registerTool(
    'start_goal',
    {
      title: 'Start a goal',
      description:
        'Start a workflow: write a GoalDefined artefact with this goal (as `holt forage`). Returns the goal artefact id, which names the workflow. A local Holt refuses to start while its git workspace has uncommitted changes unless allow_dirty is true.',
      inputSchema: {
        goal: z.string().trim().min(1, 'the goal must not be empty').max(100_000),
        allow_dirty: z.boolean().default(false),
      },
    },
    tool(async ({ goal, allow_dirty }, extra) => {
      // The caller's trace context, where MCP clients that trace put it (params._meta.traceparent).
      const id = await access.startGoal(goal, allow_dirty, parseCarrier(extra._meta));
      return text({ goal_id: id });
    }),
  );

  server.registerTool(
    'status',
    {
      title: 'Status',
      description:
        "The Holt's status, as `holt status --json`: its components or pods, claims by status, dormant claims and why, LLM agents' budgets and pauses, quarantine.",
      inputSchema: {},
      annotations: { readOnlyHint: true },
    },
    tool(async () => text(await access.status())),
  );

  server.registerTool(
    'list_artefacts',
    {
      title: 'List artefacts',
      description: `Artefacts on the blackboard, oldest first, with the start of each payload (read_artefact gives all of one). Filters: type (a glob such as Draft*), agent (the producing role), goal (one workflow: its goal id or a prefix of 6+ characters); limit keeps the newest (default 50, at most ${MAX_LIST}).`,
      inputSchema: {
        type: z.string().min(1).max(200).optional(),
        agent: z.string().min(1).max(200).optional(),
        goal: ID.optional(),
        limit: z.number().int().min(1).max(MAX_LIST).default(50),
      },
      annotations: { readOnlyHint: true },
    },
    tool(async ({ type, agent, goal, limit }) => {
      const all = await access.artefacts({ type, agent, goal });
      return text({
        total: all.length,
        artefacts: all.slice(-limit).map((a) => summary(a)),
      });
    }),
  );

  server.registerTool(
    'read_artefact',
    {
      title: 'Read an artefact',
      description: 'One artefact, whole: by its id or a prefix of 6+ characters (as `holt hoard ID`).',
      inputSchema: { id: ID },
      annotations: { readOnlyHint: true },
    },
    tool(async ({ id }) => text(await access.artefact(id))),
  );

  server.registerTool(
    'wait_for_workflow',
    {
      title: 'Wait for a workflow',
      description: `Follow a workflow until it completes (a Terminal artefact), fails (the orchestrator's Failure), asks a question nobody answered yet, or timeout_seconds pass (default 50, at most ${MAX_WAIT_S}; call again to wait longer). While it waits, sends a progress notification per new artefact when the request has a progressToken. Returns the state and the workflow's artefacts.`,
      inputSchema: {
        goal: ID,
        timeout_seconds: z.number().int().min(1).max(MAX_WAIT_S).default(50),
      },
      annotations: { readOnlyHint: true },
    },
    tool(async ({ goal, timeout_seconds }, extra) => {
      const deadline = Date.now() + timeout_seconds * 1000;
      const token = extra._meta?.progressToken;
      let seen = 0;
      for (;;) {
        const artefacts = await access.artefacts({ goal });
        const st = workflowState(artefacts);
        const timedOut = Date.now() >= deadline;
        if (st.state !== 'running' || timedOut || extra.signal.aborted)
          return text({
            goal: artefacts[0]?.id ?? goal,
            ...st,
            ...(st.state === 'running' ? { timed_out: timedOut } : {}),
            artefacts: artefacts.map((a) => summary(a)),
          });
        // Not with the result: the SDK's client drops a progress that arrives in the same read as the
        // result (it forgets the token first), and the result lists every artefact anyway.
        if (token !== undefined && artefacts.length > seen) {
          const last = artefacts.at(-1) as Artefact;
          seen = artefacts.length;
          await extra.sendNotification({
            method: 'notifications/progress',
            params: {
              progressToken: token,
              progress: seen,
              message: `${seen} artefacts; the latest ${last.type} by ${last.produced_by_role}`,
            },
          });
        }
        await sleep(Math.min(POLL_MS, Math.max(0, deadline - Date.now())), undefined, {
          signal: extra.signal,
        }).catch(() => undefined);
      }
    }),
  );

  server.registerTool(
    'list_questions',
    {
      title: 'List open questions',
      description:
        'Questions agents asked that no Answer cites yet, oldest first (as `holt questions`). Answer one with answer_question.',
      inputSchema: {},
      annotations: { readOnlyHint: true },
    },
    tool(async () => text({ questions: (await access.questions()).map((q) => summary(q, 2000)) })),
  );

  server.registerTool(
    'answer_question',
    {
      title: 'Answer a question',
      description:
        'Answer a Question artefact (its id or a prefix of 6+ characters); the asking agent resumes.',
      inputSchema: {
        question_id: ID,
        text: z.string().trim().min(1, 'the answer must not be empty').max(100_000),
      },
    },
    tool(async ({ question_id, text: answer }) => {
      const r = await access.answer(question_id, answer);
      return text({ answer_id: r.answerId, question_id: r.questionId });
    }),
  );

  server.registerTool(
    'send_message',
    {
      title: 'Send a message to a living agent',
      description:
        "Queue a message for a living agent (llm.life) through its ingress, as `holt send ROLE TEXT`: it reaches the agent as an operator's instruction.",
      inputSchema: {
        agent: z.string().trim().min(1).max(200),
        text: z.string().trim().min(1, 'the message must not be empty').max(100_000),
      },
    },
    tool(async ({ agent, text: message }) => text(await access.send(agent, message))),
  );

  registerResources(server, access);
  return server;
}

/**
 * The artefacts for a resource list: none when the Holt cannot be read (not started, stopped). A list is
 * a catalogue a client browses; the tools and a resource's read say what is wrong.
 */
async function listed(access: HoltAccess, filter: { type?: string }): Promise<Artefact[]> {
  return (await access.artefacts(filter).catch(() => [])).slice(-MAX_RESOURCES);
}

function registerResources(server: McpServer, access: HoltAccess): void {
  server.registerResource(
    'artefact',
    new ResourceTemplate('holt://artefact/{id}', {
      list: async () => ({
        resources: (await listed(access, {})).map((a) => ({
          uri: `holt://artefact/${a.id}`,
          name: `${a.type} ${a.id.slice(0, 8)}`,
          description: `${a.structural_type} by ${a.produced_by_role}`,
          mimeType: 'application/json',
        })),
      }),
    }),
    { title: 'Artefact', description: 'One artefact as JSON, by id', mimeType: 'application/json' },
    async (uri, { id }) => {
      const a = await access.artefact(String(id));
      return {
        contents: [{ uri: uri.href, mimeType: 'application/json', text: JSON.stringify(a, null, 2) }],
      };
    },
  );
  server.registerResource(
    'workflow-graph',
    new ResourceTemplate('holt://workflow/{goal}/graph', {
      list: async () => ({
        resources: (await listed(access, { type: 'GoalDefined' })).map((g) => ({
          uri: `holt://workflow/${g.id}/graph`,
          name: `workflow ${g.id.slice(0, 8)}: ${g.payload.slice(0, 60)}`,
          mimeType: 'text/vnd.mermaid',
        })),
      }),
    }),
    {
      title: 'Workflow graph',
      description:
        "A workflow's artefact graph as Mermaid (as `holt graph --goal`): who made what from what, verdicts, rework",
      mimeType: 'text/vnd.mermaid',
    },
    async (uri, { goal }) => ({
      contents: [{ uri: uri.href, mimeType: 'text/vnd.mermaid', text: await access.graph(String(goal)) }],
    }),
  );
}
