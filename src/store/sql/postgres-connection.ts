// PostgreSQL through pg: a pool of connections; each transaction runs on one of them between BEGIN
// and COMMIT (a COMMIT returns once PostgreSQL has made it durable). A transaction the database
// aborts as a serialization failure or a deadlock is run again, from the start.
import pg from 'pg';
import { describeDatabase } from './database-url.js';
import { StoreUnavailableError, UniqueViolationError, type CollectionName } from '../types.js';
import { CHANNEL, type Row, type SqlConnection, type SqlSession } from './sql-connection.js';

export interface PostgresOptions {
  url: string;
  /** Connections in the pool. Default 10. */
  max?: number;
  /** What this node's connections say they are in pg_stat_activity. */
  applicationName?: string;
  /**
   * The server ends a session left inside a transaction, waiting for its client, this long (PostgreSQL's
   * idle_in_transaction_session_timeout): a process paused or cut off mid-transaction then holds no row
   * lock (a lease's FOR SHARE, a task's row) that the other nodes wait for. Unset: no limit.
   */
  idleInTransactionMs?: number;
}

/** serialization_failure, deadlock_detected: the transaction may be run again as it is. */
const RETRYABLE = new Set(['40001', '40P01']);
const MAX_ATTEMPTS = 5;

/** `?` placeholders as PostgreSQL's `$n` (the store's SQL has no `?` inside its literals). */
export function numbered(sql: string): string {
  let n = 0;
  return sql.replace(/\?/g, () => `$${++n}`);
}

// Rows come back as text for JSON (the store parses and freezes records itself) and as numbers for
// bigint (sequence numbers stay far below 2^53).
const TYPES = {
  getTypeParser: (oid: number, format?: 'text' | 'binary') => {
    if (oid === pg.types.builtins.JSON || oid === pg.types.builtins.JSONB) return (value: string) => value;
    if (oid === pg.types.builtins.INT8) return (value: string) => Number(value);
    return pg.types.getTypeParser(oid, format);
  },
};

export class PostgresConnection implements SqlConnection {
  readonly dialect = 'postgres' as const;
  readonly #pool: pg.Pool;
  readonly #where: string;
  #closed = false;
  readonly #url: string;
  readonly #listeners = new Map<string, Set<(payload: string) => void>>();
  /** The one session that LISTENs, opened at the first listen and again after it is lost. */
  #listener: { client: pg.Client; ready: Promise<void> } | undefined;
  #listenerRetry: NodeJS.Timeout | undefined;
  /** Transactions begun and not yet ended: close waits for them. */
  readonly #running = new Set<Promise<unknown>>();
  batches = 0;

  constructor(options: PostgresOptions) {
    this.#where = describeDatabase(options.url);
    this.#url = options.url;
    this.#pool = new pg.Pool({
      connectionString: options.url,
      max: options.max ?? 10,
      types: TYPES,
      ...(options.applicationName ? { application_name: options.applicationName } : {}),
      ...(options.idleInTransactionMs ? { idle_in_transaction_session_timeout: options.idleInTransactionMs } : {}),
      // A connection that stops answering (a half-open link) is given up instead of holding its rows.
      keepAlive: true,
      connectionTimeoutMillis: 10_000,
    });
    // An idle connection the server dropped: the next query on the pool opens another.
    this.#pool.on('error', () => undefined);
  }

  async read(sql: string, params: readonly unknown[] = []): Promise<Row[]> {
    this.#assertOpen();
    const result = await this.#pool.query(numbered(sql), params as unknown[]).catch((error: unknown) => {
      throw this.#mapped(error);
    });
    return result.rows as Row[];
  }

  transaction<R>(fn: (session: SqlSession) => Promise<R>): Promise<R> {
    this.#assertOpen();
    const running = this.#transaction(fn);
    const tracked = running.catch(() => undefined);
    this.#running.add(tracked);
    void tracked.then(() => this.#running.delete(tracked));
    return running;
  }

  async #transaction<R>(fn: (session: SqlSession) => Promise<R>): Promise<R> {
    const client = await this.#pool.connect().catch((error: unknown) => {
      throw this.#mapped(error);
    });
    let broken = false;
    // The pool listens for errors of idle connections only: one that dies while checked out here (the
    // server shut down between two statements) would otherwise be an uncaught 'error' event. The next
    // statement on it fails and is handled as any failure.
    const onError = () => {
      broken = true;
    };
    client.on('error', onError);
    try {
      for (let attempt = 1; ; attempt++) {
        const session: SqlSession = {
          all: async (sql, params = []) => (await client.query(numbered(sql), params as unknown[])).rows as Row[],
          run: async (sql, params = []) => (await client.query(numbered(sql), params as unknown[])).rowCount ?? 0,
          // PostgreSQL delivers it at COMMIT, to every session that listens, and drops it on ROLLBACK.
          notify: async (channel, payload) => {
            if (!CHANNEL.test(channel)) throw new TypeError(`notify: ${JSON.stringify(channel)} is not a channel name`);
            await client.query('SELECT pg_notify($1, $2)', [channel, payload]);
          },
        };
        await client.query('BEGIN');
        try {
          const result = await fn(session);
          await client.query('COMMIT');
          this.batches += 1;
          return result;
        } catch (error) {
          await client.query('ROLLBACK').catch(() => {
            broken = true;
          });
          const code = (error as { code?: string }).code;
          if (!broken && code !== undefined && RETRYABLE.has(code) && attempt < MAX_ATTEMPTS) continue;
          throw this.#mapped(error);
        }
      }
    } finally {
      client.off('error', onError);
      client.release(broken);
    }
  }

  async listen(channel: string, listener: (payload: string) => void): Promise<() => void> {
    if (!CHANNEL.test(channel)) throw new TypeError(`listen: ${JSON.stringify(channel)} is not a channel name`);
    this.#assertOpen();
    let set = this.#listeners.get(channel);
    const fresh = !set;
    if (!set) this.#listeners.set(channel, (set = new Set()));
    set.add(listener);
    const unsubscribe = () => void set.delete(listener);
    if (!this.#listener) this.#openListener();
    else if (fresh) await this.#listener.ready.then(() => this.#listener?.client.query(`LISTEN ${channel}`)).catch(() => this.#dropListener());
    // Resolved once this channel is listened to (or the session failed: a new one follows, and then it is).
    await this.#listener?.ready.catch(() => undefined);
    return unsubscribe;
  }

  #openListener(): void {
    if (this.#closed || this.#listener || this.#listenerRetry) return;
    const client = new pg.Client({ connectionString: this.#url, keepAlive: true, connectionTimeoutMillis: 10_000 });
    client.on('notification', (message) => {
      for (const listener of this.#listeners.get(message.channel) ?? []) listener(message.payload ?? '');
    });
    client.on('error', () => this.#dropListener());
    client.on('end', () => this.#dropListener());
    const ready = (async () => {
      await client.connect();
      for (const channel of this.#listeners.keys()) await client.query(`LISTEN ${channel}`);
    })();
    ready.catch(() => this.#dropListener());
    this.#listener = { client, ready };
  }

  /** The listening session is gone (a restart, a cut link): another one in a second. */
  #dropListener(): void {
    const current = this.#listener;
    if (!current) return;
    this.#listener = undefined;
    void current.client.end().catch(() => undefined);
    if (this.#closed) return;
    this.#listenerRetry = setTimeout(() => {
      this.#listenerRetry = undefined;
      this.#openListener();
    }, 1000);
    this.#listenerRetry.unref();
  }

  async sync(): Promise<void> {
    // Every transaction resolved only after its COMMIT returned: nothing is waiting to be made durable.
    this.#assertOpen();
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearTimeout(this.#listenerRetry);
    const listener = this.#listener;
    this.#listener = undefined;
    await listener?.client.end().catch(() => undefined);
    await Promise.all(this.#running);
    await this.#pool.end();
  }

  #assertOpen(): void {
    if (this.#closed) throw new StoreUnavailableError('store closed');
  }

  /** A unique key PostgreSQL refused as the store's own error; a lost connection as unavailability. */
  #mapped(error: unknown): unknown {
    const e = error as { code?: string; table?: string; detail?: string; message?: string };
    if (e.code === '23505' && e.table) return new UniqueViolationError(e.table as CollectionName, /\(key\)=\((.*)\) already exists/.exec(e.detail ?? '')?.[1] ?? '');
    // A connection lost or refused, or a login the server turned down (28…: the credentials; 3D000: no such database).
    const lost =
      (typeof e.code === 'string' && (e.code.startsWith('08') || e.code.startsWith('57P') || e.code.startsWith('28') || e.code === '3D000' || /^E(CONNREFUSED|CONNRESET|PIPE|TIMEDOUT|HOSTUNREACH)$/.test(e.code))) ||
      /Connection terminated|timeout exceeded when trying to connect|is not queryable/.test(e.message ?? '');
    return lost ? new StoreUnavailableError(`store unavailable: ${this.#where}: ${e.message ?? String(error)}`) : error;
  }
}
