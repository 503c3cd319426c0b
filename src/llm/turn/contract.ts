import { z } from 'zod';
import { endingToolNames, type ResultField } from '../../api/agent.ts';
import { formatIssues } from '../../common/config.ts';
import { SUBMIT_RESULT } from '../tools/tools.ts';

/**
 * A turn's contract (docs/runtime-model.md § How a turn ends): which calls may end it (`must_end_with`) and what its result must
 * carry (the agent's declared result fields). Pure decisions the loop asks before it ends a turn.
 */

export type ResultFields = Record<string, z.output<typeof ResultField>>;

const TYPES: Record<z.output<typeof ResultField>['type'], () => z.ZodType> = {
  string: () => z.string(),
  number: () => z.number(),
  integer: () => z.number().int(),
  boolean: () => z.boolean(),
  object: () => z.record(z.string(), z.unknown()),
  array: () => z.array(z.unknown()),
};

/** Whether a call to `tool` may end the turn. */
export function mayEndWith(tool: string, mustEndWith: string | undefined): boolean {
  const only = endingToolNames(mustEndWith);
  return !only.length || only.includes(tool);
}

/** The tools offered on a turn's last step: the ones it may end with (submit_result when any end is fine). */
export function finalTools(mustEndWith: string | undefined): string[] {
  const only = endingToolNames(mustEndWith);
  return only.length ? only : [SUBMIT_RESULT];
}

/** The fields, one line each, for the prompt and submit_result's description. */
export function describeFields(fields: ResultFields | undefined): string {
  if (!fields || !Object.keys(fields).length) return '';
  return Object.entries(fields)
    .map(
      ([name, f]) =>
        `- ${name} (${f.type}, ${f.required ? 'required' : 'optional'})${f.description ? `: ${f.description}` : ''}`,
    )
    .join('\n');
}

/**
 * Why a result's payload does not carry the declared fields (it must be a JSON object with each
 * required field, of its type; other fields are allowed), or null when it does or none are declared.
 */
export function resultProblem(payload: string, fields: ResultFields | undefined): string | null {
  if (!fields || !Object.keys(fields).length) return null;
  const names = Object.keys(fields).join(', ');
  let v: unknown;
  try {
    v = JSON.parse(payload);
  } catch {
    return `the payload must be a JSON object with the fields ${names}, and it is not JSON`;
  }
  if (!v || typeof v !== 'object' || Array.isArray(v))
    return `the payload must be a JSON object with the fields ${names}`;
  const shape = Object.fromEntries(
    Object.entries(fields).map(([name, f]) => [
      name,
      f.required ? TYPES[f.type]() : TYPES[f.type]().optional(),
    ]),
  );
  const r = z.looseObject(shape).safeParse(v);
  return r.success ? null : formatIssues(r.error);
}
