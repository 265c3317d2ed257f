// A transaction buffers its writes in an overlay (so fn reads its own writes) and only hands them
// to the state when fn returned without throwing: a throw anywhere applies nothing and writes no
// journal line. A key written several times in one transaction (an actor created and moved on at
// once, its projection rewritten) is serialized once, at the end, with its last value. That JSON is
// both the journal text and the source of the in-memory value, a frozen copy equal to that text
// parsed back (plain-json.ts) — so memory always equals what replay rebuilds (no undefined fields,
// no Dates, no aliasing with the caller's object).
import { randomUUID } from 'node:crypto';
import { expandDerived } from './derived/index.mjs';
import { assertCollection, deepFreeze, type MemoryState, type Op } from './memory-state.js';
import { frozenJsonCopy } from './plain-json.js';
import {
  UniqueViolationError,
  VersionConflictError,
  type AuditEvent,
  type AuditEventInput,
  type CollectionName,
  type PutOptions,
  type RecordType,
  type StoredRecord,
} from './types.js';

const DELETED = null;

/** A compare-and-swap this transaction made on a record it had not written before: what it expected stored. */
export interface CasExpectation {
  collection: CollectionName;
  key: string;
  field: 'version' | 'stateVersion';
  expected: number;
}

function serializeRecord(collection: string, record: unknown): string {
  if (record === null || typeof record !== 'object' || Array.isArray(record)) {
    throw new TypeError(`${collection}: a record must be a plain object`);
  }
  return JSON.stringify(record);
}

/** The in-memory engine's transaction: the contract's `Tx`, answered synchronously (durable-store.ts wraps it). */
export class Transaction {
  readonly ops: Op[] = [];
  /** Checked against the stored version once more by a shared database (src/store/postgres/). */
  readonly expectations: CasExpectation[] = [];
  readonly #opTexts: string[] = [];
  readonly #overlay = new Map<CollectionName, Map<string, StoredRecord | typeof DELETED>>();
  /** Keys written, in first-write order; their final values become ops in `seal()`. */
  readonly #pending = new Map<string, [CollectionName, string]>();
  /** Audit events and derived records, in call order (their audit seqs are assigned in that order). */
  readonly #audits: Array<[Op, string]> = [];
  /** Keys written by a derived record (ids as in #pending): nothing else may write them in this transaction. */
  readonly #derived = new Set<string>();
  /** Keys to archive at seal() (ids as in #pending). */
  readonly #archived = new Set<string>();
  /** Keys that were in neither tier when this transaction inserted them (ids as in #pending). */
  readonly #fresh = new Set<string>();
  /** Keys this transaction found in neither tier of the state, per collection. */
  readonly #absent = new Map<CollectionName, Set<string>>();
  #sealed = false;
  readonly #state: MemoryState;
  #nextAuditSeq: number;
  #finished = false;

  constructor(state: MemoryState) {
    this.#state = state;
    this.#nextAuditSeq = state.audit.lastSeq + 1;
  }

  get<T extends RecordType = StoredRecord>(collection: CollectionName, key: string): T | undefined {
    this.#assertOpen();
    assertCollection(collection);
    const overlay = this.#overlay.get(collection);
    if (overlay?.has(key)) return (overlay.get(key) ?? undefined) as T | undefined;
    // The state cannot change while fn runs (it is synchronous): a key found absent stays absent,
    // so the usual check-then-insert asks the cold tier once, not twice.
    let absent = this.#absent.get(collection);
    if (absent?.has(key)) return undefined;
    const found = this.#state.get(collection, key) as T | undefined;
    if (found === undefined) {
      if (!absent) this.#absent.set(collection, (absent = new Set()));
      absent.add(key);
    }
    return found;
  }

  has(collection: CollectionName, key: string): boolean {
    this.#assertOpen();
    assertCollection(collection);
    const overlay = this.#overlay.get(collection);
    if (overlay?.has(key)) return overlay.get(key) !== DELETED;
    let absent = this.#absent.get(collection);
    if (absent?.has(key)) return false;
    if (this.#state.has(collection, key)) return true;
    if (!absent) this.#absent.set(collection, (absent = new Set()));
    absent.add(key);
    return false;
  }

  insert<T extends RecordType = StoredRecord>(collection: CollectionName, key: string, record: T): T {
    if (this.get(collection, key) !== undefined) throw new UniqueViolationError(collection, key);
    // Absent from the overlay and from both tiers of the state: applying it supersedes nothing.
    if (!this.#overlay.get(collection)?.has(key)) this.#fresh.add(`${collection}\u0000${key}`);
    return this.#write(collection, key, record);
  }

  put<T extends RecordType = StoredRecord>(collection: CollectionName, key: string, record: T, options: PutOptions = {}): T {
    const current = this.get(collection, key);
    if (options.expectVersion === undefined) return this.#write(collection, key, record);
    const field = options.versionField ?? 'version';
    const actual = current?.[field];
    // An absent record never matches: creation goes through insert.
    if (typeof actual !== 'number' || actual !== options.expectVersion) {
      throw new VersionConflictError(
        collection,
        key,
        options.expectVersion,
        typeof actual === 'number' ? actual : undefined,
      );
    }
    if (!this.#pending.has(`${collection}\u0000${key}`)) this.expectations.push({ collection, key, field, expected: options.expectVersion });
    return this.#write(collection, key, { ...record, [field]: options.expectVersion + 1 });
  }

  delete(collection: CollectionName, key: string): void {
    if (this.get(collection, key) === undefined) return;
    this.#overlayOf(collection).set(key, DELETED);
    this.#archived.delete(this.#touch(collection, key));
  }

  archive(collection: CollectionName, key: string): void {
    const current = this.get(collection, key);
    if (current === undefined) return;
    const overlay = this.#overlayOf(collection);
    // Already cold and not written here: nothing to move.
    if (!overlay.has(key) && !this.#state.isHot(collection, key)) return;
    if (!overlay.has(key)) overlay.set(key, current);
    this.#archived.add(this.#touch(collection, key));
  }

  appendAudit(input: AuditEventInput): AuditEvent {
    this.#assertOpen();
    if (typeof input?.action !== 'string' || input.action === '') throw new TypeError('audit: action is required');
    if (typeof input.actor !== 'string' || input.actor === '') throw new TypeError('audit: actor is required');
    const event = {
      ...input,
      eventId: `audit-${randomUUID()}`,
      seq: this.#nextAuditSeq,
      timestamp: new Date().toISOString(),
    };
    const json = JSON.stringify(event);
    const stored = frozenJsonCopy(event as AuditEvent, json);
    this.#nextAuditSeq += 1;
    this.#audits.push([['a', stored], `["a",${json}]`]);
    return stored;
  }

  /**
   * Writes a derived record (src/store/derived/): one compact journal op that stands for the records
   * and audit events `expand` makes of it. Every key it stands for is an insert (a key that exists
   * throws UniqueViolationError, as `insert` would); the records are readable through `get` for the
   * rest of the transaction and may not be written again in it. Returns the first audit seq reserved.
   */
  derive(name: string, payload: Record<string, unknown>): number {
    this.#assertOpen();
    const full = { ...payload, a0: this.#nextAuditSeq };
    const expanded = expandDerived(name, full);
    // Every key is checked before any is written, so a refused derive leaves the transaction as it was.
    const seen = new Set<string>();
    let expectedSeq = full.a0;
    for (const op of expanded) {
      if (op[0] === 'a') {
        // The seqs reserved below must be exactly the ones the format used.
        if (op[1].seq !== expectedSeq) throw new Error(`derived record ${name}: audit seq ${op[1].seq} is not ${expectedSeq}`);
        expectedSeq += 1;
        continue;
      }
      const [, collection, key] = op;
      assertCollection(collection);
      const id = `${collection}\u0000${key}`;
      if (seen.has(id)) throw new TypeError(`derived record ${name}: ${collection}: ${key} twice in one expansion`);
      seen.add(id);
      if (this.get(collection, key) !== undefined) throw new UniqueViolationError(collection, key);
      // Deleted earlier in this transaction: its op and the derived record would both apply.
      if (this.#pending.has(id)) throw new TypeError(`${collection}: ${key} was written earlier in this transaction; a derived record must be its only write`);
    }
    const ops: Op[] = [];
    let audits = 0;
    for (const op of expanded) {
      // (deepFreeze returns at once for what a format built frozen.)
      if (op[0] === 'a') {
        ops.push(['a', deepFreeze(op[1])]);
        audits += 1;
        continue;
      }
      const [kind, collection, key, record] = op;
      assertCollection(collection); // checked above; narrows the type here
      const id = `${collection}\u0000${key}`;
      const stored = deepFreeze(record);
      this.#overlayOf(collection).set(key, stored);
      this.#derived.add(id);
      // Absent from both tiers (checked just above): applying it supersedes nothing.
      ops.push([kind, collection, key, stored, true] as Op);
    }
    this.#nextAuditSeq += audits;
    this.#audits.push([['x', name, full, ops], `["x",${JSON.stringify(name)},${JSON.stringify(full)}]`]);
    return full.a0;
  }

  /**
   * Turns the buffered writes into ops: each touched key once, with its final value (records in
   * first-write order, then audit events in append order). Called once, after fn returned.
   */
  seal(): void {
    if (this.#sealed) return;
    this.#sealed = true;
    for (const [collection, key] of this.#pending.values()) {
      const value = this.#overlay.get(collection)!.get(key)!;
      if (value === DELETED) {
        // Created and deleted within this transaction: nothing to write.
        if (this.#state.get(collection, key) === undefined) continue;
        this.ops.push(['d', collection, key]);
        this.#opTexts.push(`["d",${JSON.stringify(collection)},${JSON.stringify(key)}]`);
        continue;
      }
      const json = serializeRecord(collection, value);
      const stored = frozenJsonCopy(value, json);
      const id = `${collection}\u0000${key}`;
      const kind = this.#archived.has(id) ? 'c' : 'p';
      // (Casts: TypeScript stops distributing the kind × collection tuple beyond 25 combinations.)
      this.ops.push(this.#fresh.has(id) ? ([kind, collection, key, stored, true] as Op) : ([kind, collection, key, stored] as Op));
      this.#opTexts.push(`["${kind}",${JSON.stringify(collection)},${JSON.stringify(key)},${json}]`);
    }
    for (const [op, text] of this.#audits) {
      this.ops.push(op);
      this.#opTexts.push(text);
    }
  }

  /** The journal line for this transaction. */
  line(seq: number): string {
    return `{"seq":${seq},"ops":[${this.#opTexts.join(',')}]}`;
  }

  /** After fn returned or threw: a Tx captured for later use must not write behind the store's back. */
  finish(): void {
    this.#finished = true;
  }

  #write<T extends RecordType = StoredRecord>(collection: CollectionName, key: string, record: T): T {
    if (typeof key !== 'string' || key === '') throw new TypeError(`${collection}: key must be a non-empty string`);
    if (record === null || typeof record !== 'object' || Array.isArray(record)) {
      throw new TypeError(`${collection}: a record must be a plain object`);
    }
    // A shallow frozen copy: the caller's object stays theirs, and nothing can change what will be
    // serialized at seal() through the value `get` hands back.
    const kept = Object.freeze({ ...record });
    this.#overlayOf(collection).set(key, kept);
    // Written after being archived in the same transaction: it stays hot.
    this.#archived.delete(this.#touch(collection, key));
    return kept as T;
  }

  #touch(collection: CollectionName, key: string): string {
    const id = `${collection}\u0000${key}`;
    if (this.#derived.has(id)) throw new TypeError(`${collection}: ${key} was written by a derived record in this transaction`);
    if (!this.#pending.has(id)) this.#pending.set(id, [collection, key]);
    return id;
  }

  #overlayOf(collection: CollectionName): Map<string, StoredRecord | typeof DELETED> {
    let overlay = this.#overlay.get(collection);
    if (!overlay) this.#overlay.set(collection, (overlay = new Map()));
    return overlay;
  }

  #assertOpen(): void {
    if (this.#finished) throw new Error('transaction already finished: fn must use tx synchronously');
  }
}
