import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportSpansToJaeger, type JaegerSpans } from '../../test/harness/jaeger-spans.ts';
import { artefact } from '../blackboard/testkit.ts';
import { emitWorkflowSpan, workflowOutcome, workflowSpan } from './workflow-trace.ts';

// The spans are read back from a real Jaeger.
let jaeger: JaegerSpans;
beforeAll(async () => {
  jaeger = await exportSpansToJaeger('orchestrator');
});
afterAll(() => jaeger?.stop());

const CALLER = '00f067aa0ba902b7';
// Real epoch times: the SDK reads a small number as relative to the process's time origin.
const T0 = 1_790_000_000_000;
const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';

/** The demo's shape: a goal, a draft, a review rejecting it, its rework (v2), a commit, the Terminal. */
function demo(traceId = TRACE) {
  const goal = artefact({ traceparent: `00-${traceId}-${CALLER}-01`, created_at_ms: T0 + 1_000 });
  const v1 = artefact({
    type: 'Draft',
    produced_by_role: 'Drafter',
    source_artefacts: [goal.id],
    created_at_ms: T0 + 2_000,
  });
  const rejection = artefact({
    structural_type: 'Review',
    type: 'Review',
    payload: '{"issues":["too short"]}',
    produced_by_role: 'Reviewer',
    source_artefacts: [v1.id],
    created_at_ms: T0 + 2_500,
  });
  // A rework is sourced from the version before it and the reviews that rejected it (results.ts).
  const v2 = artefact({
    type: 'Draft',
    logical_id: v1.logical_id,
    version: 2,
    produced_by_role: 'Drafter',
    source_artefacts: [v1.id, rejection.id],
    created_at_ms: T0 + 3_000,
  });
  const approval = artefact({
    structural_type: 'Review',
    type: 'Review',
    payload: '{}',
    produced_by_role: 'Reviewer',
    source_artefacts: [v2.id],
    created_at_ms: T0 + 3_500,
  });
  const commit = artefact({ type: 'CodeCommit', source_artefacts: [v2.id], created_at_ms: T0 + 4_000 });
  const end = artefact({
    structural_type: 'Terminal',
    type: 'WorkflowComplete',
    source_artefacts: [commit.id],
    created_at_ms: T0 + 5_000,
  });
  return { goal, v1, rejection, v2, approval, commit, end };
}

describe('the workflow span', () => {
  it('a Terminal completes a workflow and only the orchestrator Failure fails one', () => {
    const { end, commit } = demo();
    expect(workflowOutcome(end)).toBe('completed');
    expect(workflowOutcome(artefact({ structural_type: 'Failure', produced_by_role: 'orchestrator' }))).toBe(
      'failed',
    );
    // An agent's Failure may be retried: the workflow goes on.
    expect(
      workflowOutcome(artefact({ structural_type: 'Failure', produced_by_role: 'Drafter' })),
    ).toBeUndefined();
    expect(workflowOutcome(commit)).toBeUndefined();
  });

  it('runs from the goal to the end, each rejection and rework an event, under the span that wrote the goal', async () => {
    const { goal, v1, rejection, v2, approval, commit, end } = demo();
    const w = workflowSpan(end, [end, commit, approval, v2, rejection, v1, goal]);
    expect(w).toMatchObject({ startMs: T0 + 1_000, endMs: T0 + 5_000, outcome: 'completed' });
    expect(w?.events).toEqual([
      {
        name: 'review_rejected',
        atMs: T0 + 2_500,
        attributes: expect.objectContaining({
          'holt.artefact.id': rejection.id,
          'holt.review.target.id': v1.id,
          'gen_ai.agent.name': 'Reviewer',
        }),
      },
      {
        name: 'rework',
        atMs: T0 + 3_000,
        attributes: expect.objectContaining({ 'holt.rework.iteration': 1, 'gen_ai.agent.name': 'Drafter' }),
      },
    ]);
    emitWorkflowSpan(w!);
    const [s] = await jaeger.named(TRACE, 'workflow');
    expect(s?.parentSpanId).toBe(CALLER);
    expect(s?.attributes).toMatchObject({
      'holt.goal.id': goal.id,
      'holt.workflow.end.id': end.id,
      'holt.workflow.outcome': 'completed',
      'holt.workflow.reworks': 1,
      'holt.workflow.review_rejections': 1,
    });
    // Jaeger keeps microseconds.
    expect(s?.startTime).toBe((T0 + 1_000) * 1000);
    expect(s?.duration).toBe(4_000 * 1000);
    expect(s?.events.map((e) => e.name)).toEqual(['review_rejected', 'rework']);
    expect(s?.events[0]?.attributes).toMatchObject({ 'holt.review.target.id': v1.id });
  });

  it("the orchestrator's Failure ends it failed; without its goal among the artefacts there is none", async () => {
    const failedTrace = '5cf92f3577b34da6a3ce929d0e0e4737';
    const { goal, commit } = demo(failedTrace);
    const failure = artefact({
      structural_type: 'Failure',
      type: 'MaxIterationsExceeded',
      produced_by_role: 'orchestrator',
      source_artefacts: [commit.id],
      created_at_ms: T0 + 6_000,
    });
    const w = workflowSpan(failure, [failure, commit, goal]);
    expect(w?.outcome).toBe('failed');
    expect(w?.events.map((e) => e.name)).toEqual(['failure']);
    expect(workflowSpan(failure, [failure, commit])).toBeUndefined();
    emitWorkflowSpan(w!);
    const [s] = await jaeger.named(failedTrace, 'workflow');
    expect(s?.attributes).toMatchObject({
      'holt.workflow.outcome': 'failed',
      'holt.workflow.end.type': 'MaxIterationsExceeded',
      'otel.status_code': 'ERROR',
    });
    expect(s?.attributes['error.type']).toBeDefined();
    expect(s?.events.map((e) => e.name)).toEqual(['failure']);
  });
});
