/**
 * Validates JSON against the definitions of Gitea's own Swagger 2.0 document
 * (test/fixtures/gitea/swagger-v1.26.3.json).
 *
 * Two adjustments to match how Gitea really serialises Go structs, both deliberate:
 * - nil pointers/slices come out as `null`: properties that are a `$ref`, an array or a date-time
 *   (plus a short list of `*string` fields) also accept null;
 * - stricter than the document: no property outside the definition is allowed (catches typos in
 *   the double), except `User.username`, which Gitea emits but the document does not list.
 */
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv, type ValidateFunction } from 'ajv';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
export const SWAGGER_PATH = resolve(repoRoot, 'test/fixtures/gitea/swagger-v1.26.3.json');

type Schema = Record<string, unknown>;

const NULLABLE_SCALARS = new Set(['PullRequest.merge_commit_sha']);
const EXTRA_PROPERTIES: Record<string, Record<string, Schema>> = {
  User: { username: { type: 'string' } },
};

function nullable(s: Schema): Schema {
  return { anyOf: [s, { type: 'null' }] };
}

function adjust(name: string, def: Schema): Schema {
  const props = def.properties as Record<string, Schema> | undefined;
  if (!props) return def;
  const out: Record<string, Schema> = {};
  for (const [k, p] of Object.entries(props)) {
    const isNullable = '$ref' in p || p.type === 'array' || p.format === 'date-time' || NULLABLE_SCALARS.has(`${name}.${k}`);
    out[k] = isNullable ? nullable(p) : p;
  }
  Object.assign(out, EXTRA_PROPERTIES[name] ?? {});
  return { ...def, properties: out, additionalProperties: false };
}

let cache: { ajv: Ajv; fns: Map<string, ValidateFunction> } | undefined;

function load(): { ajv: Ajv; fns: Map<string, ValidateFunction> } {
  if (cache) return cache;
  const swagger = JSON.parse(readFileSync(SWAGGER_PATH, 'utf8')) as { definitions: Record<string, Schema> };
  const definitions: Record<string, Schema> = {};
  for (const [name, def] of Object.entries(swagger.definitions)) definitions[name] = adjust(name, def);
  const ajv = new Ajv({ strict: false, allErrors: true });
  ajv.addFormat('int64', true);
  ajv.addFormat('int32', true);
  ajv.addFormat('uint64', true);
  ajv.addFormat('float', true);
  ajv.addFormat('double', true);
  ajv.addFormat('byte', true);
  ajv.addFormat('binary', true);
  ajv.addFormat('uuid', true);
  // RFC3339 date-time as Gitea writes it (seconds, Z or an offset; fractions tolerated).
  ajv.addFormat('date-time', /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/);
  ajv.addFormat('date', /^\d{4}-\d{2}-\d{2}$/);
  ajv.addFormat('email', /^[^\s@]+@[^\s@]+$/);
  ajv.addSchema({ $id: 'gitea', definitions });
  cache = { ajv, fns: new Map() };
  return cache;
}

export type GiteaDefinition = 'Comment' | 'User' | 'RepoCollaboratorPermission' | 'Repository' | 'Issue' | 'PullRequest' | 'APIError' | (string & {});

/** Returns a list of problems (empty when `value` matches `definitions[name]`). */
export function swaggerErrors(name: GiteaDefinition, value: unknown): string[] {
  const { ajv, fns } = load();
  let fn = fns.get(name);
  if (!fn) {
    fn = ajv.compile({ $ref: `gitea#/definitions/${name}` });
    fns.set(name, fn);
  }
  if (fn(value)) return [];
  return (fn.errors ?? []).map((e) => `${e.instancePath || '(root)'} ${e.message ?? ''}${e.params && 'additionalProperty' in e.params ? `: ${String(e.params.additionalProperty)}` : ''}`);
}

/** Throws with the problems when `value` does not match `definitions[name]`. */
export function assertSwaggerShape(name: GiteaDefinition, value: unknown): void {
  const errs = swaggerErrors(name, value);
  if (errs.length) throw new Error(`not a valid Gitea ${name}:\n  ${errs.slice(0, 10).join('\n  ')}`);
}
