import { randomUUID } from 'node:crypto';
import type { WorkItem } from './items.ts';

/** Shared by the tests of work items and of the living agent's loop (not a test file itself). */

/** An open, ready work item with a fresh id, made at time 0; `over` wins. */
export const workItem = (over: Partial<WorkItem> = {}): WorkItem => ({
  id: randomUUID(),
  instance: 'i',
  role: 'r',
  objective: 'ship the fix',
  state: 'open',
  planStatus: 'ready',
  todos: [],
  blockedBy: [],
  recheckAtMs: null,
  report: null,
  createdAtMs: 0,
  updatedAtMs: 0,
  ...over,
});
