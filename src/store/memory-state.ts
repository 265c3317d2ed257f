// The in-memory state: collections in insertion order, their secondary indexes, and the audit log
// with its own indexes. Records are deep-frozen: handing out the stored object is then safe (no
// copy on every read) and a caller that tries to mutate one gets a TypeError instead of silently
// diverging from what the journal says.
import type { ColdTier } from './cold-tier.js';
import { expandDerived } from './derived/index.mjs';
import { IndexBucket } from './index-bucket.js';
import { ShardedMap } from './sharded-map.js';
import { COLLECTIONS, type AuditEvent, type AuditQuery, type CollectionName, type StoredRecord } from './types.js';

/**
 * `p` put, `d` delete, `c` archive (the record, as of this transaction, moves to the cold tier), `a` audit.
 * A `p`/`c` op built by a transaction may carry `true` as fifth element: the key was in neither tier
 * when the transaction read it (an insert), so there is no archived copy to supersede. (Only in
 * memory: the journal text has four elements.)
 */
export type Op =
  | readonly ['p', CollectionName, string, StoredRecord, true?]
  | readonly ['d', CollectionName, string]
  | readonly ['c', CollectionName, string, StoredRecord, true?]
  | readonly ['a', AuditEvent]
  /** A derived record (src/store/derived/): format name, payload, and the ops it stands for (built once). */
  | readonly ['x', string, StoredRecord, readonly Op[]];

interface Entry {
  record: StoredRecord;
  /** Position in insertion order; kept across updates so indexes can return insertion order. */
  ord: number;
}

/** Most index values name one record (a task's id, a delivery key): those hold the key itself, not a Bucket. */
type IndexSlot = string | IndexBucket;

export function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value as object)) deepFreeze(child);
  }
  return value;
}

/** Index keys: strings, numbers and booleans by their string form; anything else is not indexed. */
function indexKey(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return undefined;
}

const COLLECTION_SET: ReadonlySet<string> = new Set(COLLECTIONS);

export function assertCollection(name: string): asserts name is CollectionName {
  if (!COLLECTION_SET.has(name)) throw new TypeError(`unknown collection ${JSON.stringify(name)}`);
}

class CollectionState {
  // Sharded (sharded-map.ts says why); iterates in insertion order, as `list` promises.
  readonly entries = new ShardedMap<Entry>({ orderOf: (entry) => entry.ord });
  readonly indexes = new Map<string, ShardedMap<IndexSlot>>();
  #nextOrd = 0;

  constructor(indexedFields: readonly string[]) {
    for (const field of indexedFields) this.indexes.set(field, new ShardedMap());
  }

  put(key: string, record: StoredRecord): void {
    const existing = this.entries.get(key);
    if (existing) {
      const before = existing.record;
      existing.record = record;
      // Only the fields that changed: a key taken out of a bucket and put back lands out of order,
      // and the bucket's next read re-sorts it all — every update of a task did that to its
      // repository's bucket, every transition of an actor to the bucket of all actors of its kind.
      for (const [field, index] of this.indexes) {
        const from = indexKey(before[field]);
        const to = indexKey(record[field]);
        if (from === to) continue;
        if (from !== undefined) this.#removeFrom(index, from, key);
        if (to !== undefined) this.#addTo(index, to, key, existing);
      }
    } else {
      const entry = { record, ord: this.#nextOrd++ };
      this.entries.set(key, entry);
      for (const [field, index] of this.indexes) {
        const to = indexKey(record[field]);
        if (to !== undefined) this.#addTo(index, to, key, entry);
      }
    }
  }

  delete(key: string): void {
    const existing = this.entries.get(key);
    if (!existing) return;
    for (const [field, index] of this.indexes) {
      const from = indexKey(existing.record[field]);
      if (from !== undefined) this.#removeFrom(index, from, key);
    }
    this.entries.delete(key);
  }

  byIndex(field: string, value: string | number): StoredRecord[] | undefined {
    const index = this.indexes.get(field);
    if (!index) return undefined;
    const slot = index.get(indexKey(value) ?? '');
    if (slot === undefined) return [];
    if (typeof slot === 'string') return [this.entries.get(slot)!.record];
    const records: StoredRecord[] = [];
    for (const key of slot.keys(this.#ordOf)) records.push(this.entries.get(key)!.record);
    return records;
  }

  readonly #ordOf = (key: string): number => this.entries.get(key)!.ord;

  #addTo(index: ShardedMap<IndexSlot>, value: string, key: string, entry: Entry): void {
    const slot = index.get(value);
    if (slot === undefined) index.set(value, key);
    else if (slot === key) return;
    else if (typeof slot === 'string') {
      const bucket = new IndexBucket(slot, this.entries.get(slot)!.ord);
      bucket.add(key, entry.ord, this.#ordOf);
      index.set(value, bucket);
    } else slot.add(key, entry.ord, this.#ordOf);
  }

  #removeFrom(index: ShardedMap<IndexSlot>, value: string, key: string): void {
    const slot = index.get(value);
    if (slot === undefined) return;
    if (typeof slot === 'string') {
      if (slot === key) index.delete(value);
      return;
    }
    slot.delete(key);
    if (slot.size === 0) index.delete(value);
  }
}

/** Sorted by seq; returns the first index whose event has seq > afterSeq. */
function firstAfter(events: readonly AuditEvent[], afterSeq: number): number {
  let lo = 0;
  let hi = events.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (events[mid]!.seq <= afterSeq) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * Removes from `key`'s list its events with seq ≤ `throughSeq` — once per list and drop: a list in
 * seq order loses a prefix, and the next dropped event of the same list no longer finds itself at its
 * head. (One splice per event copied a long list — say a busy repository's lock events — each time.)
 */
function trimHead(map: ShardedMap<AuditEvent[]>, key: string | null | undefined, event: AuditEvent, throughSeq: number): number {
  if (typeof key !== 'string') return 0;
  const list = map.get(key);
  if (!list || list[0] !== event) return 0;
  const drop = firstAfter(list, throughSeq);
  if (drop === list.length) map.delete(key);
  else list.splice(0, drop);
  return drop;
}

class AuditLog {
  readonly events: AuditEvent[] = [];
  readonly #byTask = new ShardedMap<AuditEvent[]>();
  readonly #byDelivery = new ShardedMap<AuditEvent[]>();
  readonly #byActor = new ShardedMap<AuditEvent[]>();
  lastSeq = 0;
  /** Entries of the three per-key lists (for stats: forgotten events must leave them too). */
  indexed = 0;

  append(event: AuditEvent): void {
    if (event.seq <= this.lastSeq) throw new Error(`audit seq ${event.seq} is not after ${this.lastSeq}`);
    this.events.push(event);
    this.lastSeq = event.seq;
    this.#indexEvent(event);
  }

  /** Advances past events that live in an audit archive now (seq ≤ `seq`), without holding them. */
  skipThrough(seq: number): void {
    if (seq > this.lastSeq) this.lastSeq = seq;
  }

  /**
   * Forgets up to `max` of the events with seq ≤ `seq` (an audit archive holds them now); true when
   * none is left. Costs what it drops, not what it keeps, so the caller can spread a large drop over
   * several event-loop turns. Until then memory and the archive both hold the events in between:
   * readers ask memory only for seq > the archive's last (DurableStore.audit).
   */
  dropThrough(seq: number, max = Number.POSITIVE_INFINITY): boolean {
    const drop = Math.min(firstAfter(this.events, seq), max);
    if (drop > 0) {
      const through = this.events[drop - 1]!.seq;
      for (let i = 0; i < drop; i++) {
        const event = this.events[i]!;
        this.indexed -= trimHead(this.#byTask, event.taskId, event, through);
        this.indexed -= trimHead(this.#byDelivery, event.deliveryId, event, through);
        this.indexed -= trimHead(this.#byActor, event.actorId, event, through);
      }
      this.events.splice(0, drop);
    }
    return firstAfter(this.events, seq) === 0;
  }

  /** Keys of the three per-key lists. */
  get indexKeys(): number {
    return this.#byTask.size + this.#byDelivery.size + this.#byActor.size;
  }

  #indexEvent(event: AuditEvent): void {
    const add = (map: ShardedMap<AuditEvent[]>, key: string | null | undefined) => {
      if (typeof key !== 'string') return;
      const list = map.get(key);
      if (list) list.push(event);
      else map.set(key, [event]);
      this.indexed += 1;
    };
    add(this.#byTask, event.taskId);
    add(this.#byDelivery, event.deliveryId);
    add(this.#byActor, event.actorId);
  }

  query(query: AuditQuery = {}): AuditEvent[] {
    // Start from the narrowest index the query names; the other criteria filter it.
    let source: readonly AuditEvent[] = this.events;
    for (const [map, key] of [
      [this.#byTask, query.taskId],
      [this.#byDelivery, query.deliveryId],
      [this.#byActor, query.actorId],
    ] as const) {
      if (key === undefined) continue;
      const list = map.get(key) ?? [];
      if (list.length < source.length || source === this.events) source = list;
    }
    const limit = query.limit ?? Number.POSITIVE_INFINITY;
    const out: AuditEvent[] = [];
    for (let i = query.afterSeq === undefined ? 0 : firstAfter(source, query.afterSeq); i < source.length; i++) {
      if (out.length >= limit) break;
      const event = source[i]!;
      if (query.taskId !== undefined && event.taskId !== query.taskId) continue;
      if (query.deliveryId !== undefined && event.deliveryId !== query.deliveryId) continue;
      if (query.actorId !== undefined && event.actorId !== query.actorId) continue;
      if (query.from !== undefined && event.timestamp < query.from) continue;
      if (query.to !== undefined && event.timestamp > query.to) continue;
      if (query.level !== undefined && (event.level ?? 'info') !== query.level) continue;
      out.push(event);
    }
    return out;
  }
}

/**
 * Hot records and recent audit events in memory; archived ones in the cold tier. Every key is in
 * at most one of the two: writing or deleting a cold key supersedes its archived copy.
 */
export class MemoryState {
  readonly #collections = new Map<CollectionName, CollectionState>();
  readonly audit = new AuditLog();
  readonly cold: ColdTier | undefined;

  constructor(indexes: Partial<Record<CollectionName, string[]>> = {}, cold?: ColdTier) {
    for (const name of COLLECTIONS) this.#collections.set(name, new CollectionState(indexes[name] ?? []));
    this.cold = cold;
  }

  collection(name: CollectionName): CollectionState {
    const state = this.#collections.get(name);
    if (!state) throw new TypeError(`unknown collection ${JSON.stringify(name)}`);
    return state;
  }

  get(name: CollectionName, key: string): StoredRecord | undefined {
    return this.collection(name).entries.get(key)?.record ?? this.cold?.get(name, key);
  }

  has(name: CollectionName, key: string): boolean {
    return this.collection(name).entries.has(key) || (this.cold?.has(name, key) ?? false);
  }

  isHot(name: CollectionName, key: string): boolean {
    return this.collection(name).entries.has(key);
  }

  /** Apply ops whose records are already frozen (built by a Transaction), from the journal entry `seq`. */
  apply(ops: readonly Op[], seq: number): void {
    for (const op of ops) {
      if (op[0] === 'a') {
        this.audit.append(op[1]);
        continue;
      }
      if (op[0] === 'x') {
        this.apply(op[3], seq);
        continue;
      }
      const collection = this.collection(op[1]);
      const fresh = op[0] !== 'd' && op[4] === true;
      if (!fresh && !collection.entries.has(op[2])) this.cold?.supersede(op[1], op[2]);
      if (op[0] === 'p') collection.put(op[2], op[3]);
      else collection.delete(op[2]);
      if (op[0] === 'c') {
        if (!this.cold) throw new Error('archive op without a cold tier');
        this.cold.archive(op[1], op[2], op[3], seq);
      }
    }
  }

  /** Apply ops read from disk: validate their shape first, freeze their records. */
  applyFromDisk(ops: readonly unknown[], seq: number): void {
    this.apply(checkDiskOps(ops), seq);
  }
}

/** Ops read from disk, shape-checked, records frozen; a derived record (`x`) is expanded here. */
function checkDiskOps(ops: readonly unknown[]): Op[] {
  const checked: Op[] = [];
  for (const op of ops) {
    if (!Array.isArray(op)) throw new Error('op is not an array');
    const [kind, a, b, c] = op as unknown[];
    if ((kind === 'p' || kind === 'c') && typeof a === 'string' && typeof b === 'string' && c && typeof c === 'object') {
      assertCollection(a);
      // (A cast: TypeScript stops distributing the kind × collection tuple beyond 25 combinations.)
      checked.push([kind, a, b, deepFreeze(c as StoredRecord)] as Op);
    } else if (kind === 'd' && typeof a === 'string' && typeof b === 'string') {
      assertCollection(a);
      checked.push(['d', a, b]);
    } else if (kind === 'a' && a && typeof a === 'object' && Number.isSafeInteger((a as AuditEvent).seq)) {
      checked.push(['a', deepFreeze(a as AuditEvent)]);
    } else if (kind === 'x' && typeof a === 'string' && b && typeof b === 'object') {
      checked.push(['x', a, b as StoredRecord, checkDiskOps(expandDerived(a, b))]);
    } else {
      throw new Error(`malformed op ${JSON.stringify(op).slice(0, 200)}`);
    }
  }
  return checked;
}
