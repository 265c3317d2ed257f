// The Store: in-memory state + write-ahead journal (group commit) + checkpoint compacted in a
// worker thread. See LAYOUT.md for the on-disk layout and the durability argument.
import { mkdir, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { acquireProcessLock } from './process-lock.js';
import { runCompaction } from './compaction.js';
import { fsyncDir } from './durable-json-file.mjs';
import { CHECKPOINT_FILE } from './journal-files.mjs';
import { Journal } from './journal.js';
import { ColdTier } from './cold-tier.js';
import { loadStore } from './load-store.js';
import { MemoryState, type Op } from './memory-state.js';
import { Transaction, type CasExpectation } from './transaction.js';
import {
  StoreUnavailableError,
  type AuditEvent,
  type AuditQuery,
  type CollectionName,
  type Store,
  type StoreStats,
  type RecordType,
  type StoredRecord,
  type Tx,
} from './types.js';

export interface StoreOptions {
  dir: string;
  /** Secondary indexes per collection, e.g. `{ tasks: ['repoKey', 'state'] }`. */
  indexes?: Partial<Record<CollectionName, string[]>>;
  /** Seal the active journal segment once it reaches this size. Default 16 MiB. */
  segmentBytes?: number;
  /** fdatasync journal batches and fsync checkpoints/directories. Default true; false only for throwaway stores. */
  fsync?: boolean;
  /**
   * Compact once the sealed segments hold at least this many times the checkpoint's size (and at
   * least one segment). Keeps compaction's amortized cost per journal byte constant. Default 1.
   */
  compactRatio?: number;
  /** Called when a background compaction fails (the store stays available; it retries later). */
  onCompactionError?: (error: unknown) => void;
  /** Test hook: runs before each journal batch write; throwing simulates an I/O failure. */
  beforeJournalWrite?: (bytes: number) => void | Promise<void>;
  /**
   * A shared database every commit must reach before it is acknowledged (src/store/postgres/): this
   * store is then that database's local replica. A commit goes to the replicator first and to the
   * journal only once the database has it, so the replica is never ahead of the database.
   */
  replicator?: CommitReplicator;
}

/** Where a replica sends its commits (the PostgreSQL log writer). */
export interface CommitReplicator {
  /** Called synchronously, in seq order, once per committed transaction; resolves once the database has it. */
  append(seq: number, ops: readonly Op[], line: string, expectations: readonly CasExpectation[]): Promise<void>;
  /** Set once the database refused or is gone for good: the store stops (fail-stop). */
  readonly failure: StoreUnavailableError | undefined;
}

export interface DurableStoreStats extends StoreStats {
  journalBytes: number;
  segments: number;
  lastCheckpointSeq: number;
  compactions: number;
  checkpointBytes: number;
  /** Archived records indexed on disk, and those archived since the last compaction (still in memory). */
  coldRecords: number;
  pendingColdRecords: number;
  coldIndexBytes: number;
  auditArchives: number;
  /** Audit events held in memory (not yet in an archive). */
  auditEventsInMemory: number;
  /** Entries and keys of the in-memory audit indexes (by task, delivery, actor). */
  auditIndexEntriesInMemory: number;
  auditIndexKeysInMemory: number;
}

/** Audit events forgotten per event-loop turn after a compaction archived them (≈ 1–2 ms). */
const AUDIT_DROP_SLICE = 4096;
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** The transaction's synchronous operations behind the contract's promises. */
function asyncTx(tx: Transaction, store: DurableStore): Tx {
  return {
    get: async (collection, key) => tx.get(collection, key),
    has: async (collection, key) => tx.has(collection, key),
    // Memory as the transactions before this one left it (bodies run one at a time).
    list: async (collection, filter) => store.listNow(collection, filter),
    byIndex: async (collection, field, value) => store.byIndex(collection, field, value),
    insert: async (collection, key, record) => tx.insert(collection, key, record),
    put: async (collection, key, record, options) => tx.put(collection, key, record, options),
    delete: async (collection, key) => tx.delete(collection, key),
    archive: async (collection, key) => tx.archive(collection, key),
    appendAudit: async (event) => tx.appendAudit(event),
    derive: async (format, payload) => tx.derive(format, payload),
  };
}

export class DurableStore implements Store {
  readonly dir: string;
  readonly #options: StoreOptions;
  readonly #fsync: boolean;
  readonly #segmentBytes: number;
  #state: MemoryState;
  #journal: Journal | undefined;
  #phase: 'new' | 'opening' | 'open' | 'closed' = 'new';
  #seq = 0;
  #commits = 0;
  #sealed = new Map<string, number>();
  #checkpointSeq = 0;
  #checkpointBytes = 0;
  #compactions = 0;
  #compacting: Promise<void> | undefined;
  lastCompactionError: unknown;

  #releaseLock: (() => void) | undefined;

  constructor(options: StoreOptions) {
    this.dir = options.dir;
    this.#options = options;
    this.#fsync = options.fsync ?? true;
    this.#segmentBytes = options.segmentBytes ?? 16 * 1024 * 1024;
    this.#state = new MemoryState(options.indexes, (this.#cold = new ColdTier(options.dir)));
  }

  readonly #cold: ColdTier;
  #fatal: StoreUnavailableError | undefined;

  async open(): Promise<void> {
    if (this.#phase !== 'new') throw new StoreUnavailableError(`store cannot be opened twice (${this.#phase})`);
    this.#phase = 'opening';
    try {
      await this.#load();
      this.#phase = 'open';
    } catch (error) {
      this.#phase = 'closed';
      await this.#journal?.close();
      this.#cold.close();
      this.#releaseLock?.();
      throw error;
    }
    this.#maybeCompact();
  }

  async #load(): Promise<void> {
    await mkdir(this.dir, { recursive: true });
    this.#releaseLock = acquireProcessLock(this.dir);
    const loaded = await loadStore(this.dir, this.#state, this.#cold, this.#fsync);
    this.#seq = loaded.seq;
    this.#checkpointSeq = loaded.checkpointSeq;
    this.#checkpointBytes = loaded.checkpointBytes;
    this.#sealed = loaded.sealed;
    this.#journal = new Journal({
      dir: this.dir,
      segment: loaded.activeSegment,
      bytes: loaded.activeBytes,
      segmentBytes: this.#segmentBytes,
      fsync: this.#fsync,
      onSealed: (segment, bytes) => {
        this.#sealed.set(segment, bytes);
        this.#maybeCompact();
      },
      beforeWrite: this.#options.beforeJournalWrite,
    });
    this.#journal.nextSeq = this.#seq + 1;
    await this.#journal.open();
  }

  async close(): Promise<void> {
    if (this.#phase === 'closed' || this.#closing) return;
    this.#closing = true;
    await this.#line;
    this.#phase = 'closed';
    // Commits on their way to the shared database still reach the journal after it acknowledged them.
    await this.#replicatedTail;
    await this.#journal?.close();
    await this.#compacting;
    this.#cold.close();
    this.#releaseLock?.();
  }

  async get<T extends RecordType = StoredRecord>(collection: CollectionName, key: string): Promise<T | undefined> {
    return this.getNow<T>(collection, key);
  }

  /** `get`, answered from memory at once (for the replica's own use). */
  getNow<T extends RecordType = StoredRecord>(collection: CollectionName, key: string): T | undefined {
    this.#assertReadable();
    return this.#state.get(collection, key) as T | undefined;
  }

  async list<T extends RecordType = StoredRecord>(collection: CollectionName, filter?: (r: T) => boolean): Promise<T[]> {
    return this.listNow<T>(collection, filter);
  }

  /** `list`, answered from memory at once. */
  listNow<T extends RecordType = StoredRecord>(collection: CollectionName, filter?: (r: T) => boolean): T[] {
    this.#assertReadable();
    const matching = this.#state.collection(collection).entries.valuesWhere(filter ? ({ record }) => filter(record as T) : () => true);
    const out: T[] = [];
    for (const { record } of matching) out.push(record as T);
    return out;
  }

  async byIndex<T extends RecordType = StoredRecord>(collection: CollectionName, field: string, value: string | number): Promise<T[]> {
    this.#assertReadable();
    const indexed = this.#state.collection(collection).byIndex(field, value);
    if (indexed) return indexed as T[];
    // No index configured for this field: a scan gives the same answer, only slower.
    const wanted = String(value);
    return this.listNow<StoredRecord>(collection, (r) => {
      const v = r[field];
      return (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') && String(v) === wanted;
    }) as T[];
  }

  async count(collection: CollectionName): Promise<number> {
    this.#assertReadable();
    return this.#state.collection(collection).entries.size;
  }

  async archivedCount(collection: CollectionName): Promise<number> {
    this.#assertReadable();
    return this.#cold.count(collection);
  }

  async *scanArchived<T extends RecordType = StoredRecord>(collection: CollectionName): AsyncGenerator<T> {
    this.#assertReadable();
    for (const record of this.#cold.scan(collection)) yield record as T;
  }

  async audit(query: AuditQuery = {}): Promise<AuditEvent[]> {
    return this.auditNow(query);
  }

  /** `audit`, answered from memory and the archives at once. */
  auditNow(query: AuditQuery = {}): AuditEvent[] {
    this.#assertReadable();
    const limit = query.limit ?? Number.POSITIVE_INFINITY;
    const archivedThrough = this.#cold.archivedThrough;
    const archived = (query.afterSeq ?? 0) < archivedThrough ? this.#cold.queryAudit(query, limit) : [];
    if (archived.length >= limit) return archived;
    // Memory may still hold events an archive has just taken over; those were answered above.
    const recent = this.#state.audit.query({ ...query, afterSeq: Math.max(query.afterSeq ?? 0, archivedThrough), limit: limit - archived.length });
    return archived.length === 0 ? recent : [...archived, ...recent];
  }

  /**
   * Bodies run one at a time, each from its first statement to its last (the line below): a body
   * awaits only its transaction's operations, which answer from memory, so nothing else writes in
   * between and what it read stays true until it commits. The line moves on once a body's changes
   * are applied, not once they are durable: the bodies of one tick share a journal batch.
   */
  #line: Promise<unknown> = Promise.resolve();
  #closing = false;

  transact<R>(fn: (tx: Tx) => R | Promise<R>): Promise<R> {
    // Asked for after close(): refused at once; asked for before: runs (close waits for it).
    if (this.#closing) return Promise.reject(new StoreUnavailableError('store closed'));
    const applied = this.#line.then(() => this.#runBody(fn));
    this.#line = applied.catch(() => undefined);
    return applied.then((durable) => durable());
  }

  /** Runs fn and applies what it wrote; resolves to a function giving the promise of its durability. */
  async #runBody<R>(fn: (tx: Tx) => R | Promise<R>): Promise<() => Promise<R>> {
    const unavailable = this.#unavailable();
    if (unavailable) throw unavailable;
    const journal = this.#journal!;
    const tx = new Transaction(this.#state);
    let result: R;
    try {
      result = await fn(asyncTx(tx, this));
    } finally {
      tx.finish();
    }
    tx.seal();
    // A read-only transaction writes nothing but may have read not-yet-durable state.
    if (tx.ops.length === 0) return () => this.sync().then(() => result);
    const failed = this.#unavailable();
    if (failed) throw failed;
    const seq = ++this.#seq;
    this.#state.apply(tx.ops, seq);
    this.#commits += 1;
    const line = tx.line(seq);
    const replicator = this.#options.replicator;
    if (!replicator) {
      const written = journal.append(line, seq);
      return () => written.then(() => result);
    }
    const shared = replicator.append(seq, tx.ops, line, tx.expectations);
    // Replicated commits resolve in seq order, so the journal still receives its lines in order.
    const written = shared.then(() => journal.append(line, seq));
    this.#replicatedTail = written.catch(() => undefined);
    return () => written.then(() => result);
  }

  /** The last replicated commit's journal write (settled either way); what `sync` waits for first. */
  #replicatedTail: Promise<unknown> = Promise.resolve();

  sync(): Promise<void> {
    const unavailable = this.#unavailable();
    if (unavailable) return Promise.reject(unavailable);
    if (!this.#options.replicator) return this.#journal!.sync();
    return this.#replicatedTail.then(() => {
      const failed = this.#unavailable();
      return failed ? Promise.reject(failed) : this.#journal!.sync();
    });
  }

  /** The seq of the last transaction applied (its own or one replayed from the shared database). */
  get lastSeq(): number {
    return this.#seq;
  }

  /** The seq of the newest audit event (0 when there is none). */
  get lastAuditSeq(): number {
    return this.#state.audit.lastSeq;
  }

  /**
   * Applies a transaction another writer committed to the shared database (its journal line, as
   * `Transaction.line` writes it, with the database's seq): to memory at once, to the journal as
   * any other line. Seqs must follow on without a gap.
   */
  applyReplicated(seq: number, line: string): Promise<void> {
    const unavailable = this.#unavailable();
    if (unavailable) return Promise.reject(unavailable);
    if (seq !== this.#seq + 1) return Promise.reject(new StoreUnavailableError(`replica: seq ${seq} does not follow ${this.#seq}`));
    const entry = JSON.parse(line) as { seq?: unknown; ops?: unknown };
    if (entry.seq !== seq || !Array.isArray(entry.ops)) return Promise.reject(new StoreUnavailableError(`replica: log entry ${seq} is malformed`));
    this.#state.applyFromDisk(entry.ops, seq);
    this.#seq = seq;
    this.#commits += 1;
    const written = this.#journal!.append(line, seq);
    this.#replicatedTail = written.catch(() => undefined);
    return written;
  }

  stats(): DurableStoreStats {
    let sealedBytes = 0;
    for (const bytes of this.#sealed.values()) sealedBytes += bytes;
    return {
      journalBytes: sealedBytes + (this.#journal?.bytes ?? 0),
      segments: this.#sealed.size,
      lastCheckpointSeq: this.#checkpointSeq,
      commits: this.#commits,
      batches: this.#journal?.batches ?? 0,
      compactions: this.#compactions,
      checkpointBytes: this.#checkpointBytes,
      ...this.#cold.stats(),
      auditEventsInMemory: this.#state.audit.events.length,
      auditIndexEntriesInMemory: this.#state.audit.indexed,
      auditIndexKeysInMemory: this.#state.audit.indexKeys,
    };
  }

  /** Seal the active segment and fold everything sealed into a new checkpoint; resolves when done. */
  async compact(): Promise<void> {
    const unavailable = this.#unavailable();
    if (unavailable) throw unavailable;
    await this.#journal!.rotate();
    while (this.#compacting) await this.#compacting;
    this.lastCompactionError = undefined;
    this.#startCompaction();
    await this.#compacting;
    if (this.lastCompactionError) throw this.lastCompactionError;
  }

  /** Resolves when no background compaction is running. */
  async compactionIdle(): Promise<void> {
    while (this.#compacting) await this.#compacting;
  }

  #maybeCompact(): void {
    if (this.#compacting || this.#phase !== 'open' || this.#sealed.size === 0) return;
    let sealedBytes = 0;
    for (const bytes of this.#sealed.values()) sealedBytes += bytes;
    if (sealedBytes < (this.#options.compactRatio ?? 1) * this.#checkpointBytes) return;
    this.#startCompaction();
  }

  #startCompaction(): void {
    if (this.#sealed.size === 0) return;
    const segments = [...this.#sealed.keys()];
    this.#compacting = (async () => {
      try {
        const result = await runCompaction({ dir: this.dir, segments, fsync: this.#fsync });
        // The checkpoint listing them is durable: archived records and events leave memory.
        try {
          // In slices with the event loop running in between: taking in 100k archived keys or
          // forgetting 150k archived audit events at once blocks every request for 100–300 ms.
          if (result.coldFile) for (const _ of this.#cold.adoptColdFile(result.coldFile, result.seq, result.coldKeys)) await nextTurn();
          if (result.auditArchive) {
            await this.#cold.loadAuditArchive(result.auditArchive, this.#fsync);
            const through = this.#cold.archivedThrough;
            while (!this.#state.audit.dropThrough(through, AUDIT_DROP_SLICE)) await nextTurn();
          }
        } catch (error) {
          // The new checkpoint is durable but memory could not take it in: memory and disk would
          // disagree from here on, so the store stops (fail-stop); a restart loads what is on disk.
          this.#fatal = new StoreUnavailableError(`store unavailable: a compaction's files could not be loaded (${(error as Error).message})`);
          throw error;
        }
        // Only now is the checkpoint durable, so only now may the segments go.
        for (const name of result.folded) {
          await unlink(join(this.dir, name)).catch((error: NodeJS.ErrnoException) => {
            if (error.code !== 'ENOENT') throw error;
          });
          this.#sealed.delete(name);
        }
        if (this.#fsync) await fsyncDir(this.dir);
        this.#checkpointSeq = result.seq;
        this.#checkpointBytes = await stat(join(this.dir, CHECKPOINT_FILE)).then((s) => s.size);
        this.#compactions += 1;
        // A success clears an earlier failure, so compaction chains again (see finally below).
        this.lastCompactionError = undefined;
      } catch (error) {
        this.lastCompactionError = error;
        this.#options.onCompactionError?.(error);
      }
    })().finally(() => {
      this.#compacting = undefined;
      if (!this.lastCompactionError) this.#maybeCompact();
    });
  }

  #unavailable(): StoreUnavailableError | undefined {
    if (this.#phase === 'closed') return new StoreUnavailableError('store closed');
    if (this.#phase !== 'open') return new StoreUnavailableError('store not open');
    return this.#fatal ?? this.#options.replicator?.failure ?? this.#journal?.failure;
  }

  #assertReadable(): void {
    if (this.#phase === 'closed') throw new StoreUnavailableError('store closed');
    if (this.#phase !== 'open') throw new StoreUnavailableError('store not open');
  }
}
