// A Map that splits into 16 once it is large, so that growing it never copies it all at once.
//
// A JS Map doubles its hash table when it fills and copies every entry in that one step. The
// store's large maps grow in step — every accepted comment adds one task, actor, receipt, their
// index entries and their audit index entries — so they all double on the same request: at 65,536
// hot tasks that request took ≈ 90 ms, and every request behind it waited (the webhook's p99).
// Split in 16 by a hash of the key, each part doubles on its own request, at 1/16 of the size.
//
// Iteration: unsplit, insertion order (a Map's). Split, a snapshot in any order, or — given
// `orderOf` — in ascending `orderOf(value)`. That equals insertion order when, as for the store's
// records, `orderOf` grows with each new key and stays with the key across updates.

const PARTS = 16;
/** Below this a plain Map's doubling costs well under a millisecond, and 16 Maps cost memory. */
const SPLIT_AT = 2048;

/**
 * FNV-1a over the key's length, its first four and its last 32 characters: hashing whole keys cost
 * ≈ 7 µs per accepted comment (≈ 50 lookups of 40–70-character keys). The store's keys vary within
 * their last 32 (`default:<uuid>`, `task:<taskId>`, `<taskId>:status:<state>`,
 * `…:comment:<id>:<action>:<timestamp>`, a collection name before any of them). Keys that differ
 * only elsewhere share a part: still correct, only less spread.
 */
export function partOf(key: string): number {
  const n = key.length;
  let h = Math.imul(0x811c9dc5 ^ n, 0x01000193);
  for (let i = 0; i < 4 && i < n; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  for (let i = Math.max(4, n - 32); i < n; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  return ((h ^ (h >>> 16)) >>> 0) % PARTS;
}

export class ShardedMap<V> {
  #whole: Map<string, V> | undefined = new Map();
  #parts: Array<Map<string, V>> | undefined;
  readonly #orderOf: ((value: V) => number) | undefined;
  readonly #splitAt: number;

  /** `splitAt` only for tests (to split small maps). */
  constructor(options: { orderOf?: (value: V) => number; splitAt?: number } = {}) {
    this.#orderOf = options.orderOf;
    this.#splitAt = options.splitAt ?? SPLIT_AT;
  }

  get size(): number {
    if (this.#whole) return this.#whole.size;
    let n = 0;
    for (const part of this.#parts!) n += part.size;
    return n;
  }

  get split(): boolean {
    return this.#whole === undefined;
  }

  get(key: string): V | undefined {
    return this.#whole ? this.#whole.get(key) : this.#parts![partOf(key)]!.get(key);
  }

  has(key: string): boolean {
    return this.#whole ? this.#whole.has(key) : this.#parts![partOf(key)]!.has(key);
  }

  set(key: string, value: V): this {
    if (this.#whole) {
      this.#whole.set(key, value);
      if (this.#whole.size > this.#splitAt) this.#split();
    } else {
      this.#parts![partOf(key)]!.set(key, value);
    }
    return this;
  }

  delete(key: string): boolean {
    return this.#whole ? this.#whole.delete(key) : this.#parts![partOf(key)]!.delete(key);
  }

  clear(): void {
    this.#whole = new Map();
    this.#parts = undefined;
  }

  // Split, iteration hands out a snapshot: each part's values gathered, then — given `orderOf` —
  // merged by it (each part is already in order). A plain loop over the 16 heads: a generator merge
  // was 10–17× slower than iterating one Map, a comparator sort ≈ 7×; this is ≈ 2×.
  entries(): Iterable<[string, V]> {
    if (this.#whole) return this.#whole.entries();
    const orderOf = this.#orderOf;
    if (!orderOf) {
      const all: Array<[string, V]> = [];
      for (const part of this.#parts!) for (const entry of part) all.push(entry);
      return all;
    }
    return mergeByOrder(this.#parts!.map((part) => Array.from(part)), ([, value]) => orderOf(value));
  }

  values(): Iterable<V> {
    if (this.#whole) return this.#whole.values();
    return this.valuesWhere(() => true);
  }

  /** The values `keep` accepts, in iteration order; filtered before the merge, which then stays small. */
  valuesWhere(keep: (value: V) => boolean): V[] {
    const lists: V[][] = [];
    for (const part of this.#whole ? [this.#whole] : this.#parts!) {
      const list: V[] = [];
      for (const value of part.values()) if (keep(value)) list.push(value);
      lists.push(list);
    }
    if (lists.length === 1) return lists[0]!;
    const orderOf = this.#orderOf;
    return orderOf ? mergeByOrder(lists, orderOf) : lists.flat();
  }

  keys(): Iterable<string> {
    if (this.#whole) return this.#whole.keys();
    return Array.from(this.entries(), ([key]) => key);
  }

  [Symbol.iterator](): Iterator<[string, V]> {
    return this.entries()[Symbol.iterator]();
  }

  #split(): void {
    const parts = Array.from({ length: PARTS }, () => new Map<string, V>());
    // In the whole map's order, so each part keeps it.
    for (const [key, value] of this.#whole!) parts[partOf(key)]!.set(key, value);
    this.#parts = parts;
    this.#whole = undefined;
  }
}

/** Merges lists that are each in ascending `orderOf` into one. */
function mergeByOrder<T>(lists: T[][], orderOf: (item: T) => number): T[] {
  let total = 0;
  for (const list of lists) total += list.length;
  const out = new Array<T>(total);
  const at = new Array<number>(lists.length).fill(0);
  const head = lists.map((list) => (list.length > 0 ? orderOf(list[0]!) : Number.POSITIVE_INFINITY));
  for (let n = 0; n < total; n++) {
    let best = 0;
    for (let i = 1; i < head.length; i++) if (head[i]! < head[best]!) best = i;
    const list = lists[best]!;
    const i = at[best]!;
    out[n] = list[i]!;
    at[best] = i + 1;
    head[best] = i + 1 < list.length ? orderOf(list[i + 1]!) : Number.POSITIVE_INFINITY;
  }
  return out;
}
