// The keys of the records one secondary-index value names (a state, a repository, an actor kind),
// in insertion order.
//
// Small buckets are a plain Set: most hold a handful of keys, and each costs little. A few grow with
// every request — the queued state, a busy repository, the task actors' kind — and a Set, like a
// Map, copies itself whole each time it doubles, so those three doubled on the same request (≈ 20–35
// ms at 131,072 keys; the webhook's p99). Past SPLIT_AT keys a bucket becomes a ShardedMap of key →
// insertion number: each part doubles on its own request, and ordered iteration merges the parts by
// insertion number (sharded-map.ts).
import { ShardedMap } from './sharded-map.js';

/** Below this a Set's doubling costs well under a millisecond. */
export const BUCKET_SPLIT_AT = 2048;

/** The insertion number of a key of the collection (CollectionState's `ord`). */
export type OrdOf = (key: string) => number;

export class IndexBucket {
  #small: Set<string> | undefined;
  #large: ShardedMap<number> | undefined;
  #lastOrd: number;
  /** False once a key was added out of order; `keys` re-sorts lazily. */
  #ordered = true;
  readonly #splitAt: number;

  /** `splitAt` only for tests. */
  constructor(first: string, firstOrd: number, splitAt = BUCKET_SPLIT_AT) {
    this.#small = new Set([first]);
    this.#lastOrd = firstOrd;
    this.#splitAt = splitAt;
  }

  get size(): number {
    return this.#small ? this.#small.size : this.#large!.size;
  }

  get split(): boolean {
    return this.#large !== undefined;
  }

  has(key: string): boolean {
    return this.#small ? this.#small.has(key) : this.#large!.has(key);
  }

  add(key: string, ord: number, ordOf: OrdOf): void {
    if (this.has(key)) return;
    if (ord < this.#lastOrd) this.#ordered = false;
    else this.#lastOrd = ord;
    if (this.#large) {
      this.#large.set(key, ord);
      return;
    }
    this.#small!.add(key);
    if (this.#small!.size > this.#splitAt) this.#grow(ordOf);
  }

  delete(key: string): void {
    if (this.#small) this.#small.delete(key);
    else this.#large!.delete(key);
  }

  /** Every key, in ascending insertion number. */
  keys(ordOf: OrdOf): Iterable<string> {
    if (!this.#ordered) this.#sort(ordOf);
    if (this.#small) return this.#small;
    return Array.from(this.#large!.entries(), ([key]) => key);
  }

  #grow(ordOf: OrdOf): void {
    if (!this.#ordered) this.#sort(ordOf);
    const large = new ShardedMap<number>({ orderOf: (ord) => ord, splitAt: this.#splitAt });
    for (const key of this.#small!) large.set(key, ordOf(key));
    this.#large = large;
    this.#small = undefined;
  }

  // Split, each part must be in insertion order for the merge: rebuilt in order, as the Set is.
  #sort(ordOf: OrdOf): void {
    const sorted = Array.from(this.#small ?? this.#large!.keys()).sort((a, b) => ordOf(a) - ordOf(b));
    if (this.#small) {
      this.#small = new Set(sorted);
    } else {
      const large = new ShardedMap<number>({ orderOf: (ord) => ord, splitAt: this.#splitAt });
      for (const key of sorted) large.set(key, ordOf(key));
      this.#large = large;
    }
    this.#ordered = true;
    this.#lastOrd = sorted.length > 0 ? ordOf(sorted.at(-1)!) : Number.NEGATIVE_INFINITY;
  }
}
