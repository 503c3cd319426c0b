import { randomUUID } from 'node:crypto';
import {
  type AgentCard,
  type CancelTaskRequest,
  type ListTasksRequest,
  type ListTasksResponse,
  type Message,
  Message as MessageJson,
  Role,
  type SendMessageRequest,
  type StreamResponse,
  type SubscribeToTaskRequest,
  type Task,
  type TaskPushNotificationConfig,
  TaskState,
} from '@a2a-js/sdk';
import {
  A2AError,
  ExtendedAgentCardNotConfiguredError,
  PushNotificationNotSupportedError,
  RequestMalformedError,
  TaskNotCancelableError,
  TaskNotFoundError,
  UnsupportedOperationError,
} from '@a2a-js/sdk/errors';
import type { A2ARequestHandler } from '@a2a-js/sdk/server';
import { MAX_PRIORITY, type TokenEntry, tokenId } from '../access/tokens.ts';
import { a2aLabels, runtimeLabels } from '../life/labels.ts';
import { isFinal, type Outcome } from '../life/outcome.ts';
import type { LifeStore } from '../life/store.ts';
import type { LifeTasks } from '../life/tasks.ts';
import type { A2ATaskRow, A2ATasks, Owner } from './store.ts';
import { changeEvents, ENDS_STREAM, sameOutcome, taskView } from './view.ts';

/**
 * A living agent's A2A operations (the SDK's JSON-RPC transport calls these), all on Postgres so any
 * replica answers any task: a message queues a message for the agent (origin `a2a`, its token's
 * authority) and opens a task; the task's state is followed from it (store.ts); a cancel withdraws
 * what was not yet delivered, cancels the agent's open waits and calls of its work item and tells the
 * agent. A task is its token's alone.
 */

export interface A2ADeps {
  instance: string;
  tasks: A2ATasks;
  life: Pick<LifeStore, 'enqueue'>;
  lifeTasks: Pick<LifeTasks, 'list' | 'cancel'>;
  /** Rings the agent's doorbell. */
  ring: (role: string) => void;
  maxUndelivered: number;
  /** How long a blocking message/send waits for an end before it returns the task as it is. */
  blockMs: number;
  /** The first interval of a follow (it grows to 2 s while nothing changes). */
  pollMs: number;
  /** The longest a stream stays open (then it ends; the caller may resubscribe). */
  streamMs: number;
  now?: () => number;
}

const MAX_TEXT = 60_000;

/** A refusal the caller may read as it is (any other failure is the store's: its detail is logged, not sent). */
export class CallerError extends Error {}

/**
 * The handler with its failures made safe to send: an A2A error or a CallerError as it is, anything
 * else (a store's error names tables and hosts) as "unavailable; retry", its detail to `onError`.
 */
export function guarded(h: A2ARequestHandler, onError: (e: unknown) => void): A2ARequestHandler {
  const fix = (e: unknown): never => {
    if (e instanceof A2AError || e instanceof CallerError) throw e;
    onError(e);
    throw new CallerError('the agent store is unavailable; retry');
  };
  return new Proxy(h, {
    get(target, key, receiver) {
      const v: unknown = Reflect.get(target, key, receiver);
      if (typeof v !== 'function') return v;
      return (...args: unknown[]) => {
        const r: unknown = v.apply(target, args);
        if (r && typeof r === 'object' && Symbol.asyncIterator in r)
          return (async function* () {
            try {
              yield* r as AsyncGenerator<unknown, void, undefined>;
            } catch (e) {
              fix(e);
            }
          })();
        return r instanceof Promise ? r.catch(fix) : r;
      };
    },
  });
}
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The message's content as the agent reads it: its text parts, its data parts as JSON. */
function contentOf(m: Message): string {
  if (m.role !== Role.ROLE_USER) throw new RequestMalformedError('the message must have the role user');
  const out: string[] = [];
  for (const p of m.parts) {
    const c = p.content;
    if (c?.$case === 'text') out.push(c.value);
    else if (c?.$case === 'data') out.push(JSON.stringify(c.value));
    else throw new RequestMalformedError('only text and data parts are accepted (no files)');
  }
  const text = out.join('\n');
  if (!text.trim()) throw new RequestMalformedError('the message has no text');
  if (text.length > MAX_TEXT) throw new RequestMalformedError(`the message is over ${MAX_TEXT} characters`);
  // What Postgres text cannot hold (src/ingress/request.ts storable): refused, never a store error.
  if (text.includes('\u0000') || !text.isWellFormed())
    throw new RequestMalformedError('the message holds a NUL character or a lone surrogate');
  return text;
}

export class AgentA2AHandler implements A2ARequestHandler {
  readonly #d: A2ADeps;
  readonly #owner: Owner;
  readonly #token: TokenEntry;
  readonly #card: AgentCard;
  constructor(d: A2ADeps, token: TokenEntry, card: AgentCard) {
    this.#d = d;
    this.#token = token;
    this.#card = card;
    this.#owner = { instance: d.instance, role: token.role, tokenName: token.name };
  }

  async getAgentCard(): Promise<AgentCard> {
    return this.#card;
  }

  async getAuthenticatedExtendedAgentCard(): Promise<AgentCard> {
    throw new ExtendedAgentCardNotConfiguredError('this agent has no extended card');
  }

  async sendMessage(p: SendMessageRequest): Promise<Task> {
    const { task, outcome } = await this.#send(p);
    if (p.configuration?.returnImmediately) return this.#view(task, outcome);
    let last = outcome;
    for await (const o of this.#follow(task, outcome, this.#d.blockMs)) last = o;
    return this.#view((await this.#d.tasks.get(this.#owner, task.id)) ?? task, last);
  }

  async *sendMessageStream(p: SendMessageRequest): AsyncGenerator<StreamResponse, void, undefined> {
    const { task, outcome } = await this.#send(p);
    yield { payload: { $case: 'task', value: this.#view(task, outcome) } };
    if (ENDS_STREAM.has(this.#view(task, outcome).status?.state ?? TaskState.TASK_STATE_WORKING)) return;
    yield* this.#events(task, outcome);
  }

  async getTask(p: { id: string; historyLength?: number | undefined }): Promise<Task> {
    const t = await this.#load(p.id);
    return this.#view(t, await this.#d.tasks.outcome(t), p.historyLength);
  }

  async listTasks(p: ListTasksRequest): Promise<ListTasksResponse> {
    const pageSize = Math.min(100, Math.max(1, p.pageSize ?? 50));
    const offset = /^\d{1,9}$/.test(p.pageToken) ? Number(p.pageToken) : 0;
    const rows = await this.#d.tasks.list(this.#owner, {
      ...(p.contextId ? { contextId: p.contextId } : {}),
      limit: pageSize + 1,
      offset,
    });
    const tasks: Task[] = [];
    for (const r of rows.slice(0, pageSize)) {
      const v = this.#view(r, await this.#d.tasks.outcome(r), p.historyLength);
      if (p.status && v.status?.state !== p.status) continue;
      tasks.push(p.includeArtifacts ? v : { ...v, artifacts: [] });
    }
    const more = rows.length > pageSize;
    return { tasks, nextPageToken: more ? String(offset + pageSize) : '', pageSize, totalSize: tasks.length };
  }

  /**
   * Cancels a task not yet final: the message is withdrawn if no turn has it yet; else the agent's
   * open waits and calls of the work item it made are cancelled and the agent is told (it decides what
   * becomes of the item: its report is no longer awaited).
   */
  async cancelTask(p: CancelTaskRequest): Promise<Task> {
    const t = await this.#load(p.id);
    const o = await this.#d.tasks.outcome(t);
    if (isFinal(o)) throw new TaskNotCancelableError(`task ${t.id} is already ${o.state}`);
    const by = `A2A caller (token ${this.#token.name})`;
    const done = await this.#d.tasks.cancel(t, by);
    if (done.cancelled_by === by) await this.#stopWork(done, o, by);
    return this.#view(done, await this.#d.tasks.outcome(done));
  }

  async *resubscribe(p: SubscribeToTaskRequest): AsyncGenerator<StreamResponse, void, undefined> {
    const t = await this.#load(p.id);
    const o = await this.#d.tasks.outcome(t);
    if (isFinal(o)) throw new UnsupportedOperationError(`task ${t.id} is ${o.state}: get it with tasks/get`);
    yield { payload: { $case: 'task', value: this.#view(t, o) } };
    yield* this.#events(t, o);
  }

  async createTaskPushNotificationConfig(): Promise<TaskPushNotificationConfig> {
    throw new PushNotificationNotSupportedError(
      'no A2A push notifications: register a callback on the token (docs/agents.md § Delivery)',
    );
  }
  getTaskPushNotificationConfig = this.createTaskPushNotificationConfig;
  async listTaskPushNotificationConfigs(): Promise<never> {
    return this.createTaskPushNotificationConfig() as Promise<never>;
  }
  async deleteTaskPushNotificationConfig(): Promise<void> {
    await this.createTaskPushNotificationConfig();
  }

  /** Queues the message: a new task, or the next message of one waiting for input. */
  async #send(p: SendMessageRequest): Promise<{ task: A2ATaskRow; outcome: Outcome }> {
    const m = p.message;
    if (!m) throw new RequestMalformedError('a message is required');
    const text = contentOf(m);
    const priority = Number(m.metadata?.priority ?? p.metadata?.priority ?? 0);
    if (!Number.isInteger(priority) || priority < 0 || priority > MAX_PRIORITY)
      throw new RequestMalformedError(`priority is an integer 0-${MAX_PRIORITY}`);
    if (priority > this.#token.maxPriority)
      throw new RequestMalformedError(`this token may send priority up to ${this.#token.maxPriority}`);
    const prior = m.taskId ? await this.#load(m.taskId) : undefined;
    if (prior) {
      const o = await this.#d.tasks.outcome(prior);
      if (isFinal(o)) throw new UnsupportedOperationError(`task ${prior.id} is ${o.state}: start a new task`);
    }
    const messageId = m.messageId || randomUUID();
    const contextId = prior?.context_id ?? (m.contextId || randomUUID());
    const json = MessageJson.toJSON({ ...m, messageId, contextId, ...(prior ? { taskId: prior.id } : {}) });
    const q = await this.#d.life.enqueue({
      instance: this.#d.instance,
      role: this.#owner.role,
      key: `a2a:${messageId}`,
      scope: tokenId(this.#token),
      maxUndelivered: this.#d.maxUndelivered,
      kind: 'message',
      body: text,
      labels: {
        ...a2aLabels(this.#token.origin, `A2A /a2a/${this.#owner.role}`, `token ${this.#token.name}`),
        ...(priority ? { priority } : {}),
      },
    });
    if (q.kind === 'stopped') throw new UnsupportedOperationError(`agent ${this.#owner.role} is stopped`);
    if (q.kind === 'full')
      throw new Error(
        `agent ${this.#owner.role} already has ${q.undelivered} undelivered messages; retry later`,
      );
    if (q.kind === 'queued') this.#d.ring(this.#owner.role);
    let task: A2ATaskRow;
    if (prior) {
      if (q.kind === 'queued') await this.#d.tasks.append(prior.id, json as object);
      task = prior;
    } else task = await this.#d.tasks.open(this.#owner, q.id, contextId, json as object);
    return { task, outcome: await this.#d.tasks.outcome(task) };
  }

  async #load(id: string): Promise<A2ATaskRow> {
    const t = await this.#d.tasks.get(this.#owner, id);
    if (!t) throw new TaskNotFoundError(`no task ${id} of this token`);
    return t;
  }

  #view(t: A2ATaskRow, o: Outcome, historyLength?: number): Task {
    return taskView(t, o, new Date((this.#d.now ?? Date.now)()), historyLength);
  }

  /** Each new outcome of a task, until one ends a stream or `forMs` pass. */
  async *#follow(t: A2ATaskRow, from: Outcome, forMs: number): AsyncGenerator<Outcome> {
    const until = Date.now() + forMs;
    let last = from;
    let wait = this.#d.pollMs;
    while (Date.now() < until) {
      await sleep(Math.min(wait, Math.max(0, until - Date.now())));
      const row = (await this.#d.tasks.get(this.#owner, t.id)) ?? t;
      const o = await this.#d.tasks.outcome(row);
      if (sameOutcome(last, o)) {
        wait = Math.min(2000, Math.round(wait * 1.5));
        continue;
      }
      last = o;
      wait = this.#d.pollMs;
      yield o;
      if (ENDS_STREAM.has(this.#view(row, o).status?.state ?? TaskState.TASK_STATE_WORKING)) return;
    }
  }

  async *#events(t: A2ATaskRow, from: Outcome): AsyncGenerator<StreamResponse, void, undefined> {
    for await (const o of this.#follow(t, from, this.#d.streamMs))
      yield* changeEvents(t, o, new Date((this.#d.now ?? Date.now)()));
  }

  async #stopWork(t: A2ATaskRow, o: Outcome, by: string): Promise<void> {
    const { instance } = this.#d;
    const role = this.#owner.role;
    if (o.state === 'submitted' && (await this.#d.tasks.withdraw(t.message_id))) return;
    if (o.itemId)
      for (const w of await this.#d.lifeTasks.list(instance, role))
        if (w.itemId === o.itemId) await this.#d.lifeTasks.cancel(instance, role, w.id, by);
    await this.#d.life.enqueue({
      instance,
      role,
      key: `a2a-cancel:${t.id}`,
      kind: 'message',
      body: `The A2A task ${t.id} was cancelled by its caller (${by})${o.itemId ? `: work item ${o.itemId}, which it started, is no longer wanted; cancel it unless it is needed for other work` : ': what it asked is no longer wanted'}.`,
      labels: runtimeLabels('system', 'a2a tasks/cancel'),
    });
    this.#d.ring(role);
  }
}
