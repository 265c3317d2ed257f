// SQLite (sqlite-driver.ts says through which binding): two connections to one file. The writer holds one write
// transaction per event-loop turn (group commit: every transaction of the turn is a savepoint in it,
// and one COMMIT — one fsync of the WAL — makes them all durable). The reader answers reads outside
// transactions from the last committed state, so nobody outside a transaction sees a transaction
// half done or one that is not yet durable.
import { StoreError, StoreUnavailableError } from '../types.js';
import { CHANNEL, type Row, type SqlConnection, type SqlSession } from './sql-connection.js';
import { sqliteBinding, type SqliteDatabase, type SqliteStatement } from './sqlite-driver.js';

export interface SqliteOptions {
  file: string;
  /** Test hook: runs before each COMMIT; throwing simulates an I/O failure of the batch. */
  beforeCommit?: () => void;
  /**
   * Test hook: the database's clock (ms) as the lease statements read it (`ccweb_now_ms()`), for tests
   * that move time by hand. Without it they read SQLite's own clock (this host's: one node writes the file).
   */
  clockMs?: () => number;
  /** Called once when the connection stops for good (a failed commit, a batch SQLite rolled back). */
  onFailure?: (error: StoreUnavailableError) => void;
}

/**
 * The write-ahead log's size once a checkpoint has folded it in: SQLite checkpoints every 1,000 pages
 * (≈ 4 MiB) by itself, and truncates the log back to at most this (it would otherwise keep its
 * largest size for good).
 */
export const WAL_SIZE_LIMIT_BYTES = 8 * 1024 * 1024;

/**
 * How long a connection waits for a lock another process holds (a backup's reader, `export-audit`)
 * before its statement fails; the two bindings' defaults differ (5 s and 0).
 */
const BUSY_TIMEOUT_MS = 5_000;

// WAL: readers never wait for the writer. synchronous=FULL: a COMMIT returns once the WAL is
// fsynced, so an acknowledged transaction survives a power loss, not only a process crash.
// temp_store=MEMORY: each transaction is a savepoint in the batch's write transaction, and SQLite
// keeps the pages a savepoint changes in a statement journal to roll back to; on disk that is one
// more write of every such page (two system calls each), for a file no recovery ever reads.
const PRAGMAS = `PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}; PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA journal_size_limit = ${WAL_SIZE_LIMIT_BYTES}; PRAGMA foreign_keys = OFF; PRAGMA temp_store = MEMORY`;

function statements(db: SqliteDatabase) {
  const cache = new Map<string, SqliteStatement>();
  return (sql: string): SqliteStatement => {
    let statement = cache.get(sql);
    if (!statement) cache.set(sql, (statement = db.prepare(sql)));
    return statement;
  };
}

/**
 * SQLite's answer for a file that is no database of its own or is damaged (SQLITE_NOTADB,
 * SQLITE_CORRUPT; both bindings put SQLite's text in the message). Anything else (permissions, a
 * read-only directory) is not the file's fault and is no reason to restore it.
 */
export function isUnreadableStoreError(error: unknown): boolean {
  return /file is not a database|database disk image is malformed/i.test((error as Error | undefined)?.message ?? '');
}

export class SqliteConnection implements SqlConnection {
  readonly dialect = 'sqlite' as const;
  readonly #writer: SqliteDatabase;
  readonly #reader: SqliteDatabase;
  readonly #write: (sql: string) => SqliteStatement;
  readonly #read: (sql: string) => SqliteStatement;
  readonly #beforeCommit: (() => void) | undefined;
  readonly #onFailure: ((error: StoreUnavailableError) => void) | undefined;
  /** Transactions run one after another; this is the tail of that line. */
  #line: Promise<unknown> = Promise.resolve();
  /** The batch the write transaction now open belongs to: resolved by its COMMIT. */
  #batch: { done: Promise<void>; resolve: () => void; reject: (error: Error) => void } | undefined;
  #failure: StoreUnavailableError | undefined;
  #closed = false;
  /** One process holds the file: its own listeners are all there are. */
  readonly #listeners = new Map<string, Set<(payload: string) => void>>();
  batches = 0;

  constructor(options: SqliteOptions) {
    const { open } = sqliteBinding();
    const opened: SqliteDatabase[] = [];
    try {
      this.#writer = open(options.file, { readonly: false });
      opened.push(this.#writer);
      this.#writer.exec(PRAGMAS);
      // On a file system without shared memory (NFS, CIFS) SQLite stays in its rollback journal, where
      // readers wait for the writer: refused rather than run slower than the store promises.
      const mode = String(this.#writer.prepare('PRAGMA journal_mode').all()[0]?.['journal_mode'] ?? '');
      if (mode.toLowerCase() !== 'wal') {
        throw new StoreError('store_not_wal', `SQLite could not use its write-ahead log for ${options.file} (journal mode ${mode || 'unknown'}): CCWEB_DATA_DIR must be on a local file system`);
      }
      this.#reader = open(options.file, { readonly: true });
      opened.push(this.#reader);
      this.#reader.exec(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`);
      const clock = options.clockMs ?? (() => null);
      for (const db of [this.#writer, this.#reader]) db.function('ccweb_now_ms', clock);
    } catch (error) {
      for (const db of opened) db.close();
      // Another file in its place, or a damaged one: nothing here can mend it.
      if (isUnreadableStoreError(error)) throw new StoreError('store_unreadable', `${options.file} cannot be read by SQLite (${(error as Error).message})`);
      throw error;
    }
    this.#write = statements(this.#writer);
    this.#read = statements(this.#reader);
    this.#beforeCommit = options.beforeCommit;
    this.#onFailure = options.onFailure;
  }

  async listen(channel: string, listener: (payload: string) => void): Promise<() => void> {
    if (!CHANNEL.test(channel)) throw new TypeError(`listen: ${JSON.stringify(channel)} is not a channel name`);
    let set = this.#listeners.get(channel);
    if (!set) this.#listeners.set(channel, (set = new Set()));
    set.add(listener);
    return () => void set.delete(listener);
  }

  async read(sql: string, params: readonly unknown[] = []): Promise<Row[]> {
    this.#assertUsable();
    return this.#read(sql).all(...params) as Row[];
  }

  transaction<R>(fn: (session: SqlSession) => Promise<R>): Promise<R> {
    // The line holds the next transaction back only while this one's body runs, not until its
    // batch is durable: the bodies of one turn share that batch.
    const body = this.#line.then(() => this.#runBody(fn));
    this.#line = body.catch(() => undefined);
    return body.then(async ({ result, durable }) => {
      await durable;
      return result;
    });
  }

  async #runBody<R>(fn: (session: SqlSession) => Promise<R>): Promise<{ result: R; durable: Promise<void> }> {
    this.#assertUsable();
    const batch = this.#openBatch();
    const write = this.#write;
    const notes: Array<[string, string]> = [];
    const session: SqlSession = {
      all: async (sql, params = []) => write(sql).all(...params) as Row[],
      run: async (sql, params = []) => Number(write(sql).run(...params).changes),
      notify: async (channel, payload) => {
        if (!CHANNEL.test(channel)) throw new TypeError(`notify: ${JSON.stringify(channel)} is not a channel name`);
        notes.push([channel, payload]);
      },
    };
    this.#writer.exec('SAVEPOINT tx');
    let result: R;
    try {
      result = await fn(session);
    } catch (error) {
      try {
        this.#writer.exec('ROLLBACK TO tx; RELEASE tx');
      } catch (rollback) {
        // SQLite itself rolled the whole batch back (a full disk, an I/O error, no memory): the
        // savepoint is gone with the other bodies' writes, and nothing later may commit as if it were not.
        this.#fail(error as Error, rollback as Error);
      }
      throw error;
    }
    try {
      this.#writer.exec('RELEASE tx');
    } catch (release) {
      this.#fail(release as Error);
      throw this.#failure!;
    }
    if (notes.length > 0) {
      void batch.then(
        () => {
          for (const [channel, payload] of notes) for (const listener of this.#listeners.get(channel) ?? []) listener(payload);
        },
        () => undefined,
      );
    }
    return { result, durable: batch };
  }

  /** The connection stops: the open batch (if any) is rejected and every later call refused. */
  #fail(cause: Error, detail?: Error): void {
    if (this.#failure) return;
    this.#failure = new StoreUnavailableError(`store unavailable: SQLite ended the write transaction (${cause.message}${detail ? `; ${detail.message}` : ''})`);
    const batch = this.#batch;
    this.#batch = undefined;
    try {
      this.#writer.exec('ROLLBACK');
    } catch {
      // no transaction left to roll back
    }
    batch?.reject(this.#failure);
    this.#onFailure?.(this.#failure);
  }

  /** The open batch's commit, opening one (and scheduling its COMMIT after this turn) if none is open. */
  #openBatch(): Promise<void> {
    if (this.#batch) return this.#batch.done;
    this.#writer.exec('BEGIN IMMEDIATE');
    let resolve!: () => void;
    let reject!: (error: Error) => void;
    const done = new Promise<void>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    done.catch(() => undefined);
    this.#batch = { done, resolve, reject };
    // Queued behind the transactions already waiting, so they join this batch.
    setImmediate(() => {
      this.#line = this.#line.then(() => this.#commit());
    });
    return done;
  }

  #commit(): void {
    const batch = this.#batch;
    if (!batch) return;
    this.#batch = undefined;
    try {
      this.#beforeCommit?.();
      this.#writer.exec('COMMIT');
      this.batches += 1;
      batch.resolve();
    } catch (error) {
      // The outcome of a failed COMMIT is unknown and a retried fsync can report success after the
      // kernel dropped the data: the store stops, and a restart reads what reached the disk.
      this.#failure = new StoreUnavailableError(`store unavailable: a commit failed (${(error as Error).message})`);
      try {
        this.#writer.exec('ROLLBACK');
      } catch {
        // the failed COMMIT ended the transaction already
      }
      batch.reject(this.#failure);
      this.#onFailure?.(this.#failure);
    }
  }

  /**
   * Folds the WAL into the database file and empties it (what SQLite does by itself every 1,000 pages):
   * after it the file's size is the store's.
   */
  checkpoint(): Promise<void> {
    const done = this.#line.then(() => {
      // No body runs now: the open batch commits here (its scheduled COMMIT then finds nothing to do).
      this.#commit();
      this.#assertUsable();
      this.#writer.exec('PRAGMA wal_checkpoint(TRUNCATE)');
    });
    this.#line = done.catch(() => undefined);
    return done;
  }

  async sync(): Promise<void> {
    this.#assertUsable();
    await this.#line;
    if (this.#batch) await this.#batch.done;
    if (this.#failure) throw this.#failure;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    await this.#line.catch(() => undefined);
    if (this.#batch) await this.#batch.done.catch(() => undefined);
    this.#closed = true;
    this.#reader.close();
    this.#writer.close();
  }

  #assertUsable(): void {
    if (this.#closed) throw new StoreUnavailableError('store closed');
    if (this.#failure) throw this.#failure;
  }
}
