import { type Message, type Part, Role, type Task, TaskState } from '@a2a-js/sdk';
import {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
} from '@a2a-js/sdk/client';

/**
 * A call of a remote A2A agent (an asynchronous tool of a living agent, `async: a2a`): the message is
 * sent without waiting, then its task is read until it ends, needs input, or the call is aborted (its
 * deadline, a cancel: the remote task is then cancelled too). The message id is the caller's, so a
 * call sent again after a restart is the same message (a Holt agent answers it with the same task).
 */

export interface RemoteCall {
  /** The agent's A2A base URL (its card at `<url>/.well-known/agent-card.json`). */
  url: string;
  /** A bearer token, when the agent needs one. */
  token?: string;
  text: string;
  messageId: string;
  /** Continues a task that needs input (its id, from an earlier call's result). */
  taskId?: string;
  signal: AbortSignal;
  /** The first interval between reads of the task (it grows to 5 s). */
  pollMs?: number;
}

export interface RemoteResult {
  ok: boolean;
  output: string;
  error?: string;
  taskId?: string;
  state: string;
}

const TERMINAL = new Set([
  TaskState.TASK_STATE_COMPLETED,
  TaskState.TASK_STATE_FAILED,
  TaskState.TASK_STATE_CANCELED,
  TaskState.TASK_STATE_REJECTED,
  TaskState.TASK_STATE_INPUT_REQUIRED,
  TaskState.TASK_STATE_AUTH_REQUIRED,
]);

const stateName = (s: TaskState | undefined) =>
  (TaskState[s ?? TaskState.TASK_STATE_UNSPECIFIED] ?? 'TASK_STATE_UNSPECIFIED')
    .replace('TASK_STATE_', '')
    .toLowerCase();

function textOf(parts: Part[]): string {
  return parts
    .map((p) =>
      p.content?.$case === 'text'
        ? p.content.value
        : p.content?.$case === 'data'
          ? JSON.stringify(p.content.value)
          : p.content?.$case === 'url'
            ? `[file ${p.filename || ''} ${p.content.value}]`
            : p.content
              ? `[${p.content.$case} part]`
              : '',
    )
    .join('\n');
}

/** What the calling model gets of the remote task (pure). */
export function resultOf(t: Task): RemoteResult {
  const state = stateName(t.status?.state);
  const said = textOf(t.status?.message?.parts ?? []);
  const made = t.artifacts
    .map((a) => textOf(a.parts))
    .filter(Boolean)
    .join('\n\n');
  const s = t.status?.state;
  if (s === TaskState.TASK_STATE_COMPLETED) return { ok: true, output: made || said, taskId: t.id, state };
  if (s === TaskState.TASK_STATE_INPUT_REQUIRED || s === TaskState.TASK_STATE_AUTH_REQUIRED)
    return {
      ok: true,
      output: `The remote agent needs ${s === TaskState.TASK_STATE_AUTH_REQUIRED ? 'authorisation' : 'input'} to go on with task ${t.id}: ${said || '(it said nothing more)'}\nTo answer, call this tool again with task_id "${t.id}" and your answer as the message.`,
      taskId: t.id,
      state,
    };
  return {
    ok: false,
    output: made,
    error: `the remote task ${t.id} ended ${state}${said ? `: ${said}` : ''}`,
    taskId: t.id,
    state,
  };
}

/** One request's limit (the card, a send without waiting, a read, a cancel). */
const REQUEST_MS = 30_000;

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        resolve();
      },
      { once: true },
    );
  });

/** Calls the remote agent; throws only for an abort or a transport failure (the caller reports it). */
export async function callRemoteAgent(c: RemoteCall): Promise<RemoteResult> {
  // Each request on its own clock (a remote that hangs fails the call), never the call's signal, so the
  // cancel of an aborted call still goes out.
  const fetchImpl: typeof fetch = (input, init) => {
    const headers = new Headers(init?.headers);
    if (c.token) headers.set('authorization', `Bearer ${c.token}`);
    const limit = AbortSignal.timeout(REQUEST_MS);
    return fetch(input, {
      ...init,
      headers,
      signal: init?.signal ? AbortSignal.any([init.signal, limit]) : limit,
    });
  };

  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl, legacyCompat: { enabled: true } })],
      cardResolver: new DefaultAgentCardResolver({ fetchImpl, legacyCompat: { enabled: true } }),
    }),
  );
  // The card's full URL (the resolver would resolve a path against the URL's parent).
  const client = await factory.createFromUrl(`${c.url.replace(/\/+$/, '')}/.well-known/agent-card.json`, '');
  const prior = c.taskId ? await client.getTask({ tenant: '', id: c.taskId, historyLength: 0 }) : undefined;
  const message: Message = {
    messageId: c.messageId,
    contextId: prior?.contextId ?? '',
    taskId: prior?.id ?? '',
    role: Role.ROLE_USER,
    parts: [
      {
        content: { $case: 'text', value: c.text },
        mediaType: 'text/plain',
        filename: '',
        metadata: undefined,
      },
    ],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
  const sent = await client.sendMessage({
    tenant: '',
    message,
    configuration: {
      acceptedOutputModes: ['text/plain', 'application/json'],
      taskPushNotificationConfig: undefined,
      historyLength: 0,
      returnImmediately: true,
    },
    metadata: undefined,
  });
  // A reply that is a message, not a task: the agent answered at once.
  if (!('status' in sent)) return { ok: true, output: textOf(sent.parts), state: 'completed' };
  let task: Task = sent;
  let wait = c.pollMs ?? 500;
  while (!TERMINAL.has(task.status?.state ?? TaskState.TASK_STATE_UNSPECIFIED)) {
    await sleep(wait, c.signal);
    if (c.signal.aborted) {
      await client.cancelTask({ tenant: '', id: task.id, metadata: undefined }).catch(() => undefined);
      throw Object.assign(new Error(`aborted; the remote task ${task.id} was cancelled`), {
        taskId: task.id,
      });
    }
    wait = Math.min(5000, Math.round(wait * 1.5));
    task = await client.getTask({ tenant: '', id: task.id, historyLength: 0 });
  }
  return resultOf(task);
}
