// The keys of the records one secondary-index value names (a state, a repository, an actor kind),
// in insertion order.
//
// Small buckets are a plain Set: most hold a handful of keys, and each costs little. A few grow with
// every request — the queued state, a busy repository, the task actors' kind — and a Set, like a
// Map, copies its whole hash table each time it doubles, so those three doubled on the same request
// (13 ms at the 65,537th accepted comment; the webhook's p99). Past SPLIT_AT keys a bucket becomes:
// - an array of its keys in insertion order, a deleted key's slot set to null (the array is rebuilt
//   once more than half of it is null). Growing it copies pointers only, and reading the bucket in
//   order — the scheduler's scan of the queued state, on every wake — is a walk over it;
// - a ShardedMap (sharded-map.ts) of key → slot, for `has` and `delete`: it doubles a sixteenth at
//   a time.
// (Merging sixteen ordered parts instead made every scan of a 131,072-key bucket ≈ 2.6× slower.)
import { ShardedMap } from './sharded-map.js';

/** Below this a Set's doubling costs well under a millisecond. */
export const BUCKET_SPLIT_AT = 2048;

/** The insertion number of a key of the collection (CollectionState's `ord`). */
export type OrdOf = (key: string) => number;

interface Large {
  /** key → its slot in `keys` */
  slots: ShardedMap<number>;
  /** In ascending `ords` while the bucket is ordered; null where a key was deleted. */
  keys: Array<string | null>;
  /** The insertion number of the key in the same slot (kept so re-sorting needs no lookups). */
  ords: number[];
  /** Null slots in `keys`. */
  deleted: number;
}

export class IndexBucket {
  #small: Set<string> | undefined;
  #large: Large | undefined;
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
    return this.#small ? this.#small.size : this.#large!.slots.size;
  }

  get split(): boolean {
    return this.#large !== undefined;
  }

  has(key: string): boolean {
    return this.#small ? this.#small.has(key) : this.#large!.slots.has(key);
  }

  add(key: string, ord: number, ordOf: OrdOf): void {
    if (this.has(key)) return;
    if (ord < this.#lastOrd) this.#ordered = false;
    else this.#lastOrd = ord;
    if (this.#large) {
      append(this.#large, key, ord);
      return;
    }
    this.#small!.add(key);
    if (this.#small!.size > this.#splitAt) this.#grow(ordOf);
  }

  delete(key: string): void {
    if (this.#small) {
      this.#small.delete(key);
      return;
    }
    const large = this.#large!;
    const slot = large.slots.get(key);
    if (slot === undefined) return;
    large.slots.delete(key);
    large.keys[slot] = null;
    large.deleted += 1;
    if (large.keys.length > 2 * large.slots.size + 64) this.#rebuild(this.#liveSlots());
  }

  /** Every key, in ascending insertion number. */
  keys(ordOf: OrdOf): Iterable<string> {
    if (this.#small) {
      if (!this.#ordered) this.#sortSmall(ordOf);
      return this.#small;
    }
    const large = this.#large!;
    if (!this.#ordered) {
      const live = this.#liveSlots();
      live.sort((a, b) => large.ords[a]! - large.ords[b]!);
      this.#rebuild(live);
      this.#ordered = true;
      this.#lastOrd = this.#large!.ords.at(-1) ?? Number.NEGATIVE_INFINITY;
    }
    // Read at once by the caller (byIndex), so the array itself when it holds no deleted slot.
    if (this.#large!.deleted === 0) return this.#large!.keys as string[];
    const out: string[] = [];
    for (const key of this.#large!.keys) if (key !== null) out.push(key);
    return out;
  }

  #grow(ordOf: OrdOf): void {
    if (!this.#ordered) this.#sortSmall(ordOf);
    const large: Large = { slots: new ShardedMap({ splitAt: this.#splitAt }), keys: [], ords: [], deleted: 0 };
    for (const key of this.#small!) append(large, key, ordOf(key));
    this.#large = large;
    this.#small = undefined;
  }

  #sortSmall(ordOf: OrdOf): void {
    const sorted = Array.from(this.#small!).sort((a, b) => ordOf(a) - ordOf(b));
    this.#small = new Set(sorted);
    this.#ordered = true;
    this.#lastOrd = sorted.length > 0 ? ordOf(sorted.at(-1)!) : Number.NEGATIVE_INFINITY;
  }

  #liveSlots(): number[] {
    const live: number[] = [];
    const keys = this.#large!.keys;
    for (let i = 0; i < keys.length; i++) if (keys[i] !== null) live.push(i);
    return live;
  }

  /** The large form again from `slots` of the current one, in that order, without the deleted ones. */
  #rebuild(slots: readonly number[]): void {
    const old = this.#large!;
    const large: Large = { slots: old.slots, keys: [], ords: [], deleted: 0 };
    for (const i of slots) append(large, old.keys[i]!, old.ords[i]!);
    this.#large = large;
  }
}

function append(large: Large, key: string, ord: number): void {
  large.slots.set(key, large.keys.length);
  large.keys.push(key);
  large.ords.push(ord);
}
