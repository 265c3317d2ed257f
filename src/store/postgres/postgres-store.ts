// The store on PostgreSQL, behind the store's contract (src/store/types.ts): reads answer from
// memory and a transaction's body runs against it, so nothing in the service knows which engine it
// runs on. Memory here is a replica of the database: a
// DurableStore in the node's data directory (its journal unsynced: the database, not the disk, is
// what makes a commit durable) whose every commit goes to PostgreSQL first (log-writer.ts) and is
// acknowledged only once PostgreSQL has committed it.
//
// Opening: the schema is migrated (or refused as too new), the replica brought to the database's
// head by replaying the log lines it has not seen, the writer lock taken (a standby applies the
// writer's new lines while it waits for it), and the replica brought to the head once more; a
// replica of another database's history, or one ahead of the database (it cannot be: commits reach
// the replica's journal only after the database), is discarded and rebuilt from the log.
import { readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import pg from 'pg';
import { DurableStore, type CommitReplicator, type DurableStoreStats, type StoreOptions } from '../durable-store.js';
import { StoreUnavailableError, type AuditEvent, type AuditQuery, type CollectionName, type RecordType, type Store, type StoredRecord, type Tx } from '../types.js';
import { databaseClient, reconnectDelayMs, unreachable } from './client.js';
import { describeDatabase } from './database-url.js';
import { JournalCorruptionError } from '../journal-files.mjs';
import { isConnectionFailure, LogWriter, type LogWriterOptions, type NodeStatus } from './log-writer.js';
import { migrate, MIGRATIONS } from './schema.js';

export interface PostgresStoreOptions extends Pick<StoreOptions, 'dir' | 'indexes' | 'segmentBytes' | 'compactRatio' | 'onCompactionError' | 'beforeJournalWrite'> {
  /** `postgres://…`; never logged (describeDatabase). */
  url: string;
  nodeId: string;
  /** This node's version, shown with its heartbeat. */
  version: string;
  /** Where the other nodes reach this one (listed with its heartbeat; standbys forward requests to the writer's). */
  nodeUrl?: string;
  /** How long a database that went away is waited for before the store stops. Default 120 s. */
  outageMs?: number;
  /** Test hook (log-writer.ts). */
  beforeBatch?: LogWriterOptions['beforeBatch'];
  /** Wait as a standby while another node writes, instead of refusing (log-writer.ts). */
  standby?: LogWriterOptions['standby'];
  /** Called once when the store stops for good (the database refused or stayed away too long, or the replica broke). */
  onUnavailable?: LogWriterOptions['onFailure'];
  /** How often the node's heartbeat is written (and the list of nodes read). Default 10 s. */
  heartbeatMs?: number;
  /**
   * How often a standby applies the writer's new log lines to its replica while it waits. Default
   * 1 s; 0: never (it replays them all at its takeover, the benchmark's baseline).
   */
  tailMs?: number;
  /**
   * `one` (default): the node that holds the writer lock writes; the others wait as standbys.
   * `many`: every node writes. A transaction's body then runs once this node holds the cluster's
   * commit lock and its replica is at the database's head (later than the call, in call order), so
   * it sees every node's commits; between transactions a node reads its replica, which follows the
   * other nodes' commits every `tailMs`. Nodes of the two kinds never write one database together.
   */
  writers?: 'one' | 'many';
}

interface Deferred {
  fn: (tx: Tx) => unknown;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

interface StandbyTail {
  stop(): Promise<void>;
}

export interface PostgresStoreStats extends DurableStoreStats {
  engine: 'postgres';
  databaseBatches: number;
  databaseReconnects: number;
  /** Log lines replayed into the replica at open (after a standby's wait: what it had not tailed). */
  replayedAtOpen: number;
  /** Log lines a standby applied to its replica while it waited for the writer lock. */
  tailedWhileWaiting: number;
  /** `writers: 'many'`: the other nodes' log lines applied since open, and batches committed under the commit lock. */
  appliedFromOtherNodes: number;
  commitLocks: number;
}

const MARKER = 'replica-of.json';

async function headSeqOf(client: pg.Client): Promise<number> {
  const { rows } = await client.query<{ seq: string }>('SELECT seq FROM ccweb_head WHERE id = 1');
  return Number(rows[0]!.seq);
}
const REPLAY_PAGE = 2000;

export class PostgresStore implements Store {
  readonly dir: string;
  readonly #options: PostgresStoreOptions;
  readonly #writer: LogWriter;
  #replica: DurableStore;
  #replayed = 0;
  /** Log lines applied to the replica while this node waited as a standby. */
  #tailed = 0;
  /** Told the audit events of other nodes' commits once they are applied here (onOthersCommitted). */
  readonly #othersCommitted = new Set<(events: AuditEvent[]) => void>();
  /** Why the replica was rebuilt from the database at open, if it was. */
  rebuiltBecause: string | undefined;
  #forwardKey: string | undefined;
  /** `writers: 'many'`: transactions waiting for the commit lock, and the loop that commits them. */
  #deferred: Deferred[] = [];
  #batching: Promise<void> | undefined;
  #lastDeferred: Promise<unknown> = Promise.resolve();
  #fromOthers = 0;
  #follower: StandbyTail | undefined;
  #closing = false;
  /** Set when this node's replica can no longer be trusted (a catch-up under the lock failed). */
  #broken: StoreUnavailableError | undefined;
  /** One at a time: applying the log's lines to the replica, and running a batch's bodies on it. */
  #replicaTurn: Promise<void> = Promise.resolve();

  constructor(options: PostgresStoreOptions) {
    this.dir = options.dir;
    // Two paths stop the store for good (the writer's failure, a broken replica): told once.
    let told = false;
    const onUnavailable = options.onUnavailable;
    options = {
      ...options,
      onUnavailable: onUnavailable
        ? (error) => {
            if (told) return;
            told = true;
            onUnavailable(error);
          }
        : undefined,
    };
    this.#options = options;
    this.#writer = new LogWriter({
      url: options.url,
      nodeId: options.nodeId,
      version: options.version,
      ...(options.nodeUrl !== undefined ? { nodeUrl: options.nodeUrl } : {}),
      outageMs: options.outageMs ?? 120_000,
      beforeBatch: options.beforeBatch,
      standby: options.standby,
      onFailure: options.onUnavailable,
      ...(options.heartbeatMs !== undefined ? { heartbeatMs: options.heartbeatMs } : {}),
      lock: options.writers === 'many' ? 'shared' : 'exclusive',
    });
    this.#replica = this.#newReplica();
  }

  #newReplica(): DurableStore {
    const writer = this.#writer;
    const replicator: CommitReplicator = {
      append: (seq, ops, line, expectations) => writer.append({ seq, ops, line, expectations }),
      get failure() {
        return writer.failure;
      },
    };
    const { dir, indexes, segmentBytes, compactRatio, onCompactionError, beforeJournalWrite } = this.#options;
    return new DurableStore({ dir, indexes, segmentBytes, compactRatio, onCompactionError, beforeJournalWrite, fsync: false, replicator });
  }

  async open(): Promise<void> {
    const where = describeDatabase(this.#options.url);
    let setup = await this.#reach(where);
    let tail: StandbyTail | undefined;
    try {
      await migrate(setup, MIGRATIONS, this.#options.nodeId);
      this.#forwardKey = (await setup.query<{ forward_key: string }>('SELECT forward_key FROM ccweb_cluster WHERE id = 1')).rows[0]?.forward_key;
      // The replica is brought to the database's head before the writer lock is asked for, and a
      // standby keeps it there while it waits (#tail): its takeover then replays only
      // what the writer committed since the last poll, not everything since this node started.
      await this.#prepareReplica(setup, 'open it');
      // A standby may wait here for hours: its first connection is not trusted to be alive after.
      await setup.end().catch(() => undefined);
      if (this.#options.standby && this.#options.tailMs !== 0) tail = this.#tail((n) => (this.#tailed += n));
      await this.#writer.open();
      await tail?.stop();
      tail = undefined;
      setup = await this.#reach(where);
      // Now that this node writes, nobody else does (with many writers, the next batch catches up again).
      await this.#prepareReplica(setup, 'it is open');
      if (this.#many && this.#options.tailMs !== 0) this.#follower = this.#tail((n) => (this.#fromOthers += n));
    } catch (error) {
      await tail?.stop();
      await this.#replica.close().catch(() => undefined);
      await this.#writer.close();
      // The database went away while this node opened (after #reach found it): an outage, not a
      // file-system error (an errno such as ECONNREFUSED would otherwise read like one).
      throw isConnectionFailure(error) ? unreachable(where, error) : error;
    } finally {
      await setup.end().catch(() => undefined);
    }
  }

  /**
   * Brings the replica to the database's head, opening it first (`open it`: before the writer lock)
   * or checking it again (`it is open`: once this node writes). A replica of another database's
   * history, one that cannot be read (a torn or corrupt file) or one ahead of the database is
   * rebuilt from the log, never trusted: it is a cache of the database.
   */
  async #prepareReplica(client: pg.Client, replica: 'open it' | 'it is open'): Promise<void> {
    const { rows } = await client.query<{ history_id: string; seq: string }>('SELECT history_id, seq FROM ccweb_head WHERE id = 1');
    const head = { historyId: rows[0]!.history_id, seq: Number(rows[0]!.seq) };
    const marker = await readFile(join(this.dir, MARKER), 'utf8').then((t) => (JSON.parse(t) as { historyId?: string }).historyId, () => undefined);
    let rebuild: string | undefined;
    if (replica === 'it is open') {
      if (marker !== head.historyId) rebuild = `the database's history changed while this node waited (${marker} → ${head.historyId})`;
      else if (this.#replica.lastSeq > head.seq) rebuild = `the replica is at seq ${this.#replica.lastSeq}, ahead of the database (${head.seq})`;
    } else {
      if (marker !== head.historyId) await this.#discardReplica(marker);
      rebuild = await this.#replica.open().then(
        () => (this.#replica.lastSeq > head.seq ? `the replica is at seq ${this.#replica.lastSeq}, ahead of the database (${head.seq})` : undefined),
        (error: unknown) => {
          if (error instanceof JournalCorruptionError || /unknown format/.test(String((error as Error)?.message))) return `the replica could not be read (${(error as Error).message})`;
          throw error;
        },
      );
    }
    if (rebuild !== undefined) {
      this.rebuiltBecause = rebuild;
      await this.#replica.close();
      await this.#discardReplica(marker ?? head.historyId);
      this.#replica = this.#newReplica();
      await this.#replica.open();
    }
    await writeFile(join(this.dir, MARKER), JSON.stringify({ historyId: head.historyId, database: describeDatabase(this.#options.url) }) + '\n');
    this.#replayed += await this.#catchUp(client, head.seq);
  }

  get #many(): boolean {
    return this.#options.writers === 'many';
  }

  /**
   * While this node waits for the writer lock, or (many writers) for as long as it runs: every
   * `tailMs` the log lines committed since the replica's last seq are applied to it. A database
   * that went away is asked again at the next poll (the lock wait, or the next commit, decides when
   * an outage has lasted too long).
   */
  #tail(count: (applied: number) => void): StandbyTail {
    let stopped = false;
    let client: pg.Client | undefined;
    let wake: (() => void) | undefined;
    const every = this.#options.tailMs ?? 1000;
    const loop = (async () => {
      while (!stopped) {
        try {
          if (!client) {
            // Never a query that hangs on a half-open connection: the takeover waits for this loop.
            client = databaseClient(this.#options.url, {
              application_name: `ccweb-gitea ${this.#options.nodeId} (standby)`,
              keepAlive: true,
              keepAliveInitialDelayMillis: 10_000,
              connectionTimeoutMillis: 10_000,
              query_timeout: 30_000,
            });
            await client.connect();
          }
          const tailClient = client;
          // A replica ahead of the head (the database was restored from a backup) is left for the
          // takeover to rebuild; tailing stops making sense until then.
          count(
            await this.#replicaExclusive(async () => {
              const headSeq = await headSeqOf(tailClient);
              return headSeq > this.#replica.lastSeq ? this.#catchUp(tailClient, headSeq, () => stopped) : 0;
            }),
          );
        } catch {
          await client?.end().catch(() => undefined);
          client = undefined;
        }
        if (stopped) break;
        await new Promise<void>((resolve) => {
          wake = resolve;
          setTimeout(resolve, every).unref();
        });
      }
      await client?.end().catch(() => undefined);
    })();
    return {
      stop: async () => {
        stopped = true;
        wake?.();
        // Ends a query in flight, too: this node writes now and waits for nothing it would bring.
        await client?.end().catch(() => undefined);
        await loop;
      },
    };
  }

  /**
   * A database that is not reachable yet (it starts with the node, or is restarting) is waited for
   * as long as an outage would be; a refusal that waiting cannot mend (bad password, no such
   * database) ends the wait at once.
   */
  async #reach(where: string): Promise<pg.Client> {
    const deadline = Date.now() + (this.#options.outageMs ?? 120_000);
    for (let attempt = 0; ; attempt++) {
      const client = databaseClient(this.#options.url);
      try {
        await client.connect();
        return client;
      } catch (error) {
        await client.end().catch(() => undefined);
        const aborted = this.#options.standby?.signal?.aborted === true;
        if (!isConnectionFailure(error) || Date.now() >= deadline || aborted) {
          throw unreachable(where, error);
        }
        await new Promise((resolve) => setTimeout(resolve, reconnectDelayMs(attempt)));
      }
    }
  }

  /** Only a replica (it has our marker) or an empty directory is ever removed: never an embedded store's. */
  async #discardReplica(marker: string | undefined): Promise<void> {
    const entries = await readdir(this.dir).catch(() => [] as string[]);
    if (marker === undefined && entries.length > 0) {
      throw new Error(`${this.dir} is not empty and is no replica of a database (no ${MARKER}): move it away, or give the store another directory`);
    }
    await rm(this.dir, { recursive: true, force: true });
  }

  /** Replays the log lines after the replica's seq up to `headSeq`; how many it applied. */
  async #catchUp(client: pg.Client, headSeq: number, stop: () => boolean = () => false): Promise<number> {
    let pending: Promise<void> = Promise.resolve();
    let applied = 0;
    const auditBefore = this.#replica.lastAuditSeq;
    try {
      while (this.#replica.lastSeq < headSeq && !stop()) {
        const { rows } = await client.query<{ seq: string; line: string }>('SELECT seq, line FROM ccweb_log WHERE seq > $1 AND seq <= $2 ORDER BY seq LIMIT $3', [
          this.#replica.lastSeq,
          headSeq,
          REPLAY_PAGE,
        ]);
        if (rows.length === 0) throw new Error(`the database's log has no line after seq ${this.#replica.lastSeq} although its head is ${headSeq}`);
        for (const row of rows) {
          pending = this.#replica.applyReplicated(Number(row.seq), row.line);
          applied += 1;
        }
      }
      await pending;
    } finally {
      // What was applied is told even when a later page failed (the next catch-up starts after it).
      this.#tellOthersCommitted(auditBefore);
    }
    return applied;
  }

  /** Only other nodes' lines are applied here (this node's own commits reach the replica through transact). */
  #tellOthersCommitted(auditBefore: number): void {
    if (this.#othersCommitted.size === 0 || this.#replica.lastAuditSeq <= auditBefore) return;
    const events = this.#replica.auditNow({ afterSeq: auditBefore });
    const listeners = [...this.#othersCommitted];
    // Not while this node may hold the cluster's commit lock (a catch-up before its own batch).
    setImmediate(() => {
      for (const listener of listeners) {
        try {
          listener(events);
        } catch {
          // A listener's failure must not stop the replica following the log.
        }
      }
    });
  }

  /**
   * Listens to the audit events of the commits other nodes made, as this node applies them (its
   * follower, and the catch-up before each batch of its own): each node's live view of the cluster.
   * Returns an unsubscribe function.
   */
  onOthersCommitted(listener: (events: AuditEvent[]) => void): () => void {
    this.#othersCommitted.add(listener);
    return () => this.#othersCommitted.delete(listener);
  }

  async close(): Promise<void> {
    // Transactions already asked for are committed; new ones are refused.
    this.#closing = true;
    await this.#batching;
    await this.#follower?.stop();
    // The replica first: it waits for the commits in flight, which need the writer.
    await this.#replica.close();
    await this.#writer.close();
  }

  async get<T extends RecordType = StoredRecord>(collection: CollectionName, key: string): Promise<T | undefined> {
    return this.#replica.get<T>(collection, key);
  }

  async list<T extends RecordType = StoredRecord>(collection: CollectionName, filter?: (r: T) => boolean): Promise<T[]> {
    return this.#replica.list<T>(collection, filter);
  }

  async byIndex<T extends RecordType = StoredRecord>(collection: CollectionName, field: string, value: string | number): Promise<T[]> {
    return this.#replica.byIndex<T>(collection, field, value);
  }

  async count(collection: CollectionName): Promise<number> {
    return this.#replica.count(collection);
  }

  async archivedCount(collection: CollectionName): Promise<number> {
    return this.#replica.archivedCount(collection);
  }

  scanArchived<T extends RecordType = StoredRecord>(collection: CollectionName): AsyncIterable<T> {
    return this.#replica.scanArchived<T>(collection);
  }

  async audit(query?: AuditQuery): Promise<AuditEvent[]> {
    return this.#replica.audit(query);
  }

  transact<R>(fn: (tx: Tx) => R | Promise<R>): Promise<R> {
    if (!this.#many) return this.#replica.transact(fn);
    const refused = this.#closing ? new StoreUnavailableError('store closed') : (this.#broken ?? this.#writer.failure);
    if (refused) return Promise.reject(refused);
    const done = new Promise<R>((resolve, reject) => this.#deferred.push({ fn, resolve: resolve as (value: unknown) => void, reject }));
    this.#lastDeferred = done.catch(() => undefined);
    this.#batching ??= this.#commitDeferred();
    return done;
  }

  /**
   * Many writers: the transactions asked for meanwhile are run and committed together, under the
   * commit lock, until none is left. `#batching` is cleared in the same turn that finds the queue
   * empty, so a transaction asked for after that starts the loop again.
   */
  async #commitDeferred(): Promise<void> {
    await new Promise<void>((resolve) => setImmediate(resolve));
    for (;;) {
      const batch = this.#deferred.splice(0);
      if (batch.length === 0) {
        this.#batching = undefined;
        return;
      }
      await this.#commitUnderLock(batch);
    }
  }

  async #commitUnderLock(batch: Deferred[]): Promise<void> {
    try {
      await this.#replicaExclusive(() =>
        this.#writer.withCommitLock(async (client) => {
          try {
            this.#fromOthers += await this.#catchUp(client, await headSeqOf(client));
          } catch (error) {
            // Part of the head may be applied: nothing this replica does from here can be trusted,
            // and a node that stays up with it would keep owning repositories it can no longer run.
            if (!this.#broken) {
              this.#broken = new StoreUnavailableError(`store unavailable: the replica could not follow the database (${(error as Error).message}); restart this node to reload`);
              this.#options.onUnavailable?.(this.#broken);
            }
            throw this.#broken;
          }
          // Every body runs now, in call order, against the database's head: it sees every node's
          // commits and the bodies before it, and its seqs (log and audit) follow the head's.
          const committed = await Promise.allSettled(batch.map((d) => this.#replica.transact(d.fn)));
          committed.forEach((outcome, i) => (outcome.status === 'fulfilled' ? batch[i]!.resolve(outcome.value) : batch[i]!.reject(outcome.reason)));
        }),
      );
    } catch (error) {
      // The lock or the head could not be had: none of the bodies ran (a settled one ignores this).
      for (const d of batch) d.reject(error);
    }
  }

  /** Runs `body` when no other catch-up or batch uses the replica. */
  #replicaExclusive<T>(body: () => Promise<T>): Promise<T> {
    const run = this.#replicaTurn.then(body);
    this.#replicaTurn = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }

  sync(): Promise<void> {
    // Many writers: the transactions asked for so far are committed first.
    return this.#many ? this.#lastDeferred.then(() => this.#replica.sync()) : this.#replica.sync();
  }

  stats(): PostgresStoreStats {
    return { ...this.#replica.stats(), engine: 'postgres', databaseBatches: this.#writer.batches, databaseReconnects: this.#writer.reconnects, replayedAtOpen: this.#replayed, tailedWhileWaiting: this.#tailed, appliedFromOtherNodes: this.#fromOthers, commitLocks: this.#writer.commitLocks };
  }

  /**
   * The cluster's key for forwarded requests (src/http/forwarded-client.ts): known once the schema is
   * migrated, which is before a standby starts to wait.
   */
  get forwardKey(): string | undefined {
    return this.#forwardKey;
  }

  /** When this node last wrote its heartbeat, and since when it has done so without a gap (log-writer.ts). */
  ownHeartbeat(): { lastAt: number; steadySince: number } {
    return { ...this.#writer.ownHeartbeat };
  }

  /** Every node on this database (writer, standbys, recently stopped), as of the last heartbeat. */
  nodes(): NodeStatus[] {
    return this.#writer.nodes;
  }

  /** The replica's compaction (its journal and cold tier are local files like the embedded store's). */
  compact(): Promise<void> {
    return this.#replica.compact();
  }

  compactionIdle(): Promise<void> {
    return this.#replica.compactionIdle();
  }

  get lastCompactionError(): unknown {
    return this.#replica.lastCompactionError;
  }
}
