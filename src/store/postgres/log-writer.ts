// The one connection a node writes PostgreSQL through. Commits are group-committed like the
// embedded journal's: every transaction submitted while a batch is in flight goes into the next
// batch, one PostgreSQL transaction that moves the head from exactly where the batch starts (so a
// second writer, or a replica that missed a commit, is refused rather than merged), appends the log
// lines and writes each record's final value and the audit events.
//
// A database that goes away (restart, network) is waited for: the batch is retried on a new
// connection until `outageMs` has passed; a retry first asks whether the lost attempt committed
// after all (its last line is in the log), so nothing is written twice. Anything else — a refused
// check, the writer lock taken by another node, an outage longer than allowed — stops the store
// (fail-stop): every commit after it is refused, and a restart reloads from the database.
import pg from 'pg';
import { batchRows, type BatchRows, type CommittedEntry } from './batch-rows.js';
import { databaseClient, reconnectDelayMs, unreachable } from './client.js';
import { describeDatabase } from './database-url.js';
import { StoreError, StoreUnavailableError } from '../types.js';
import { COMMIT_LOCK, WRITER_LOCK } from './schema.js';

export interface LogWriterOptions {
  url: string;
  nodeId: string;
  version: string;
  /** Where the other nodes reach this one (a standby forwards requests to the writer's), if known. */
  nodeUrl?: string;
  /** How long a database that went away is waited for before the store stops. */
  outageMs: number;
  heartbeatMs?: number;
  /** Test hook: runs before each batch's SQL (throwing simulates a database failure). */
  beforeBatch?: (rows: BatchRows) => void | Promise<void>;
  /**
   * Standby: while another node holds the writer lock, `open` waits for it (polling every
   * `pollMs`) instead of refusing, telling `onWaiting` who writes; `signal` ends the wait.
   */
  standby?: {
    onWaiting: (message: string) => void;
    /** Told after every poll which node writes now (undefined: none has said so), to forward requests to it. */
    onWriter?: (writer: WriterAddress | undefined) => void;
    signal?: AbortSignal;
    pollMs?: number;
  };
  /** Called once, when the writer stops for good (the store is then unavailable). */
  onFailure?: (error: StoreUnavailableError) => void;
  /**
   * `exclusive` (default): this node is the database's only writer for as long as it runs.
   * `shared`: every node of the cluster writes, one batch at a time under the commit lock
   * (`withCommitLock`); the writer lock is held shared, so a node that writes alone and nodes that
   * share exclude each other.
   */
  lock?: 'exclusive' | 'shared';
}

interface Pending {
  entry: CommittedEntry;
  resolve: () => void;
  reject: (error: unknown) => void;
}

/** Errors after which the same batch may be tried again on a new connection. */
export function isConnectionFailure(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== 'string') {
    const message = String((error as Error | null)?.message ?? '');
    return /Connection terminated|connection not open|Client has encountered a connection error|timeout/i.test(message);
  }
  return (
    code.startsWith('08') || // connection exceptions
    code === '57P01' || code === '57P02' || code === '57P03' || // admin/crash shutdown, cannot connect now
    code === '53300' || // too many connections
    ['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENOTFOUND', 'EAI_AGAIN'].includes(code)
  );
}

export class WriterTakenError extends StoreError {
  /**
   * The lock is held by a session of this very node: its previous connection, which the server has
   * not noticed is gone yet (a reset on the client's side; the keepalives end it within about 25 s).
   */
  heldByThisNode = false;
  /** `shared`: this node asked to share the writes, and a node that writes alone holds the database. */
  constructor(where: string, holder: string, shared = false) {
    super(
      'database_writer_taken',
      shared
        ? `another node writes ${where} alone (${holder}): nodes that share the writes cannot join it: stop that node, or give this one its own CCWEB_DATABASE_URL`
        : `another node writes ${where} (${holder}); this version runs one node per database at a time: ` + 'stop that node, or give this one its own CCWEB_DATABASE_URL',
    );
  }
}

/** A node as the database knows it (`ccweb_nodes`), for the operators' overview. */
export interface NodeStatus {
  nodeId: string;
  role: 'writer' | 'standby' | 'stopped';
  version: string;
  startedAt: string;
  heartbeatAt: string;
  /** Where the other nodes reach it; null for a node that did not say (one older than schema 2). */
  url: string | null;
}

/** The node that holds the writer lock, as a standby sees it. */
export interface WriterAddress {
  nodeId: string;
  url: string | null;
  heartbeatAt: string;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref());

export class LogWriter {
  readonly #options: LogWriterOptions;
  readonly #where: string;
  #client: pg.Client | undefined;
  #queue: Pending[] = [];
  #flushing = false;
  #failure: StoreUnavailableError | undefined;
  #closed = false;
  #heartbeatTimer: NodeJS.Timeout | undefined;
  #idle: Promise<void> = Promise.resolve();
  batches = 0;
  reconnects = 0;
  /** Every node the database knows, as of the last heartbeat (or the wait as a standby). */
  nodes: NodeStatus[] = [];

  constructor(options: LogWriterOptions) {
    this.#options = options;
    this.#where = describeDatabase(options.url);
  }

  get failure(): StoreUnavailableError | undefined {
    return this.#failure;
  }

  /** Connects, takes the writer lock (waiting for it on a standby) and registers this node. */
  async open(): Promise<void> {
    const standby = this.#options.standby;
    let told = 0;
    // A standby waits for hours: the database restarting meanwhile is an outage like a writer's,
    // waited for as long, not a reason to exit (the three-node chaos run caught a standby dying here).
    let downSince: number | undefined;
    let attempt = 0;
    // A database that restarted (an outage seen, or one shorter than a poll) ended the writer's
    // session and freed the lock, though the writer is most likely alive and about to take it back
    // at its next heartbeat: the standby leaves it alone for two heartbeats after it sees the server's
    // start time change, rather than win a race that fails every task the writer was running.
    let serverStartedAt: number | undefined;
    let graceEnd: number | undefined;
    const graceMs = 2 * (this.#options.heartbeatMs ?? 10_000);
    const mayLock = (startedAt: number): boolean => {
      if (serverStartedAt !== undefined && startedAt !== serverStartedAt) graceEnd = Date.now() + graceMs;
      serverStartedAt = startedAt;
      return graceEnd === undefined || Date.now() >= graceEnd;
    };
    for (;;) {
      try {
        this.#client = await this.#connect(standby ? { standby: true, mayLock } : {});
        break;
      } catch (error) {
        if (standby && isConnectionFailure(error)) {
          downSince ??= Date.now();
          if (Date.now() - downSince >= this.#options.outageMs) throw unreachable(this.#where, error);
          if (standby.signal?.aborted) throw new StoreError('store_open_aborted', 'stopped while waiting as a standby');
          await new Promise<void>((resolve) => setTimeout(resolve, reconnectDelayMs(attempt++)));
          continue;
        }
        if (!standby || !(error instanceof WriterTakenError)) throw error;
        downSince = undefined;
        attempt = 0;
        if (standby.signal?.aborted) throw new StoreError('store_open_aborted', 'stopped while waiting as a standby');
        // Said when the wait starts and then every minute, not every poll.
        if (Date.now() - told >= 60_000) {
          standby.onWaiting(error.message);
          told = Date.now();
        }
        // A timer that keeps the process alive: a standby has nothing else to (no server, no connection).
        await new Promise<void>((resolve) => setTimeout(resolve, standby.pollMs ?? 2000));
        if (standby.signal?.aborted) throw new StoreError('store_open_aborted', 'stopped while waiting as a standby');
      }
    }
    const every = this.#options.heartbeatMs ?? 10_000;
    this.#heartbeatTimer = setInterval(() => void this.#beat(), every);
    this.#heartbeatTimer.unref();
  }

  append(entry: CommittedEntry): Promise<void> {
    if (this.#failure) return Promise.reject(this.#failure);
    if (this.#closed) return Promise.reject(new StoreUnavailableError('store closed'));
    const done = new Promise<void>((resolve, reject) => this.#queue.push({ entry, resolve, reject }));
    if (!this.#flushing) {
      this.#flushing = true;
      this.#idle = new Promise<void>((resolve) => setImmediate(() => void this.#flushLoop().finally(resolve)));
    }
    return done;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#heartbeatTimer);
    await this.#idle;
    await this.#connecting?.catch(() => undefined);
    const client = this.#client;
    this.#client = undefined;
    if (client && !this.#failure) await client.query("UPDATE ccweb_nodes SET role = 'stopped', heartbeat_at = now() WHERE node_id = $1", [this.#options.nodeId]).catch(() => undefined);
    // Ending the session releases the writer lock.
    await client?.end().catch(() => undefined);
  }

  async #flushLoop(): Promise<void> {
    try {
      while (this.#queue.length > 0 && !this.#failure) {
        const batch = this.#queue;
        this.#queue = [];
        try {
          await this.#commitWithRetry(batch.map((p) => p.entry));
          this.batches += 1;
          for (const p of batch) p.resolve();
          // A node that always has a batch in flight still heartbeats: between two batches.
          if (this.#beatDue) await this.#heartbeat();
        } catch (error) {
          this.#fail(error instanceof StoreUnavailableError ? error : new StoreUnavailableError(`store unavailable: ${this.#where}: ${(error as Error).message}`));
          for (const p of batch) p.reject(this.#failure);
        }
      }
    } finally {
      this.#flushing = false;
    }
  }

  /** Stops the writer for good (the first reason wins): every commit waiting or to come is refused. */
  #fail(error: StoreUnavailableError): void {
    if (!this.#failure) {
      this.#failure = error;
      this.#options.onFailure?.(error);
    }
    for (const p of this.#queue) p.reject(this.#failure);
    this.#queue = [];
  }

  async #commitWithRetry(entries: CommittedEntry[]): Promise<void> {
    const rows = batchRows(entries);
    const deadline = Date.now() + this.#options.outageMs;
    let attempt = 0;
    for (;;) {
      try {
        const client = await this.#ensureClient();
        if (attempt > 0 && (await this.#alreadyCommitted(client, rows))) return;
        await this.#options.beforeBatch?.(rows);
        await commitBatch(client, rows, this.#options.nodeId);
        return;
      } catch (error) {
        const passing = isConnectionFailure(error) || ownStaleSession(error);
        if (!passing || Date.now() >= deadline) {
          if (passing) throw new StoreUnavailableError(`store unavailable: ${this.#where} did not come back within ${Math.round(this.#options.outageMs / 1000)} s`);
          throw error;
        }
        const lost = this.#client;
        this.#client = undefined;
        await lost?.end().catch(() => undefined);
        attempt += 1;
        this.reconnects += 1;
        await sleep(reconnectDelayMs(attempt));
      }
    }
  }

  /** After a lost connection: did the batch commit before the answer was lost? */
  async #alreadyCommitted(client: pg.Client, rows: BatchRows): Promise<boolean> {
    const { rows: found } = await client.query<{ line: string }>('SELECT line FROM ccweb_log WHERE seq = $1', [rows.lastSeq]);
    return found.length === 1 && found[0]!.line === rows.log.line.at(-1);
  }

  /**
   * The writer's connection, made again if it was lost. One at a time: a batch and a heartbeat that
   * both found it gone must not open two sessions (the second could not take our own lock).
   */
  #ensureClient(): Promise<pg.Client> {
    if (this.#client) return Promise.resolve(this.#client);
    this.#connecting ??= this.#connect().then(
      async (client) => {
        this.#connecting = undefined;
        // Closed meanwhile: this session must not keep the lock.
        if (this.#closed) {
          await client.end().catch(() => undefined);
          throw new StoreUnavailableError('store closed');
        }
        return (this.#client = client);
      },
      (error: unknown) => {
        this.#connecting = undefined;
        throw error;
      },
    );
    return this.#connecting;
  }

  #connecting: Promise<pg.Client> | undefined;

  /**
   * `standby`: a node waiting in open(), which registers as such when the lock is taken; `mayLock`
   * decides, from the server's start time, whether it asks for the lock at all.
   */
  async #connect(options: { standby?: boolean; mayLock?: (serverStartedAt: number) => boolean } = {}): Promise<pg.Client> {
    // An idle connection's error (the server restarted) is swallowed (client.ts); the next batch reconnects.
    const client = databaseClient(this.#options.url, { application_name: this.#applicationName, keepAlive: true, keepAliveInitialDelayMillis: 10_000 });
    await client.connect();
    try {
      // The writer lock is this session's: a node that loses power must not keep it for the
      // operating system's default two hours of TCP silence. PostgreSQL probes the connection
      // after 10 s idle and drops it (freeing the lock for a standby) after about 25 s.
      await client.query('SET tcp_keepalives_idle = 10; SET tcp_keepalives_interval = 5; SET tcp_keepalives_count = 3');
      let lock = true;
      if (options.mayLock) {
        const started = await client.query<{ ms: string }>('SELECT (extract(epoch FROM pg_postmaster_start_time()) * 1000)::bigint AS ms');
        lock = options.mayLock(Number(started.rows[0]!.ms));
      }
      const take = this.#shared ? 'SELECT pg_try_advisory_lock_shared($1) AS ok' : 'SELECT pg_try_advisory_lock($1) AS ok';
      const { rows } = lock ? await client.query<{ ok: boolean }>(take, [WRITER_LOCK.toString()]) : { rows: [{ ok: false }] };
      if (!rows[0]?.ok) {
        // The writer registers as such once it holds the lock: the latest such row is the holder.
        const writer = await client
          .query<{ node_id: string; heartbeat_at: Date; url: string | null }>(
            "SELECT node_id, heartbeat_at, url FROM ccweb_nodes WHERE node_id <> $1 AND role = 'writer' ORDER BY heartbeat_at DESC LIMIT 1",
            [this.#options.nodeId],
          )
          .then((r) => (r.rows[0] ? { nodeId: r.rows[0].node_id, url: r.rows[0].url, heartbeatAt: r.rows[0].heartbeat_at.toISOString() } : undefined));
        const holder = writer ? `node ${writer.nodeId}, last heartbeat ${writer.heartbeatAt}` : 'a node that has not registered';
        // A standby says it is there, so every node's overview lists it.
        if (options.standby && this.#options.standby) {
          await this.#register(client, 'standby');
          this.#options.standby.onWriter?.(writer);
        }
        const taken = new WriterTakenError(this.#where, holder, this.#shared);
        // Shared holds do not exclude each other: our own stale session cannot be what refused a shared one.
        taken.heldByThisNode = lock && !this.#shared && (await this.#lockHolderName(client)) === this.#applicationName;
        throw taken;
      }
      await this.#register(client, 'writer');
    } catch (error) {
      await client.end().catch(() => undefined);
      throw error;
    }
    return client;
  }

  get #shared(): boolean {
    return this.#options.lock === 'shared';
  }

  /**
   * Runs `body` while this node holds the cluster's commit lock (a shared writer only): nobody else
   * commits meanwhile, so the database's head read inside `body` is final until it returns, and the
   * batch `body` commits (through `append`) moves the head from exactly there. A database that went
   * away is waited for as a batch would be. The lock is a session's: a node that dies holding it
   * frees it when PostgreSQL ends its session (at once for a process that exits, after the
   * keepalives' 25 s for one that lost power).
   */
  async withCommitLock<T>(body: (client: pg.Client) => Promise<T>): Promise<T> {
    if (!this.#shared) throw new Error('withCommitLock: this writer writes alone (lock: exclusive)');
    const deadline = Date.now() + this.#options.outageMs;
    let client: pg.Client;
    for (let attempt = 0; ; attempt++) {
      if (this.#failure) throw this.#failure;
      if (this.#closed) throw new StoreUnavailableError('store closed');
      try {
        client = await this.#ensureClient();
        await client.query('SELECT pg_advisory_lock($1)', [COMMIT_LOCK.toString()]);
        break;
      } catch (error) {
        if (this.#closed) throw new StoreUnavailableError('store closed');
        // As a batch's failure does: the store stops, and a restart reloads from the database.
        if (!isConnectionFailure(error) || Date.now() >= deadline) {
          this.#fail(
            isConnectionFailure(error)
              ? new StoreUnavailableError(`store unavailable: ${this.#where} did not come back within ${Math.round(this.#options.outageMs / 1000)} s`)
              : error instanceof StoreUnavailableError
                ? error
                : new StoreUnavailableError(`store unavailable: ${this.#where}: ${(error as Error).message}`),
          );
          throw this.#failure;
        }
        const lost = this.#client;
        this.#client = undefined;
        await lost?.end().catch(() => undefined);
        this.reconnects += 1;
        await sleep(reconnectDelayMs(attempt));
      }
    }
    this.commitLocks += 1;
    try {
      return await body(client);
    } finally {
      // A session lost meanwhile took the lock with it; a new session never held it.
      if (this.#client === client) await client.query('SELECT pg_advisory_unlock($1)', [COMMIT_LOCK.toString()]).catch(() => undefined);
    }
  }

  /** How often this node took the commit lock (a shared writer). */
  commitLocks = 0;

  get #applicationName(): string {
    return `ccweb-gitea ${this.#options.nodeId}`;
  }

  /** The application name of the session that holds the writer lock, if the server shows it. */
  async #lockHolderName(client: pg.Client): Promise<string | undefined> {
    const { rows } = await client
      .query<{ name: string }>(
        `SELECT a.application_name AS name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
          WHERE l.locktype = 'advisory' AND l.granted AND l.classid::bigint = $1 AND l.objid::bigint = $2 AND l.objsubid = 1`,
        [Number(WRITER_LOCK >> 32n), Number(WRITER_LOCK & 0xffffffffn)],
      )
      .catch(() => ({ rows: [] as { name: string }[] }));
    return rows[0]?.name;
  }

  async #register(client: pg.Client, role: 'writer' | 'standby'): Promise<void> {
    await client.query(
      `INSERT INTO ccweb_nodes (node_id, role, version, started_at, heartbeat_at, url) VALUES ($1, $2, $3, now(), now(), $4)
       ON CONFLICT (node_id) DO UPDATE SET role = EXCLUDED.role, version = EXCLUDED.version, url = EXCLUDED.url,
         started_at = CASE WHEN ccweb_nodes.role = EXCLUDED.role THEN ccweb_nodes.started_at ELSE now() END, heartbeat_at = now()`,
      [this.#options.nodeId, role, this.#options.version, this.#options.nodeUrl ?? null],
    );
    await this.#readNodes(client);
  }

  async #readNodes(client: pg.Client): Promise<void> {
    // Nodes gone for more than a day are history, not members.
    const { rows } = await client.query<{ node_id: string; role: NodeStatus['role']; version: string; started_at: Date; heartbeat_at: Date; url: string | null }>(
      "SELECT node_id, role, version, started_at, heartbeat_at, url FROM ccweb_nodes WHERE heartbeat_at > now() - interval '1 day' ORDER BY node_id",
    );
    this.nodes = rows.map((r) => ({ nodeId: r.node_id, role: r.role, version: r.version, startedAt: r.started_at.toISOString(), heartbeatAt: r.heartbeat_at.toISOString(), url: r.url }));
    // Called after every heartbeat written (and the registration): a gap of more than two beats
    // (the database was away) starts a new steady run.
    const now = Date.now();
    if (this.ownHeartbeat.lastAt === 0 || now - this.ownHeartbeat.lastAt > 2 * (this.#options.heartbeatMs ?? 10_000)) this.ownHeartbeat.steadySince = now;
    this.ownHeartbeat.lastAt = now;
  }

  /** When (this node's clock, ms) its heartbeat was last written, and since when without a gap of more than two beats. */
  readonly ownHeartbeat = { lastAt: 0, steadySince: 0 };

  #beatDue = false;

  async #beat(): Promise<void> {
    // Only between batches: a batch in flight takes it up when it is done (#flushLoop).
    this.#beatDue = true;
    if (this.#flushing) return;
    await this.#heartbeat();
  }

  async #heartbeat(): Promise<void> {
    this.#beatDue = false;
    // A writer with nothing to commit still notices a lost session (the database restarted) and
    // takes its lock back here, before a standby does: at once, not at the next beat.
    for (let attempt = 0; attempt < 2; attempt++) {
      if (this.#failure || this.#closed) return;
      let client: pg.Client | undefined;
      try {
        client = await this.#ensureClient();
        await client.query('UPDATE ccweb_nodes SET heartbeat_at = now() WHERE node_id = $1', [this.#options.nodeId]);
        await this.#readNodes(client);
        return;
      } catch (error) {
        if (error instanceof WriterTakenError && !error.heldByThisNode) {
          // Another node took the lock while this one's session was gone: it writes now.
          this.#fail(new StoreUnavailableError(`store unavailable: ${error.message}`));
          return;
        }
        // Dropped only if no batch has replaced it meanwhile.
        if (isConnectionFailure(error) && client && this.#client === client) {
          this.#client = undefined;
          await client.end().catch(() => undefined);
        }
        // Our own previous session still holds the lock, or the database is not back: the next beat asks again.
        if (!isConnectionFailure(error) || client === undefined) return;
      }
    }
  }
}

/** The lock is held by this node's own previous session, which the server will end shortly. */
function ownStaleSession(error: unknown): boolean {
  return error instanceof WriterTakenError && error.heldByThisNode;
}

/** One batch, one statement (`ccweb_commit_batch`, schema.ts): atomic; throws when a check fails. */
export async function commitBatch(client: pg.ClientBase, rows: BatchRows, nodeId: string): Promise<void> {
  const { log, absent, cas, upserts, deletes, audit: a } = rows;
  try {
    await client.query('SELECT ccweb_commit_batch($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$18,$19,$20,$21,$22,$23,$24,$25,$26,$27)', [
      rows.firstSeq, rows.lastSeq, nodeId,
      log.seq, log.line,
      absent.collection, absent.key,
      cas.collection, cas.key, cas.field, cas.expected,
      upserts.collection, upserts.key, upserts.body, upserts.version, upserts.archived, upserts.seq,
      deletes.collection, deletes.key,
      a.seq, a.at, a.action, a.level, a.taskId, a.deliveryId, a.actorId, a.event,
    ]);
  } catch (error) {
    const { code, message } = error as { code?: string; message?: string };
    if (code === 'CC001') {
      const [seq, node] = String(message).split('|');
      throw new StoreUnavailableError(
        `store unavailable: the database's log is at seq ${seq} (written by ${node}), not ${rows.firstSeq - 1} as this node's replica: another writer committed; restart this node to reload`,
      );
    }
    if (code === 'CC002') throw new StoreUnavailableError(`store unavailable: ${message}: a key this node inserted already exists in the database (another writer)`);
    if (code === 'CC003') throw new StoreUnavailableError(`store unavailable: ${message}: a version this node compared against is not the database's (another writer)`);
    throw error;
  }
}
