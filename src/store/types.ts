// The store's contract. Every other module talks to the store through these types only.
//
// Semantics in one paragraph: all state lives in memory; `transact(fn)` runs `fn` synchronously
// against the in-memory state, validates unique keys and compare-and-swap versions, applies the
// changes at once (so a later transaction sees them — needed for dedup under concurrency), appends
// the transaction to a write-ahead journal, and resolves only when that journal entry is durable
// (write + fdatasync, group-committed with every other transaction of the same tick). A transaction
// that throws applies nothing. A read that leads to an acknowledgement to an outsider must first
// `await store.sync()` so it never acknowledges something that is not yet durable.

export const COLLECTIONS = [
  'webhook_deliveries',
  'comment_triggers',
  'repositories',
  'sessions',
  'tasks',
  'turns',
  'comments',
  'leases',
  'actors',
  'control',
  'control_requests',
  // Usage and budgets (src/usage/): daily sums per repository and per user, per-repository limits.
  'usage',
  // Appended last: cold-tier index files number collections by position.
  'security_events',
  'task_texts',
  // Comments Gitea has not confirmed yet (src/intake/pending-intake.ts), bounded in count.
  'pending_intake',
  // Which node acts for each repository when every node writes (src/cluster/ownership.ts).
  'repository_owners',
] as const;

export type CollectionName = (typeof COLLECTIONS)[number];

/** Any stored record: a plain JSON object. */
export type StoredRecord = Record<string, unknown>;

/**
 * What the typed accessors (`get<T>`, `put<T>` …) take and hand back: a record's own interface. Record
 * interfaces declare every field they hold and nothing else (an index signature would let any field
 * be written and read unchecked), and TypeScript does not let an interface without one stand where
 * `Record<string, unknown>` is asked — so the bound is `object`, and the store sees a StoredRecord inside.
 */
export type RecordType = object;

export interface AuditEventInput {
  taskId?: string | null;
  action: string;
  actor: string;
  fromState?: string | null;
  toState?: string | null;
  stateVersion?: number | null;
  deliveryId?: string | null;
  turnId?: string | null;
  commentId?: number | null;
  errorCode?: string | null;
  /** The actor (machine instance) this event is about, e.g. `task:gitea-task-…`, `lock:default:a/b`. */
  actorId?: string | null;
  level?: 'info' | 'alert' | 'security';
  metadata?: Record<string, unknown>;
}

export interface AuditEvent extends AuditEventInput {
  eventId: string;
  /** Monotonic sequence number, assigned by the store; never reused, never rewritten. */
  seq: number;
  timestamp: string;
}

export interface AuditQuery {
  taskId?: string;
  deliveryId?: string;
  actorId?: string;
  /** ISO timestamps, inclusive. */
  from?: string;
  to?: string;
  afterSeq?: number;
  /** Only events of this level; an event without one counts as `info`. */
  level?: 'info' | 'alert' | 'security';
  limit?: number;
}

export interface PutOptions {
  /** Compare-and-swap: the stored record's `versionField` must equal this, and becomes this + 1. */
  expectVersion?: number;
  /** Which field carries the version: `version` (default) or `stateVersion` (tasks). */
  versionField?: 'version' | 'stateVersion';
}

export interface Tx {
  get<T extends RecordType = StoredRecord>(collection: CollectionName, key: string): T | undefined;
  /** Whether `get` would find the key; for an archived record without reading it (only its key, on disk). */
  has(collection: CollectionName, key: string): boolean;
  /** Unique insert: throws `UniqueViolationError` when the key exists. */
  insert<T extends RecordType = StoredRecord>(collection: CollectionName, key: string, record: T): T;
  /** Upsert, optionally compare-and-swap (throws `VersionConflictError`). Returns the stored record. */
  put<T extends RecordType = StoredRecord>(collection: CollectionName, key: string, record: T, options?: PutOptions): T;
  delete(collection: CollectionName, key: string): void;
  /**
   * Moves the record (as of this transaction) to the cold tier: it leaves memory and `list`,
   * `byIndex` and `count`, and stays readable by key through `get`. Writing or deleting the key
   * later brings it back / removes it as usual. No-op for a missing or already archived key.
   */
  archive(collection: CollectionName, key: string): void;
  /** Append-only: events are never updated or deleted. */
  appendAudit(event: AuditEventInput): AuditEvent;
  /**
   * One compact journal op standing for the records and audit events a derived-record format
   * (src/store/derived/) expands it to — in memory now, at replay, and in compaction alike. Each key
   * it stands for is inserted (UniqueViolationError if it exists). Returns the first audit seq it took.
   */
  derive(format: string, payload: Record<string, unknown>): number;
}

export interface StoreStats {
  journalBytes: number;
  segments: number;
  lastCheckpointSeq: number;
  commits: number;
  /** Durable batches written (group commits). */
  batches: number;
}

export interface Store {
  readonly dir: string;
  /** Load the checkpoint and replay the journal. A torn last journal line (crash mid-write) is dropped. */
  open(): Promise<void>;
  /** Flush and close; after this every call rejects. */
  close(): Promise<void>;
  /** A hot or archived record (an archived one is read from disk). */
  get<T extends RecordType = StoredRecord>(collection: CollectionName, key: string): T | undefined;
  /** All hot (not archived) records of a collection, optionally filtered. Order: insertion order. */
  list<T extends RecordType = StoredRecord>(collection: CollectionName, filter?: (r: T) => boolean): T[];
  /** Hot records whose `field` equals `value`, through a maintained secondary index (see `indexes` option). */
  byIndex<T extends RecordType = StoredRecord>(collection: CollectionName, field: string, value: string | number): T[];
  /** Hot records of a collection. */
  count(collection: CollectionName): number;
  /** Archived records of a collection. */
  archivedCount(collection: CollectionName): number;
  /** Every archived record of a collection, read from disk one at a time (no particular order). */
  scanArchived<T extends RecordType = StoredRecord>(collection: CollectionName): Iterable<T>;
  /** Archived events come from disk, recent ones from memory; the result is in seq order either way. */
  audit(query?: AuditQuery): AuditEvent[];
  /** Runs fn synchronously; applies atomically; resolves once durable. Rejects with the thrown error (nothing applied) or with `StoreUnavailableError`. */
  transact<R>(fn: (tx: Tx) => R): Promise<R>;
  /** Resolves once everything applied so far is durable. */
  sync(): Promise<void>;
  stats(): StoreStats;
}

export class StoreError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

export class UniqueViolationError extends StoreError {
  constructor(
    readonly collection: CollectionName,
    readonly key: string,
  ) {
    super('unique_violation', `${collection}: key already exists`);
  }
}

export class VersionConflictError extends StoreError {
  constructor(
    readonly collection: CollectionName,
    readonly key: string,
    readonly expected: number,
    readonly actual: number | undefined,
  ) {
    super('version_conflict', `${collection}: expected version ${expected}, found ${String(actual)}`);
  }
}

export class StoreUnavailableError extends StoreError {
  constructor(message = 'store unavailable') {
    super('store_unavailable', message);
  }
}
