import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import type { z } from 'zod';
import { AgentResourceSpec } from '../agent.ts';
import { HoltSpec } from '../holt.ts';
import { WorkerPoolSpec } from '../workerpool.ts';
import { crdOf, KINDS } from './crds.ts';
import { CHART_CRD_DIR, generatedFiles } from './generate.ts';
import { MALFORMED } from './malformed.testkit.ts';
import { type JSONSchemaProps, undescribed } from './schema.ts';

const ROOT = join(import.meta.dirname, '../../..');
const schemaOf = (kind: string) =>
  crdOf(KINDS.find((k) => k.kind === kind)!).spec.versions[0]!.schema!.openAPIV3Schema as JSONSchemaProps;

/** Nodes that break the structural-schema rules the API server enforces. */
function unstructural(s: JSONSchemaProps, path = '(root)'): string[] {
  const bad: string[] = [];
  if (!s.type && !s['x-kubernetes-preserve-unknown-fields']) bad.push(`${path}: no type`);
  for (const k of ['$schema', '$ref', 'anyOf', 'oneOf', 'allOf', 'propertyNames', 'const'])
    if (k in s) bad.push(`${path}: ${k}`);
  if (s.type === 'array' && !s.items) bad.push(`${path}: array without items`);
  for (const [k, v] of Object.entries(s.properties ?? {})) bad.push(...unstructural(v, `${path}.${k}`));
  if (s.items) bad.push(...unstructural(s.items, `${path}[]`));
  if (s.additionalProperties) bad.push(...unstructural(s.additionalProperties, `${path}.*`));
  return bad;
}

describe('generated CRDs', () => {
  it('crds/, the chart copy and examples/k8s/demo.yaml are up to date (run `make crds`)', () => {
    const files = generatedFiles(ROOT);
    for (const [path, content] of files) expect(readFileSync(join(ROOT, path), 'utf8'), path).toBe(content);
    for (const dir of ['crds', CHART_CRD_DIR])
      for (const f of readdirSync(join(ROOT, dir)))
        expect(files.has(`${dir}/${f}`), `${dir}/${f} is not generated`).toBe(true);
  });

  it('are structural and describe every field', () => {
    for (const k of KINDS) {
      const s = schemaOf(k.kind);
      expect(unstructural(s), k.kind).toEqual([]);
      // metadata is the API server's own schema (it refuses a description there).
      expect(
        undescribed(s).filter((p) => p !== 'metadata'),
        k.kind,
      ).toEqual([]);
    }
  });

  it('keep free-form JSON, defaults and condition list semantics', () => {
    const tool = schemaOf('Agent').properties!.spec!.properties!.llm!.properties!.tools!.items!;
    expect(tool.properties!.parameters).toMatchObject({
      type: 'object',
      'x-kubernetes-preserve-unknown-fields': true,
      default: { type: 'object', properties: {} },
    });
    const conds = schemaOf('Holt').properties!.status!.properties!.conditions!;
    expect(conds).toMatchObject({ 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['type'] });
    expect(conds.items!.required!.sort()).toEqual([
      'lastTransitionTime',
      'message',
      'reason',
      'status',
      'type',
    ]);
    const bid = schemaOf('Holt').properties!.spec!.properties!.orchestrator!.properties!.bidTimeoutSeconds!;
    expect(bid).toMatchObject({
      type: 'number',
      minimum: 0,
      exclusiveMinimum: true,
      maximum: 3600,
      default: 30,
    });
    const maxBid =
      schemaOf('Holt').properties!.spec!.properties!.orchestrator!.properties!.maxBidTimeoutSeconds!;
    expect(maxBid).toMatchObject({ type: 'number', minimum: 0, exclusiveMinimum: true, maximum: 14400 });
    expect(maxBid.default).toBeUndefined();
    // The bound below is the operator's parse (a Holt below it is Degraded, its orchestrator untouched).
    const orchestrator = (bid: number, max: number) =>
      HoltSpec.safeParse({ orchestrator: { bidTimeoutSeconds: bid, maxBidTimeoutSeconds: max } });
    expect(orchestrator(10, 40).success).toBe(true);
    expect(orchestrator(10, 10).success).toBe(true);
    expect(orchestrator(10, 5).error?.issues[0]).toMatchObject({
      path: ['orchestrator', 'maxBidTimeoutSeconds'],
      message: 'must be at least bidTimeoutSeconds',
    });
  });

  it('have status on every kind and scale on WorkerPool only', () => {
    const crds = parse(readFileSync(join(ROOT, 'crds/holt.io_workerpools.yaml'), 'utf8'));
    expect(crds.spec.versions[0].subresources).toEqual({
      status: {},
      scale: {
        specReplicasPath: '.spec.replicas',
        statusReplicasPath: '.status.replicas',
        labelSelectorPath: '.status.selector',
      },
    });
    for (const k of KINDS) expect(crdOf(k).spec.versions[0]!.subresources!.status).toEqual({});
    expect(KINDS.filter((k) => k.scale).map((k) => k.kind)).toEqual(['WorkerPool']);
  });
});

describe('zod and the CRD agree', () => {
  const zodOf: Record<string, z.ZodType> = {
    Holt: HoltSpec,
    Agent: AgentResourceSpec,
    WorkerPool: WorkerPoolSpec,
  };
  it('every malformed spec the API server rejects, zod rejects too (but metadata and CEL-only rules)', () => {
    const accepted = MALFORMED.filter((m) => !m.celOnly)
      .filter((m) => zodOf[m.doc.kind as string]!.safeParse(m.doc.spec).success)
      .map((m) => m.what);
    expect(accepted).toEqual([]);
  });
  it('the samples parse with zod', () => {
    for (const dir of ['examples/k8s', 'examples/a2a'])
      for (const f of readdirSync(join(ROOT, dir)).filter((f) => f.endsWith('.yaml')))
        for (const doc of readFileSync(join(ROOT, dir, f), 'utf8')
          .split(/^---$/m)
          .map((d) => parse(d)))
          if (doc?.apiVersion === 'holt.io/v1alpha1')
            expect(zodOf[doc.kind]!.safeParse(doc.spec).error, f).toBeUndefined();
  });
});
