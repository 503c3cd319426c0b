import {
  type Artifact,
  type Message,
  Message as MessageJson,
  type Part,
  Role,
  type StreamResponse,
  type Task,
  TaskState,
} from '@a2a-js/sdk';
import type { Outcome, OutcomeState } from '../life/outcome.ts';
import type { A2ATaskRow } from './store.ts';

/**
 * What an A2A caller sees of a task (pure): its row and outcome as an A2A `Task` (ts-proto objects,
 * serialised by the SDK's transport), and the stream events between two views of it.
 */

const STATE: Record<OutcomeState, TaskState> = {
  submitted: TaskState.TASK_STATE_SUBMITTED,
  working: TaskState.TASK_STATE_WORKING,
  input_required: TaskState.TASK_STATE_INPUT_REQUIRED,
  completed: TaskState.TASK_STATE_COMPLETED,
  failed: TaskState.TASK_STATE_FAILED,
  canceled: TaskState.TASK_STATE_CANCELED,
};

/** A stream ends at these (v1.0 has no `final` flag: a terminal or interrupted state ends it). */
export const ENDS_STREAM: ReadonlySet<TaskState> = new Set([
  TaskState.TASK_STATE_COMPLETED,
  TaskState.TASK_STATE_FAILED,
  TaskState.TASK_STATE_CANCELED,
  TaskState.TASK_STATE_REJECTED,
  TaskState.TASK_STATE_INPUT_REQUIRED,
]);

export const textPart = (text: string): Part => ({
  content: { $case: 'text', value: text },
  mediaType: 'text/plain',
  filename: '',
  metadata: undefined,
});

/** The agent's words in a status (what it waits for, why it failed). */
const agentMessage = (t: A2ATaskRow, o: Outcome, text: string): Message => ({
  messageId: `${t.id}:${o.state}:${o.turnId ?? ''}`,
  contextId: t.context_id,
  taskId: t.id,
  role: Role.ROLE_AGENT,
  parts: [textPart(text)],
  metadata: undefined,
  extensions: [],
  referenceTaskIds: [],
});

/** The status message: what input is required, why it failed or was cancelled. */
function statusText(o: Outcome): string | undefined {
  if (o.state === 'input_required') return `Waiting for ${o.text || 'an operator'}.`;
  if (o.state === 'failed' || o.state === 'canceled') return o.text;
  return undefined;
}

/** The completion report (or the turn's final text), as the task's one artifact. */
export function outcomeArtifact(t: A2ATaskRow, o: Outcome): Artifact | undefined {
  if (o.state !== 'completed') return undefined;
  return {
    artifactId: `${t.id}:outcome`,
    name: o.itemId ? 'report' : 'answer',
    description: o.itemId ? `The completion report of work item ${o.itemId}.` : "The agent's answer.",
    parts: [textPart(o.text ?? '')],
    metadata: o.itemId ? { work_item: o.itemId } : undefined,
    extensions: [],
  };
}

export function taskView(t: A2ATaskRow, o: Outcome, at: Date, historyLength?: number): Task {
  const said = statusText(o);
  const history = t.history.map((m) => MessageJson.fromJSON(m));
  const artifact = outcomeArtifact(t, o);
  return {
    id: t.id,
    contextId: t.context_id,
    status: {
      state: STATE[o.state],
      message: said ? agentMessage(t, o, said) : undefined,
      timestamp: at.toISOString(),
    },
    artifacts: artifact ? [artifact] : [],
    history:
      historyLength === undefined ? history : history.slice(Math.max(0, history.length - historyLength)),
    metadata: { agent: t.role, ...(o.itemId ? { work_item: o.itemId } : {}) },
  };
}

/** A change of state as stream events: the artifact (once completed), then the status. */
export function changeEvents(t: A2ATaskRow, o: Outcome, at: Date): StreamResponse[] {
  const v = taskView(t, o, at);
  const artifact = outcomeArtifact(t, o);
  return [
    ...(artifact
      ? [
          {
            payload: {
              $case: 'artifactUpdate' as const,
              value: {
                taskId: t.id,
                contextId: t.context_id,
                artifact,
                append: false,
                lastChunk: true,
                metadata: undefined,
              },
            },
          },
        ]
      : []),
    {
      payload: {
        $case: 'statusUpdate' as const,
        value: { taskId: t.id, contextId: t.context_id, status: v.status, metadata: undefined },
      },
    },
  ];
}

/** The same outcome, as far as a caller can tell (a stream sends an event only on a change). */
export const sameOutcome = (a: Outcome | undefined, b: Outcome) =>
  !!a && a.state === b.state && (a.text ?? '') === (b.text ?? '') && a.itemId === b.itemId;
