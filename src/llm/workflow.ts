import { z } from 'zod';
import type { WorkflowStep } from '../api/agent.ts';
import type { Artefact } from '../blackboard/types.ts';
import { type ResultFields, resultProblem } from './turn/contract.ts';

/**
 * An agent as a workflow of steps (docs/runtime-model.md § Workflow agents): `llm` steps (a prompt template and the fields of the JSON
 * they answer with), `code` steps (a command, or a declared tool, with arguments from earlier outputs)
 * and `branch` steps (the next step chosen by a field). Pure: templates, output checks and the choice of
 * the next step. Each finished step is stored as a step of the turn (workflow-run.ts), so a killed pup
 * resumes at the step where it stopped.
 */

export type Step = z.output<typeof WorkflowStep>;
/** Outputs of the finished steps, by name: an object for a step with declared fields, else its text. */
export type Outputs = Record<string, unknown>;

/** The key of the self-audit among the outputs (`self` is no step's name). */
export const SELF = 'self';

/** Where a branch may go besides a step: the end of the workflow. */
export const END = 'end';

const REF = /\{\{\s*([A-Za-z_][A-Za-z0-9_-]*)(?:\.([A-Za-z_][A-Za-z0-9_]*))?\s*\}\}/g;

/** The value `name` or `name.field` refers to: the target artefact's fields, or an earlier step's output. */
function lookup(
  name: string,
  field: string | undefined,
  target: Artefact,
  outputs: Outputs,
): { ok: true; value: unknown } | { ok: false; error: string } {
  if (name === 'self') {
    // The agent's self-audit, read when the run started (workflow-run.ts), kept with its outputs.
    const audit = outputs[SELF] as Record<string, unknown> | undefined;
    if (!audit) return { ok: false, error: '{{self}} needs the self-audit, which is off for this agent' };
    if (!field) return { ok: true, value: audit };
    return field in audit
      ? { ok: true, value: audit[field] }
      : { ok: false, error: `self has no field ${field}` };
  }
  if (name === 'target') {
    if (!field) return { ok: true, value: target.payload };
    const v = (target as unknown as Record<string, unknown>)[field];
    return v === undefined ? { ok: false, error: `target has no field ${field}` } : { ok: true, value: v };
  }
  if (!(name in outputs)) return { ok: false, error: `{{${name}}} names no earlier step` };
  const out = outputs[name];
  if (!field) return { ok: true, value: out };
  const v = out && typeof out === 'object' ? (out as Record<string, unknown>)[field] : undefined;
  return v === undefined
    ? { ok: false, error: `step ${name} has no field ${field}` }
    : { ok: true, value: v };
}

const text = (v: unknown) => (typeof v === 'string' ? v : JSON.stringify(v));

/**
 * A template with `{{target}}`, `{{target.type}}`, `{{step}}`, `{{step.field}}` and `{{self.field}}` filled in; an unknown
 * reference is an error (the step's input does not validate), never an empty string.
 */
export function render(
  template: string,
  target: Artefact,
  outputs: Outputs,
): { ok: true; value: string } | { ok: false; error: string } {
  let error: string | undefined;
  const value = template.replace(REF, (_, name: string, field: string | undefined) => {
    const r = lookup(name, field, target, outputs);
    if (!r.ok) {
      error ??= r.error;
      return '';
    }
    return text(r.value);
  });
  return error ? { ok: false, error } : { ok: true, value };
}

/** A step's raw output → its stored value: parsed and checked when it declares fields, else the text. */
export function stepOutput(
  raw: string,
  fields: ResultFields | undefined,
): { ok: true; value: unknown } | { ok: false; error: string } {
  if (!fields || !Object.keys(fields).length) return { ok: true, value: raw };
  const problem = resultProblem(raw, fields);
  return problem ? { ok: false, error: problem } : { ok: true, value: JSON.parse(raw) };
}

/** The first JSON object in a model's reply (models wrap JSON in prose or fences), as text. */
export function jsonIn(reply: string): string {
  const start = reply.indexOf('{');
  const end = reply.lastIndexOf('}');
  return start >= 0 && end > start ? reply.slice(start, end + 1) : reply;
}

/**
 * The index of the step to run after step `i`: the next one, or a branch's case for its field's value
 * (its default otherwise); -1 ends the workflow.
 */
export function nextIndex(
  steps: Step[],
  i: number,
  outputs: Outputs,
  target: Artefact,
): { ok: true; index: number } | { ok: false; error: string } {
  const step = steps[i];
  if (!step?.branch) return { ok: true, index: i + 1 < steps.length ? i + 1 : -1 };
  const [name = '', field] = step.branch.field.split('.');
  const r = lookup(name, field, target, outputs);
  const key = r.ok ? text(r.value) : undefined;
  const to = (key !== undefined ? step.branch.cases[key] : undefined) ?? step.branch.default;
  if (to === undefined)
    return {
      ok: false,
      error: `branch ${step.name}: no case for ${key === undefined ? 'a missing value' : JSON.stringify(key)} and no default`,
    };
  if (to === END) return { ok: true, index: -1 };
  const index = steps.findIndex((s) => s.name === to);
  return index < 0 ? { ok: false, error: `branch ${step.name}: no step named ${to}` } : { ok: true, index };
}

/** What a workflow's fold keeps: the outputs so far, the step to run next, and the last output. */
export const WorkflowState = z.object({
  outputs: z.record(z.string(), z.unknown()).default({}),
  next: z.number().int().default(0),
  last: z.string().optional(),
});
export type WorkflowState = z.infer<typeof WorkflowState>;
