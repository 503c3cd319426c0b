import { z } from 'zod';

/** A node of a CRD's openAPIV3Schema (the subset Kubernetes accepts). */
export interface JSONSchemaProps {
  type?: 'object' | 'array' | 'string' | 'integer' | 'number' | 'boolean';
  description?: string;
  properties?: Record<string, JSONSchemaProps>;
  additionalProperties?: JSONSchemaProps;
  items?: JSONSchemaProps;
  required?: string[];
  enum?: unknown[];
  default?: unknown;
  format?: string;
  pattern?: string;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: boolean;
  exclusiveMaximum?: boolean;
  minLength?: number;
  maxLength?: number;
  minItems?: number;
  maxItems?: number;
  'x-kubernetes-preserve-unknown-fields'?: boolean;
  'x-kubernetes-list-type'?: 'atomic' | 'set' | 'map';
  'x-kubernetes-list-map-keys'?: string[];
  'x-kubernetes-validations'?: ValidationRule[];
}

export interface ValidationRule {
  rule: string;
  message?: string;
  messageExpression?: string;
  fieldPath?: string;
  reason?: string;
}

type Json = Record<string, unknown>;

const TYPES = new Set(['object', 'array', 'string', 'integer', 'number', 'boolean']);
// zod writes JS's safe-integer bounds for .int(); they say nothing to a user, and int64 covers them.
const SAFE = Number.MAX_SAFE_INTEGER;

/**
 * zod → structural OpenAPI v3 for a CRD. zod emits JSON Schema 2020-12; Kubernetes wants OpenAPI 3.0
 * and a structural schema (a `type` on every node, no $ref/anyOf/propertyNames). Anything that cannot
 * be expressed throws, so a schema change that would produce a broken CRD fails generation, not apply.
 */
export function toStructural(schema: z.ZodType): JSONSchemaProps {
  const json = z.toJSONSchema(schema, { io: 'input', target: 'draft-2020-12' }) as Json;
  return convert(json, '');
}

function convert(node: Json, path: string): JSONSchemaProps {
  for (const bad of ['$ref', 'anyOf', 'oneOf', 'allOf', 'not', 'const', 'prefixItems'])
    if (bad in node) throw new Error(`${path || '(root)'}: "${bad}" cannot be used in a structural schema`);
  const out: JSONSchemaProps = {};
  const type = node.type;
  if (type === undefined) {
    // z.unknown(): free-form JSON (tool parameters and the like).
    out['x-kubernetes-preserve-unknown-fields'] = true;
    if (typeof node.description === 'string') out.description = node.description;
    return out;
  }
  if (typeof type !== 'string' || !TYPES.has(type))
    throw new Error(`${path}: unsupported type ${String(type)}`);
  out.type = type as JSONSchemaProps['type'];
  if (typeof node.description === 'string') out.description = node.description;
  if (Array.isArray(node.enum)) out.enum = node.enum;
  if ('default' in node) out.default = node.default;
  if (typeof node.format === 'string') out.format = node.format;
  // date-time has a format Kubernetes checks; zod's long regex for it only adds noise to errors.
  if (typeof node.pattern === 'string' && node.format !== 'date-time') out.pattern = node.pattern;
  copyBounds(node, out);
  if (type === 'object') convertObject(node, out, path);
  if (type === 'array') {
    if (typeof node.items !== 'object' || node.items === null)
      throw new Error(`${path}: array without items`);
    out.items = convert(node.items as Json, `${path}[]`);
  }
  for (const [k, v] of Object.entries(node)) if (k.startsWith('x-kubernetes-')) (out as Json)[k] = v;
  return out;
}

function convertObject(node: Json, out: JSONSchemaProps, path: string): void {
  const props = node.properties as Record<string, Json> | undefined;
  if (props) {
    out.properties = {};
    for (const [k, v] of Object.entries(props)) out.properties[k] = convert(v, path ? `${path}.${k}` : k);
    if (Array.isArray(node.required) && node.required.length) out.required = node.required as string[];
  }
  const ap = node.additionalProperties;
  if (ap !== undefined && ap !== false) {
    const free = ap === true || (typeof ap === 'object' && ap !== null && Object.keys(ap).length === 0);
    if (free) out['x-kubernetes-preserve-unknown-fields'] = true;
    else out.additionalProperties = convert(ap as Json, `${path}.*`);
  }
}

function copyBounds(node: Json, out: JSONSchemaProps): void {
  const num = (k: string) => (typeof node[k] === 'number' ? (node[k] as number) : undefined);
  const min = num('minimum');
  const max = num('maximum');
  const xmin = num('exclusiveMinimum');
  const xmax = num('exclusiveMaximum');
  if (xmin !== undefined) {
    out.minimum = xmin;
    out.exclusiveMinimum = true;
  } else if (min !== undefined && min > -SAFE) out.minimum = min;
  if (xmax !== undefined) {
    out.maximum = xmax;
    out.exclusiveMaximum = true;
  } else if (max !== undefined && max < SAFE) out.maximum = max;
  for (const k of ['minLength', 'maxLength', 'minItems', 'maxItems'] as const) {
    const v = num(k);
    if (v !== undefined) out[k] = v;
  }
}

/** Every property path whose schema lacks a description (kubectl explain would show nothing). */
export function undescribed(s: JSONSchemaProps, path = ''): string[] {
  const missing: string[] = [];
  for (const [k, v] of Object.entries(s.properties ?? {})) {
    const p = path ? `${path}.${k}` : k;
    if (!v.description) missing.push(p);
    missing.push(...undescribed(v, p));
  }
  if (s.items) missing.push(...undescribed(s.items, `${path}[]`));
  if (s.additionalProperties) missing.push(...undescribed(s.additionalProperties, `${path}.*`));
  return missing;
}

/** The node at a dotted path of properties (`[]` steps into array items), for attaching CEL rules. */
export function at(root: JSONSchemaProps, path: string): JSONSchemaProps {
  let node = root;
  for (const step of path.split('.').filter(Boolean)) {
    const next = step === '[]' ? node.items : node.properties?.[step];
    if (!next) throw new Error(`no schema node at ${path} (step ${step})`);
    node = next;
  }
  return node;
}
