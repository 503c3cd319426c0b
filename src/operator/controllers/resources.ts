import type { z } from 'zod';
import { AgentResourceSpec as AgentResourceSchema } from '../../api/agent.ts';
import { HoltSpec } from '../../api/holt.ts';
import { WorkerPoolSpec } from '../../api/workerpool.ts';
import { formatIssues } from '../../common/config.ts';
import type { KubeObject } from '../kube/kube.ts';
import type { AgentResourceSpec } from '../specs/agent.ts';

export type Parsed<T> = { ok: true; spec: T } | { ok: false; error: string };

function parse<S extends z.ZodType>(schema: S, obj: KubeObject): Parsed<z.infer<S>> {
  const r = schema.safeParse(obj.spec ?? {});
  return r.success ? { ok: true, spec: r.data } : { ok: false, error: formatIssues(r.error) };
}

export const parseHolt = (o: KubeObject): Parsed<HoltSpec> => parse(HoltSpec, o);
export const parsePool = (o: KubeObject): Parsed<WorkerPoolSpec> => parse(WorkerPoolSpec, o);

/** An Agent's spec with its role defaulted to metadata.name (as `kubectl apply` of a minimal Agent expects). */
export function parseAgent(o: KubeObject): Parsed<AgentResourceSpec> {
  // The API's own schema (the one the CRD is generated from), so nothing it allows is dropped here.
  const r = parse(AgentResourceSchema, o);
  if (!r.ok) return r;
  return { ok: true, spec: { ...r.spec, role: r.spec.role ?? o.metadata.name } };
}

/** The `holt` an Agent or WorkerPool names, without validating the rest (for event routing). */
export function holtOf(o: KubeObject): string | undefined {
  const h = (o.spec as { holt?: unknown } | undefined)?.holt;
  return typeof h === 'string' ? h : undefined;
}

export const keyOf = (namespace: string | undefined, name: string) => `${namespace ?? 'default'}/${name}`;
export function splitKey(key: string): [string, string] {
  const i = key.indexOf('/');
  return [key.slice(0, i), key.slice(i + 1)];
}
