/** Compares the JSON shape (keys and value types, recursively) of two answers: real Gitea vs the stand-in. */

export interface ShapeDifference {
  path: string;
  real: string;
  double: string;
}

function kind(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  return typeof v;
}

/**
 * Every place where the stand-in's answer differs in shape from real Gitea's: a key only one side has,
 * or a different type. `null` on one side and a value on the other counts (Gitea's `omitempty`/null
 * choices matter to zod schemas). Arrays compare their first elements.
 */
export function shapeDifferences(real: unknown, double: unknown, path = '$'): ShapeDifference[] {
  const kr = kind(real);
  const kd = kind(double);
  if (kr !== kd) return [{ path, real: kr, double: kd }];
  if (kr === 'array') {
    const a = real as unknown[];
    const b = double as unknown[];
    if (a.length === 0 || b.length === 0) return a.length === b.length ? [] : [{ path: `${path}.length`, real: String(a.length), double: String(b.length) }];
    return shapeDifferences(a[0], b[0], `${path}[0]`);
  }
  if (kr !== 'object') return [];
  const a = real as Record<string, unknown>;
  const b = double as Record<string, unknown>;
  const out: ShapeDifference[] = [];
  for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) {
    if (!(k in b)) out.push({ path: `${path}.${k}`, real: kind(a[k]), double: '(missing)' });
    else if (!(k in a)) out.push({ path: `${path}.${k}`, real: '(missing)', double: kind(b[k]) });
    else out.push(...shapeDifferences(a[k], b[k], `${path}.${k}`));
  }
  return out;
}
