// The in-memory copy of a record or audit event must equal what replay rebuilds from its journal
// text, i.e. JSON.parse(JSON.stringify(value)), deep-frozen. For plain JSON data (what every writer
// of the store hands it) a copy made by walking the value is that very result, without parsing
// back the text the journal needs anyway: the strings are shared, only the containers are new.
// Anything JSON would change (undefined, a Date or other toJSON, NaN, -0, a class instance, a
// function, a hole) makes the walk give up, and the caller takes the JSON round trip instead.

const GIVE_UP: unique symbol = Symbol('not plain JSON');

function copy(value: unknown, depth: number): unknown {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value;
    case 'number':
      // JSON writes NaN/Infinity as null and -0 as 0.
      return Number.isFinite(value) && !Object.is(value, -0) ? value : GIVE_UP;
    case 'object': {
      if (value === null) return null;
      if (depth > 64) return GIVE_UP;
      if (Array.isArray(value)) {
        const out = new Array<unknown>(value.length);
        for (let i = 0; i < value.length; i++) {
          if (!(i in value)) return GIVE_UP;
          const item = copy(value[i], depth + 1);
          if (item === GIVE_UP) return GIVE_UP;
          out[i] = item;
        }
        return Object.freeze(out);
      }
      const proto = Object.getPrototypeOf(value) as unknown;
      if (proto !== Object.prototype && proto !== null) return GIVE_UP;
      const out: Record<string, unknown> = {};
      for (const key of Object.keys(value)) {
        const item = copy((value as Record<string, unknown>)[key], depth + 1);
        if (item === GIVE_UP) return GIVE_UP;
        out[key] = item;
      }
      return Object.freeze(out);
    }
    default:
      return GIVE_UP;
  }
}

/**
 * `JSON.parse(json)` deep-frozen, where `json` is `JSON.stringify(value)`: by copying `value` when it
 * is plain JSON data, else by parsing `json`.
 */
export function frozenJsonCopy<T>(value: T, json: string): T {
  // Object.keys skips what JSON.stringify skips (symbol keys, non-enumerable properties).
  const copied = copy(value, 0);
  if (copied !== GIVE_UP) return copied as T;
  return deepFreezeParsed(JSON.parse(json) as T);
}

/** `JSON.parse(json)`, deep-frozen (freezing the parsed tree afterwards is several times faster than a reviver). */
export function parseFrozenJson<T>(json: string): T {
  return deepFreezeParsed(JSON.parse(json) as T);
}

function deepFreezeParsed<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value as object)) deepFreezeParsed(child);
  }
  return value;
}
