// The store's contract. Every other module talks to the store through these types only.
//
// Semantics in one paragraph: every read and every transaction is asynchronous, so an engine may
// answer from a database across the network. `transact(fn)` runs `fn` against a transaction that
// sees its own writes. On SQLite transactions run one at a time. On PostgreSQL each runs at READ
// COMMITTED: a read sees what committed before it, so a decision on a row another node may write
// meanwhile is guarded by a unique key (`insert`, `insertIfAbsent`), a compare-and-swap version or a
// row lock (`lock`). Unique keys and compare-and-swap versions are checked; the promise resolves only once
// the transaction is durable. A transaction that throws applies nothing. `fn` may run more than once
// (an engine retries a transaction a concurrent one invalidated), so it must not act outside the
// transaction: collect what to do afterwards and do it once `transact` resolved.
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
  // Appended last: an earlier version's cold-tier index files numbered collections by position.
  'security_events',
  'task_texts',
  // Comments Gitea has not confirmed yet (src/intake/pending-intake.ts), bounded in count.
  'pending_intake',
  // Read only: an earlier version's records of which node acted for each repository.
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
  get<T extends RecordType = StoredRecord>(collection: CollectionName, key: string): Promise<T | undefined>;
  /** Whether `get` would find the key; for an archived record without reading it. */
  has(collection: CollectionName, key: string): Promise<boolean>;
  /**
   * `Store.list` and `Store.byIndex` inside the transaction: they see every transaction committed before
   * this one (whether or not it is durable yet). Whether they see this transaction's own writes is up to
   * the engine: read them before writing.
   */
  list<T extends RecordType = StoredRecord>(collection: CollectionName, filter?: (r: T) => boolean): Promise<T[]>;
  byIndex<T extends RecordType = StoredRecord>(collection: CollectionName, field: string, value: string | number): Promise<T[]>;
  /**
   * Unique insert: rejects with `UniqueViolationError` when the key exists. `archived`: stored archived at
   * once (as `archive` right after would), for a record kept only to be found by its key.
   */
  insert<T extends RecordType = StoredRecord>(collection: CollectionName, key: string, record: T, options?: { archived?: boolean }): Promise<T>;
  /**
   * Inserts unless the key exists (`ON CONFLICT DO NOTHING`); false when it did. Where nodes may race to
   * create one row, a read-then-insert would let the slower one fail with `UniqueViolationError`.
   */
  insertIfAbsent<T extends RecordType = StoredRecord>(collection: CollectionName, key: string, record: T, options?: { archived?: boolean }): Promise<boolean>;
  /** Upsert, optionally compare-and-swap (rejects with `VersionConflictError`). Resolves to the stored record. */
  put<T extends RecordType = StoredRecord>(collection: CollectionName, key: string, record: T, options?: PutOptions): Promise<T>;
  delete(collection: CollectionName, key: string): Promise<void>;
  /**
   * Archives the record (as of this transaction): it leaves `list`, `byIndex` and `count`, and stays
   * readable by key through `get`. Writing or deleting the key later brings it back / removes it as
   * usual. No-op for a missing or already archived key.
   */
  archive(collection: CollectionName, key: string): Promise<void>;
  /** Append-only: events are never updated or deleted. */
  appendAudit(event: AuditEventInput): Promise<AuditEvent>;
  /**
   * The hot records of `keys`, by key, locked until this transaction ends. `skip`: a record another
   * transaction holds locked is left out, not waited for (PostgreSQL's FOR UPDATE SKIP LOCKED) — how
   * nodes taking work at once take disjoint records without waiting for each other. `share`: waits for
   * writers, then keeps them out until this transaction ends (FOR SHARE) while other readers pass — what
   * this transaction decides on cannot change before it commits. With one writer at a time (SQLite)
   * nobody else holds a lock: every record found.
   */
  lock<T extends RecordType = StoredRecord>(collection: CollectionName, keys: readonly string[], mode: 'skip' | 'share'): Promise<Map<string, T>>;
  /**
   * Tells `channel`'s listeners (`Store.listen`, on every node of the store) `payload` once this
   * transaction commits; never if it does not. A wake-up, not a queue (see `listen`).
   */
  notify(channel: string, payload: string): Promise<void>;
  /** Grants the repository's lease when it is free or expired (a takeover); the epoch grows by one. */
  grantLease(repoKey: string, request: { holder: string; taskId: string | null; ttlMs: number }): Promise<LeaseGrant>;
  /** Moves the expiry to now + ttl (never earlier) while `epoch` holds and has not expired; null when it does not. */
  renewLease(repoKey: string, epoch: number, ttlMs: number): Promise<{ expiresAt: number; now: number } | null>;
  /**
   * Ends the lease `epoch`: `release` (its holder is done) or `expire` (only once past its expiry). Returns
   * when it ended on the database's clock (now, or its expiry if that came first); null when it is not the current one.
   */
  endLease(repoKey: string, epoch: number, how: 'release' | 'expire'): Promise<{ endedAt: number } | null>;
  /**
   * Rejects with LeaseLostError unless `epoch` is the repository's current, unexpired lease; on PostgreSQL
   * the row stays locked until this transaction ends, so no grant passes it meanwhile: a holder that lost
   * its lease commits nothing more for it.
   */
  fenceLease(repoKey: string, epoch: number): Promise<void>;
  /**
   * The repositories among `repoKeys` whose lease has no holder, each lease row locked until this
   * transaction ends; one another transaction holds locked is left out, not waited for (SKIP LOCKED).
   * A grant in this transaction to one of them is therefore never refused, and no other transaction
   * can grant it meanwhile. A lease held but expired is not free: it is ended (EXPIRE) first.
   */
  lockFreeLeases(repoKeys: readonly string[]): Promise<Set<string>>;
}


/**
 * A repository's lease (the `repo_leases` row): at most one holder per repository, decided by the
 * database on the database's clock; `epoch` grows at every grant, so a write made for a task can check
 * in its own transaction that the lease it runs under is still the current one (`fenceLease`).
 * Times are milliseconds since 1970 on the database's clock, never a node's.
 */
export interface LeaseRow {
  repoKey: string;
  epoch: number;
  holder: string;
  taskId: string | null;
  expiresAt: number;
}

export type LeaseGrant =
  /** `replaced`: the lease this grant took over (never released; it ended at its last expiry), or null. */
  | { granted: true; epoch: number; expiresAt: number; now: number; replaced: { epoch: number; expiresAt: number } | null }
  /** Refused: another holder's lease has not expired (`current`). */
  | { granted: false; current: LeaseRow; now: number };


export interface StoreStats {
  commits: number;
  /** Durable batches written (group commits). */
  batches: number;
}

export interface Store {
  /** Where the store lives, for messages: a folder, a file or a database. */
  readonly dir: string;
  open(): Promise<void>;
  /** Flush and close; after this every call rejects. */
  close(): Promise<void>;
  /** A hot or archived record. */
  get<T extends RecordType = StoredRecord>(collection: CollectionName, key: string): Promise<T | undefined>;
  /** All hot (not archived) records of a collection, optionally filtered. Order: insertion order. */
  list<T extends RecordType = StoredRecord>(collection: CollectionName, filter?: (r: T) => boolean): Promise<T[]>;
  /** Hot records whose `field` equals `value`, in insertion order. */
  byIndex<T extends RecordType = StoredRecord>(collection: CollectionName, field: string, value: string | number): Promise<T[]>;
  /** Hot records of a collection. */
  count(collection: CollectionName): Promise<number>;
  /** Archived records of a collection. */
  archivedCount(collection: CollectionName): Promise<number>;
  /** Every archived record of a collection, one at a time (no particular order). */
  scanArchived<T extends RecordType = StoredRecord>(collection: CollectionName): AsyncIterable<T>;
  /** Audit events matching the query, in seq order. */
  audit(query?: AuditQuery): Promise<AuditEvent[]>;
  /** Runs fn in a transaction; applies atomically; resolves once durable. Rejects with fn's error (nothing applied) or `StoreUnavailableError`. */
  transact<R>(fn: (tx: Tx) => Promise<R> | R): Promise<R>;
  /** Resolves once everything committed so far is durable. */
  sync(): Promise<void>;
  stats(): StoreStats;
  /** Every held lease (expired ones too, until someone ends them), with the database's clock to judge them by. */
  heldLeases(): Promise<{ leases: LeaseRow[]; now: number }>;
  /** The database's clock (ms since 1970): the one clock all nodes share, for any time one node writes and another judges. */
  clockMs(): Promise<number>;
  /**
   * Calls `listener` with each payload committed to `channel` (`notify`) by any node, this one
   * included. A notification sent while this node's listening connection is down is lost: what it
   * announces is in the tables too, and listeners look there again now and then. Resolves, once
   * listening, to the unsubscribe.
   */
  listen(channel: string, listener: (payload: string) => void): Promise<() => void>;
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

export class LeaseLostError extends StoreError {
  constructor(
    readonly repoKey: string,
    readonly epoch: number,
  ) {
    super('lease_lost', `the lease ${epoch} of ${repoKey} is no longer the current one`);
  }
}

/** The lease row refused a grant: another holder's lease has not expired on the database's clock. */
export class LeaseRefusedError extends StoreError {
  constructor(readonly current: LeaseRow) {
    super('lease_refused', `the lease of ${current.repoKey} is held by ${current.holder} (epoch ${current.epoch}) until ${new Date(current.expiresAt).toISOString()} (database clock)`);
  }
}

/** Whether a store error is the database refusing a lease change (the lease row decides; the actor follows). */
export function isLeaseRefusal(error: unknown): error is StoreError {
  return error instanceof StoreError && (error.code === 'lease_lost' || error.code === 'lease_refused');
}

export class StoreUnavailableError extends StoreError {
  constructor(message = 'store unavailable') {
    super('store_unavailable', message);
  }
}
