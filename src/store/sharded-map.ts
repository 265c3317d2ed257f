// A Map that splits into 16 once it is large, so that growing it never copies it all at once.
//
// A JS Map doubles its hash table when it fills and copies every entry in that one step. The
// store's large maps grow in step — every accepted comment adds one task, actor, receipt, their
// index entries and their audit index entries — so they all double on the same request: at 65,536
// hot tasks that request took ≈ 90 ms, and every request behind it waited (the webhook's p99).
// Split in 16 by a hash of the key, each part doubles on its own request, at 1/16 of the size.
//
// Iteration: unsplit, insertion order (a Map's). Split, either any order, or — given `orderOf` —
// ascending `orderOf(value)`, merged from the parts. That equals insertion order when, as for the
// store's records, `orderOf` grows with each new key and stays with the key across updates
// (each part then holds its keys in that order too).

const PARTS = 16;
/** Below this a plain Map's doubling costs well under a millisecond, and 16 Maps cost memory. */
const SPLIT_AT = 2048;

/**
 * A hash of eight of the key's characters — first two, middle two, last four — and its length:
 * hashing whole keys cost ≈ 7 µs per accepted comment (≈ 50 lookups of 40–50-character keys). The
 * store's keys vary at their start (`<n>:…`), middle (`<taskId>:status:<state>`) or end
 * (`default:<uuid>`, `task:<taskId>`). Keys that differ only elsewhere share a part: still correct,
 * only less spread.
 */
export function partOf(key: string): number {
  const n = key.length;
  const m = n >> 1;
  // FNV-1a steps; charCodeAt past either end is NaN, which `^` reads as 0.
  let h = Math.imul(0x811c9dc5 ^ n, 0x01000193);
  h = Math.imul(h ^ key.charCodeAt(0), 0x01000193);
  h = Math.imul(h ^ key.charCodeAt(1), 0x01000193);
  h = Math.imul(h ^ key.charCodeAt(m), 0x01000193);
  h = Math.imul(h ^ key.charCodeAt(m + 1), 0x01000193);
  h = Math.imul(h ^ key.charCodeAt(n - 4), 0x01000193);
  h = Math.imul(h ^ key.charCodeAt(n - 3), 0x01000193);
  h = Math.imul(h ^ key.charCodeAt(n - 2), 0x01000193);
  h = Math.imul(h ^ key.charCodeAt(n - 1), 0x01000193);
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

  *entries(): Generator<[string, V]> {
    if (this.#whole) {
      yield* this.#whole.entries();
      return;
    }
    const orderOf = this.#orderOf;
    if (!orderOf) {
      for (const part of this.#parts!) yield* part.entries();
      return;
    }
    // Each part is already in order: merge the 16 heads.
    const heads = this.#parts!.map((part) => part.entries()).map((it) => ({ it, next: it.next() }));
    for (;;) {
      let best = -1;
      let bestOrder = Number.POSITIVE_INFINITY;
      for (let i = 0; i < heads.length; i++) {
        const head = heads[i]!;
        if (head.next.done) continue;
        const order = orderOf(head.next.value[1]);
        if (order < bestOrder) {
          bestOrder = order;
          best = i;
        }
      }
      if (best === -1) return;
      const head = heads[best]!;
      yield head.next.value as [string, V];
      head.next = head.it.next();
    }
  }

  *values(): Generator<V> {
    for (const [, value] of this.entries()) yield value;
  }

  *keys(): Generator<string> {
    for (const [key] of this.entries()) yield key;
  }

  [Symbol.iterator](): Generator<[string, V]> {
    return this.entries();
  }

  #split(): void {
    const parts = Array.from({ length: PARTS }, () => new Map<string, V>());
    // In the whole map's order, so each part keeps it.
    for (const [key, value] of this.#whole!) parts[partOf(key)]!.set(key, value);
    this.#parts = parts;
    this.#whole = undefined;
  }
}
