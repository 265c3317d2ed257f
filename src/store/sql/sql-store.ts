// The store on a SQL database. One table per collection — `ord` (insertion order, kept across
// updates), `key` (unique), `archived`, `body` (the record's JSON) — with an expression index on
// each field the service looks records up by; one `audit` table whose `seq` the database assigns.
// Reads are queries; a transaction is the database's own.
import { randomUUID } from 'node:crypto';
import {
  COLLECTIONS,
  StoreError,
  StoreUnavailableError,
  UniqueViolationError,
  VersionConflictError,
  type AuditEvent,
  type AuditEventInput,
  type AuditQuery,
  type CollectionName,
  type LeaseGrant,
  type LeaseRow,
  type Store,
  type Tx,
  type PutOptions,
  type RecordType,
  type StoreStats,
  type StoredRecord,
} from '../types.js';
import { auditHorizon, MARK_AND_NOTIFY } from './audit-horizon.js';
import * as leases from './leases.js';
import { beatNode, listNodes, registerNode, stopNode, type NodeIdentity, type NodeRow } from './nodes.js';
import { EARLIER_POSTGRES_TABLE, jsonField, newerSchemaProblem, SCHEMA_LOCK, SCHEMA_VERSION, schemaStatements, type Dialect } from './schema.js';
import type { Row, SqlConnection, SqlSession } from './sql-connection.js';

export interface SqlStoreOptions {
  /** Where the store lives, for messages. */
  dir: string;
  /** Fields looked up by `byIndex`, per collection: each gets an index. */
  indexes?: Partial<Record<CollectionName, string[]>>;
  connect: () => Promise<SqlConnection> | SqlConnection;
  /** Called once the connection is closed (a lock of the data directory is released here). */
  onClose?: () => void;
  /**
   * This process as a node of the database (nodes.ts): registered at open (refused while another live
   * process holds the id), its heartbeat written every `heartbeatMs`, marked stopped at close.
   * `onNodeIdTaken`: a heartbeat found the id taken by another process (this one was gone too long).
   * `onUnreachable`: no heartbeat reached the database for `outageMs` (this node's clock).
   */
  node?: NodeIdentity & { onNodeIdTaken?: () => void; outageMs?: number; onUnreachable?: (error: Error) => void };
}

const COLLECTION_SET: ReadonlySet<string> = new Set(COLLECTIONS);
const FIELD = /^[A-Za-z_][A-Za-z0-9_]*$/;

function table(collection: string): string {
  if (!COLLECTION_SET.has(collection)) throw new TypeError(`unknown collection ${JSON.stringify(collection)}`);
  return `"${collection}"`;
}

/** A record as JSON.parse gives it, frozen all the way down (records handed out are never copies to mutate). */
function parseFrozen<T>(text: unknown): T {
  return deepFreeze(JSON.parse(String(text)) as T);
}

/** Freezing the parsed tree afterwards is several times faster than a reviver. */
function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value as object)) deepFreeze(child);
  }
  return value;
}

/** An audit event from its stored body (without `seq`) and its seq, fields in the order appendAudit gives them. */
export function auditEvent(body: Omit<AuditEvent, 'seq'>, seq: number): AuditEvent {
  const { eventId, timestamp, ...input } = body;
  return Object.freeze({ ...input, eventId, seq, timestamp });
}

function auditFromRow(row: Row): AuditEvent {
  return auditEvent(parseFrozen<Omit<AuditEvent, 'seq'>>(row['body']), Number(row['seq']));
}

function recordText(collection: string, record: unknown): string {
  if (record === null || typeof record !== 'object' || Array.isArray(record)) throw new TypeError(`${collection}: a record must be a plain object`);
  return JSON.stringify(record);
}

/** An audit event whose seq is already decided (an import), as appendAudit stores one. */
async function insertAuditWithSeq(session: SqlSession, event: AuditEvent): Promise<void> {
  const { seq, ...body } = event;
  await session.run('INSERT INTO audit (seq, task_id, delivery_id, actor_id, level, ts, body) VALUES (?, ?, ?, ?, ?, ?, ?)', [
    seq,
    event.taskId ?? null,
    event.deliveryId ?? null,
    event.actorId ?? null,
    event.level ?? null,
    event.timestamp,
    JSON.stringify(body),
  ]);
}

function checkKey(collection: string, key: string): void {
  if (typeof key !== 'string' || key === '') throw new TypeError(`${collection}: key must be a non-empty string`);
}

function checkAudit(input: AuditEventInput): void {
  if (typeof input?.action !== 'string' || input.action === '') throw new TypeError('audit: action is required');
  if (typeof input.actor !== 'string' || input.actor === '') throw new TypeError('audit: actor is required');
}

/** An earlier version's PostgreSQL store in the database: it must be moved before a node opens it. */
export function earlierStoreFound(where: string): StoreError {
  return new StoreError('store_needs_migration', `${where} holds the store of an earlier ccweb-gitea (its ${EARLIER_POSTGRES_TABLE} table), which \`ccweb-gitea migrate-store\` moves into this version's tables`);
}

/** A store a newer ccweb-gitea wrote: on PostgreSQL a refusal of its own (the operator upgrades this node; doctor says the same). */
export function schemaTooNew(dialect: Dialect, where: string, found: number): StoreError {
  return dialect === 'postgres'
    ? new StoreError('database_schema_too_new', `${where}: the database's schema is version ${found}, newer than this ccweb-gitea knows (${SCHEMA_VERSION})`)
    : new StoreError('store_schema_too_new', newerSchemaProblem(`the store in ${where}`, found) ?? '');
}

/** The tables, indexes and triggers of the current schema on PostgreSQL, by name. */
async function existingObjects(session: SqlSession): Promise<Set<string>> {
  const rows = await session.all(
    `SELECT relname AS name FROM pg_class WHERE relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())
     UNION ALL SELECT tgname FROM pg_trigger WHERE NOT tgisinternal AND tgrelid = to_regclass('audit')`,
  );
  return new Set(rows.map((r) => String(r['name'])));
}

/**
 * The schema statements whose object is missing. On PostgreSQL even CREATE … IF NOT EXISTS locks the
 * table it names; on a database other nodes write, a node that starts must not take those locks (they
 * stall every writer, and deadlock with them) for objects that are there already.
 */
function missingOnly(statements: string[], existing: Set<string>): string[] {
  const nameOf = (statement: string) => /^CREATE (?:TABLE|INDEX) IF NOT EXISTS "?(\w+)"?|^CREATE OR REPLACE TRIGGER (\w+)/.exec(statement)?.slice(1).find(Boolean);
  const missing = statements.filter((statement) => {
    const name = nameOf(statement);
    return name === undefined || !existing.has(name);
  });
  // The trigger function is needed only by a trigger still to be made.
  return missing.some((statement) => statement.startsWith('CREATE OR REPLACE TRIGGER')) ? missing : missing.filter((statement) => !statement.startsWith('CREATE OR REPLACE FUNCTION'));
}

/** The channel a transaction that appended audit events notifies on PostgreSQL (followAudit listens to it). */
export const AUDIT_CHANNEL = 'ccweb_audit';

export class SqlStore implements Store {
  readonly dir: string;
  readonly #options: SqlStoreOptions;
  #connection: SqlConnection | undefined;
  #phase: 'new' | 'open' | 'closed' = 'new';
  #dialect: Dialect = 'sqlite';
  /** Transactions that wrote something, and the connection's batches before this store's own began. */
  #commits = 0;
  #batchesBefore = 0;
  /** Names this process's tenure of its node id (nodes.ts). */
  readonly #incarnation = randomUUID();
  #heartbeat: NodeJS.Timeout | undefined;
  /** When a heartbeat last reached the database (or the store opened): monotonic, so a clock step is no outage. */
  #reachedAt = performance.now();

  constructor(options: SqlStoreOptions) {
    this.dir = options.dir;
    this.#options = options;
    for (const [collection, fields] of Object.entries(options.indexes ?? {})) {
      table(collection);
      for (const field of fields ?? []) if (!FIELD.test(field)) throw new TypeError(`${collection}: index field ${JSON.stringify(field)} is not a plain name`);
    }
  }

  async open(): Promise<void> {
    if (this.#phase !== 'new') throw new StoreUnavailableError(`store cannot be opened twice (${this.#phase})`);
    try {
      const connection = await this.#options.connect();
      this.#dialect = connection.dialect;
      this.#connection = connection;
      await this.#migrate(connection);
      if (this.#options.node) await registerNode(connection, this.#options.node, this.#incarnation);
      this.#batchesBefore = connection.batches;
      this.#phase = 'open';
      this.#reachedAt = performance.now();
      this.#startHeartbeat();
    } catch (error) {
      this.#phase = 'closed';
      await this.#connection?.close().catch(() => undefined);
      this.#options.onClose?.();
      // A database server that does not answer at start: a refusal of its own (a supervisor retries).
      if (this.#dialect === 'postgres' && error instanceof StoreUnavailableError) throw new StoreError('database_unreachable', error.message.replace(/^store unavailable: /, 'cannot reach '));
      throw error;
    }
  }

  /** Creates what is missing; refuses a database a newer version wrote, or one an earlier version's PostgreSQL store holds. */
  async #migrate(connection: SqlConnection): Promise<void> {
    const statements = schemaStatements(connection.dialect, this.#options.indexes ?? {});
    await connection.transaction(async (session) => {
      if (connection.dialect === 'postgres') {
        // Two nodes starting at once would both create the tables (CREATE … IF NOT EXISTS is not safe concurrently).
        await session.all('SELECT pg_advisory_xact_lock(?)', [SCHEMA_LOCK.toString()]);
        const [earlier] = await session.all(`SELECT to_regclass(?)::text AS t`, [EARLIER_POSTGRES_TABLE]);
        if (earlier?.['t']) {
          throw earlierStoreFound(this.dir);
        }
      }
      for (const statement of connection.dialect === 'postgres' ? missingOnly(statements, await existingObjects(session)) : statements) await session.run(statement);
      const rows = await session.all(`SELECT value FROM store_meta WHERE name = 'schema'`);
      const found = rows[0] ? Number(rows[0]['value']) : undefined;
      if (found === undefined) await session.run(`INSERT INTO store_meta (name, value) VALUES ('schema', ?)`, [String(SCHEMA_VERSION)]);
      else if (found > SCHEMA_VERSION) throw schemaTooNew(connection.dialect, this.dir, found);
    });
  }

  async close(): Promise<void> {
    if (this.#phase === 'closed') return;
    const wasOpen = this.#phase === 'open';
    this.#phase = 'closed';
    clearInterval(this.#heartbeat);
    this.#heartbeat = undefined;
    if (wasOpen) {
      const node = this.#options.node;
      // Best effort: a node that cannot say it stopped frees its id when its heartbeat gets old.
      if (node) await stopNode(this.#connection!, node.nodeId, this.#incarnation).catch(() => undefined);
      await this.#connection!.close();
    }
    this.#options.onClose?.();
  }

  /**
   * Every `heartbeatMs`: a beat, unless the last one is still waiting (a database that hangs rather
   * than refuses: a partition, a frozen host), and the outage limit judged on this timer, so that a
   * beat that never settles cannot keep the node up past it.
   */
  #startHeartbeat(): void {
    const node = this.#options.node;
    if (!node) return;
    let beating = false;
    let lastError = 'no answer';
    let lastTick = performance.now();
    this.#heartbeat = setInterval(() => {
      if (this.#phase !== 'open') return;
      // Time this process did not run (SIGSTOP, a blocked event loop) says nothing of the database:
      // the outage is counted from when it runs again, and a beat then decides.
      const ran = performance.now() - lastTick;
      lastTick = performance.now();
      if (ran > 2 * node.heartbeatMs) this.#reachedAt += ran - node.heartbeatMs;
      const gone = performance.now() - this.#reachedAt;
      if (node.outageMs !== undefined && gone >= node.outageMs && node.onUnreachable) {
        clearInterval(this.#heartbeat);
        node.onUnreachable(new Error(`the database did not answer for ${Math.round(gone / 1000)} s (${lastError})`));
        return;
      }
      if (beating) return;
      beating = true;
      beatNode(this.#connection!, node.nodeId, this.#incarnation).then(
        (held) => {
          beating = false;
          this.#reachedAt = performance.now();
          if (held) return;
          clearInterval(this.#heartbeat);
          node.onNodeIdTaken?.();
        },
        (error: unknown) => {
          // The database does not answer now: the next beat tries again, until the outage is too long.
          beating = false;
          lastError = error instanceof Error ? error.message : String(error);
        },
      );
    }, node.heartbeatMs);
    this.#heartbeat.unref();
  }

  /** Every node that has opened this store, with its last heartbeat on the database's clock. */
  async nodes(): Promise<NodeRow[]> {
    return listNodes(this.#usable());
  }

  async get<T extends RecordType = StoredRecord>(collection: CollectionName, key: string): Promise<T | undefined> {
    const rows = await this.#read(`SELECT body FROM ${table(collection)} WHERE key = ?`, [key]);
    return rows[0] ? parseFrozen<T>(rows[0]['body']) : undefined;
  }

  async list<T extends RecordType = StoredRecord>(collection: CollectionName, filter?: (r: T) => boolean): Promise<T[]> {
    return listOf((sql, params) => this.#read(sql, params), collection, filter);
  }

  async byIndex<T extends RecordType = StoredRecord>(collection: CollectionName, field: string, value: string | number): Promise<T[]> {
    return byIndexOf((sql, params) => this.#read(sql, params), this.#dialect, collection, field, value);
  }

  async count(collection: CollectionName): Promise<number> {
    const rows = await this.#read(`SELECT count(*) AS n FROM ${table(collection)} WHERE archived = 0`);
    return Number(rows[0]!['n']);
  }

  async archivedCount(collection: CollectionName): Promise<number> {
    const rows = await this.#read(`SELECT count(*) AS n FROM ${table(collection)} WHERE archived = 1`);
    return Number(rows[0]!['n']);
  }

  /** Every record of a collection with its key and whether it is archived, in insertion order. */
  async *entries<T extends RecordType = StoredRecord>(collection: CollectionName): AsyncGenerator<[key: string, record: T, archived: boolean]> {
    let after = 0;
    for (;;) {
      const rows = await this.#read(`SELECT ord, key, archived, body FROM ${table(collection)} WHERE ord > ? ORDER BY ord LIMIT 500`, [after]);
      if (rows.length === 0) return;
      for (const row of rows) yield [String(row['key']), parseFrozen<T>(row['body']), Number(row['archived']) === 1];
      after = Number(rows.at(-1)!['ord']);
    }
  }

  async *scanArchived<T extends RecordType = StoredRecord>(collection: CollectionName): AsyncGenerator<T> {
    let after = 0;
    for (;;) {
      const rows = await this.#read(`SELECT ord, body FROM ${table(collection)} WHERE archived = 1 AND ord > ? ORDER BY ord LIMIT 500`, [after]);
      if (rows.length === 0) return;
      for (const row of rows) yield parseFrozen<T>(row['body']);
      after = Number(rows.at(-1)!['ord']);
    }
  }

  async audit(query: AuditQuery = {}): Promise<AuditEvent[]> {
    const where: string[] = [];
    const params: unknown[] = [];
    const equal = (column: string, value: unknown) => {
      if (value === undefined) return;
      where.push(`${column} = ?`);
      params.push(value);
    };
    equal('task_id', query.taskId);
    equal('delivery_id', query.deliveryId);
    equal('actor_id', query.actorId);
    if (query.afterSeq !== undefined) (where.push('seq > ?'), params.push(query.afterSeq));
    if (query.afterSeq !== undefined && this.#dialect === 'postgres') (where.push('seq <= ?'), params.push(await auditHorizon((sql) => this.#read(sql))));
    if (query.from !== undefined) (where.push('ts >= ?'), params.push(query.from));
    if (query.to !== undefined) (where.push('ts <= ?'), params.push(query.to));
    if (query.level !== undefined) where.push(query.level === 'info' ? `(level IS NULL OR level = 'info')` : `level = '${query.level === 'alert' ? 'alert' : 'security'}'`);
    const limit = query.limit !== undefined && Number.isFinite(query.limit) ? ` LIMIT ${Math.max(0, Math.floor(query.limit))}` : '';
    const rows = await this.#read(`SELECT seq, body FROM audit${where.length > 0 ? ` WHERE ${where.join(' AND ')}` : ''} ORDER BY seq${limit}`, params);
    return rows.map(auditFromRow);
  }

  /** The highest audit seq committed so far (0 for none): where a follower of the audit starts. */
  async lastAuditSeq(): Promise<number> {
    const horizon = this.#dialect === 'postgres' ? await auditHorizon((sql) => this.#read(sql)) : Infinity;
    const rows = await this.#read('SELECT max(seq) AS seq FROM audit');
    return Math.min(Number(rows[0]?.['seq'] ?? 0), horizon);
  }

  listen(channel: string, listener: (payload: string) => void): Promise<() => void> {
    return this.#usable().listen(channel, listener);
  }

  async clockMs(): Promise<number> {
    const [row] = await this.#read(`SELECT ${leases.databaseNowMs(this.#dialect)} AS now`);
    return Number(row!['now']);
  }

  async heldLeases(): Promise<{ leases: LeaseRow[]; now: number }> {
    return leases.heldLeases((sql, params) => this.#read(sql, params), this.#dialect);
  }

  async transact<R>(fn: (tx: Tx) => Promise<R> | R): Promise<R> {
    const connection = this.#usable();
    let wrote = false;
    const result = await connection.transaction(async (session) => {
      const tx = new SqlTx(session, this.#dialect);
      try {
        return await fn(tx);
      } finally {
        tx.finish();
        wrote = tx.wrote;
      }
    });
    if (wrote) this.#commits += 1;
    return result;
  }

  async sync(): Promise<void> {
    await this.#usable().sync();
  }

  /** Everything committed so far in the database file itself (SQLite: the WAL folded in and emptied). */
  async checkpoint(): Promise<void> {
    await this.#usable().checkpoint?.();
  }

  /**
   * Writes records and audit events exactly as given — keys, archived flags, audit seqs, ids and times —
   * in one transaction: how `migrate-store` fills an empty store from an earlier engine's data.
   */
  async importRows(rows: ReadonlyArray<{ collection: CollectionName; key: string; record: StoredRecord; archived: boolean }>, events: readonly AuditEvent[]): Promise<void> {
    await this.#usable().transaction(async (session) => {
      for (const row of rows) {
        checkKey(row.collection, row.key);
        await session.run(`INSERT INTO ${table(row.collection)} (key, archived, body) VALUES (?, ?, ?)`, [row.key, row.archived ? 1 : 0, recordText(row.collection, row.record)]);
      }
      for (const event of events) {
        await insertAuditWithSeq(session, event);
      }
      // An explicit seq does not move PostgreSQL's sequence: the next event must follow the imported ones.
      if (this.#dialect === 'postgres' && events.length > 0) await session.all(`SELECT setval(pg_get_serial_sequence('audit', 'seq'), (SELECT max(seq) FROM audit))`);
    });
  }

  stats(): StoreStats {
    return { commits: this.#commits, batches: (this.#connection?.batches ?? 0) - this.#batchesBefore };
  }

  #usable(): SqlConnection {
    if (this.#phase === 'closed') throw new StoreUnavailableError('store closed');
    if (this.#phase !== 'open') throw new StoreUnavailableError('store not open');
    return this.#connection!;
  }

  #read(sql: string, params: readonly unknown[] = []): Promise<Row[]> {
    return this.#usable().read(sql, params);
  }
}

type Query = (sql: string, params?: readonly unknown[]) => Promise<Row[]>;

async function listOf<T>(query: Query, collection: CollectionName, filter?: (r: T) => boolean): Promise<T[]> {
  const rows = await query(`SELECT body FROM ${table(collection)} WHERE archived = 0 ORDER BY ord`);
  const records = rows.map((row) => parseFrozen<T>(row['body']));
  return filter ? records.filter(filter) : records;
}

async function byIndexOf<T>(query: Query, dialect: Dialect, collection: CollectionName, field: string, value: string | number): Promise<T[]> {
  if (!FIELD.test(field)) throw new TypeError(`${collection}: ${JSON.stringify(field)} is not a field name`);
  // Compared as JSON text, the form the expression index holds: a string matches a string only.
  const rows = await query(`SELECT body FROM ${table(collection)} WHERE archived = 0 AND ${jsonField(dialect, field)} = ? ORDER BY ord`, [JSON.stringify(value)]);
  return rows.map((row) => parseFrozen<T>(row['body']));
}

const seenKey = (collection: CollectionName, key: string) => `${collection}\u0000${key}`;

class SqlTx implements Tx {
  readonly #session: SqlSession;
  readonly #dialect: Dialect;
  #finished = false;
  /** Whether anything was written (a transaction that only read is no commit). */
  wrote = false;
  #auditAnnounced = false;
  /**
   * Records this transaction found or wrote, by collection and key. A row found is locked (FOR UPDATE on
   * PostgreSQL; SQLite has one writer) until the transaction ends, so reading it again would give what this
   * transaction last saw or wrote. An absent key is not kept: another transaction may insert it meanwhile.
   */
  readonly #seen = new Map<string, StoredRecord>();

  constructor(session: SqlSession, dialect: Dialect) {
    this.#session = session;
    this.#dialect = dialect;
  }

  finish(): void {
    this.#finished = true;
  }

  async get<T extends RecordType = StoredRecord>(collection: CollectionName, key: string): Promise<T | undefined> {
    this.#assertOpen();
    const seen = this.#seen.get(seenKey(collection, key));
    if (seen !== undefined) return seen as T;
    const rows = await this.#session.all(`SELECT body FROM ${table(collection)} WHERE key = ?${this.#forUpdate()}`, [key]);
    return rows[0] ? this.#saw(collection, key, parseFrozen<T>(rows[0]['body'])) : undefined;
  }

  #saw<T extends RecordType>(collection: CollectionName, key: string, record: T): T {
    this.#seen.set(seenKey(collection, key), record as StoredRecord);
    return record;
  }

  async has(collection: CollectionName, key: string): Promise<boolean> {
    this.#assertOpen();
    const rows = await this.#session.all(`SELECT 1 AS found FROM ${table(collection)} WHERE key = ?`, [key]);
    return rows.length > 0;
  }

  async list<T extends RecordType = StoredRecord>(collection: CollectionName, filter?: (r: T) => boolean): Promise<T[]> {
    this.#assertOpen();
    return listOf((sql, params) => this.#session.all(sql, params), collection, filter);
  }

  async byIndex<T extends RecordType = StoredRecord>(collection: CollectionName, field: string, value: string | number): Promise<T[]> {
    this.#assertOpen();
    return byIndexOf((sql, params) => this.#session.all(sql, params), this.#dialect, collection, field, value);
  }

  async insert<T extends RecordType = StoredRecord>(collection: CollectionName, key: string, record: T, options: { archived?: boolean } = {}): Promise<T> {
    const stored = await this.#insertNew(collection, key, record, options.archived === true);
    if (stored === undefined) throw new UniqueViolationError(collection, key);
    return stored;
  }

  async insertIfAbsent<T extends RecordType = StoredRecord>(collection: CollectionName, key: string, record: T, options: { archived?: boolean } = {}): Promise<boolean> {
    return (await this.#insertNew(collection, key, record, options.archived === true)) !== undefined;
  }

  /** The stored record, or undefined when the key exists (nothing written). */
  async #insertNew<T extends RecordType>(collection: CollectionName, key: string, record: T, archived: boolean): Promise<T | undefined> {
    this.#assertWrite();
    checkKey(collection, key);
    const text = recordText(collection, record);
    const changed = await this.#session.run(`INSERT INTO ${table(collection)} (key, archived, body) VALUES (?, ${archived ? 1 : 0}, ?) ON CONFLICT (key) DO NOTHING`, [key, text]);
    return changed === 0 ? undefined : this.#saw(collection, key, parseFrozen<T>(text));
  }

  async put<T extends RecordType = StoredRecord>(collection: CollectionName, key: string, record: T, options: PutOptions = {}): Promise<T> {
    this.#assertWrite();
    checkKey(collection, key);
    let stored: T = record;
    if (options.expectVersion !== undefined) {
      const field = options.versionField ?? 'version';
      const current = await this.get<StoredRecord>(collection, key);
      const actual = current?.[field];
      // An absent record never matches: creation goes through insert.
      if (typeof actual !== 'number' || actual !== options.expectVersion) {
        throw new VersionConflictError(collection, key, options.expectVersion, typeof actual === 'number' ? actual : undefined);
      }
      stored = { ...record, [field]: options.expectVersion + 1 };
    }
    const text = recordText(collection, stored);
    // Writing an archived key brings it back.
    await this.#session.run(
      `INSERT INTO ${table(collection)} (key, archived, body) VALUES (?, 0, ?) ON CONFLICT (key) DO UPDATE SET body = excluded.body, archived = 0`,
      [key, text],
    );
    return this.#saw(collection, key, parseFrozen<T>(text));
  }

  async delete(collection: CollectionName, key: string): Promise<void> {
    this.#assertWrite();
    this.#seen.delete(seenKey(collection, key));
    await this.#session.run(`DELETE FROM ${table(collection)} WHERE key = ?`, [key]);
  }

  async archive(collection: CollectionName, key: string): Promise<void> {
    this.#assertWrite();
    await this.#session.run(`UPDATE ${table(collection)} SET archived = 1 WHERE key = ? AND archived = 0`, [key]);
  }

  /**
   * On PostgreSQL, every node following the audit (AUDIT_CHANNEL) hears of this transaction's events once it
   * commits, and no reader pages past them before (audit-horizon.ts).
   */
  async #announceAudit(): Promise<void> {
    if (this.#dialect !== 'postgres' || this.#auditAnnounced) return;
    this.#auditAnnounced = true;
    await this.#session.all(MARK_AND_NOTIFY, [AUDIT_CHANNEL]);
  }

  async appendAudit(input: AuditEventInput): Promise<AuditEvent> {
    this.#assertWrite();
    checkAudit(input);
    await this.#announceAudit();
    const event = { ...input, eventId: `audit-${randomUUID()}`, timestamp: new Date().toISOString() };
    const text = JSON.stringify(event);
    const rows = await this.#session.all(
      'INSERT INTO audit (task_id, delivery_id, actor_id, level, ts, body) VALUES (?, ?, ?, ?, ?, ?) RETURNING seq',
      [input.taskId ?? null, input.deliveryId ?? null, input.actorId ?? null, input.level ?? null, event.timestamp, text],
    );
    // What a read gives back: a frozen copy of the text stored, never the caller's objects.
    return auditEvent(parseFrozen<Omit<AuditEvent, 'seq'>>(text), Number(rows[0]!['seq']));
  }

  async grantLease(repoKey: string, request: { holder: string; taskId: string | null; ttlMs: number }): Promise<LeaseGrant> {
    this.#assertWrite();
    return leases.grantLease(this.#session, this.#dialect, repoKey, request);
  }

  async renewLease(repoKey: string, epoch: number, ttlMs: number): Promise<{ expiresAt: number; now: number } | null> {
    this.#assertWrite();
    return leases.renewLease(this.#session, this.#dialect, repoKey, epoch, ttlMs);
  }

  async endLease(repoKey: string, epoch: number, how: 'release' | 'expire'): Promise<{ endedAt: number } | null> {
    this.#assertWrite();
    return leases.endLease(this.#session, this.#dialect, repoKey, epoch, how);
  }

  async lockFreeLeases(repoKeys: readonly string[]): Promise<Set<string>> {
    this.#assertWrite();
    return leases.lockFreeLeases(this.#session, this.#dialect, repoKeys);
  }

  async lock<T extends RecordType = StoredRecord>(collection: CollectionName, keys: readonly string[], mode: 'skip' | 'share'): Promise<Map<string, T>> {
    this.#assertOpen();
    const found = new Map<string, T>();
    if (keys.length === 0) return found;
    // Key order: a `share` lock waits, and transactions that wait for rows in one order never deadlock.
    const clause = this.#dialect !== 'postgres' ? '' : mode === 'skip' ? ' FOR UPDATE SKIP LOCKED' : ' FOR SHARE';
    const rows = await this.#session.all(`SELECT key, body FROM ${table(collection)} WHERE archived = 0 AND key IN (${keys.map(() => '?').join(', ')}) ORDER BY key${clause}`, [...keys]);
    for (const row of rows) found.set(String(row['key']), parseFrozen<T>(row['body']));
    return found;
  }

  async notify(channel: string, payload: string): Promise<void> {
    this.#assertOpen();
    await this.#session.notify(channel, payload);
  }

  async fenceLease(repoKey: string, epoch: number): Promise<void> {
    this.#assertOpen();
    return leases.fenceLease(this.#session, this.#dialect, repoKey, epoch);
  }

  #forUpdate(): string {
    return this.#dialect === 'postgres' ? ' FOR UPDATE' : '';
  }

  #assertOpen(): void {
    if (this.#finished) throw new StoreUnavailableError('transaction already finished');
  }

  #assertWrite(): void {
    this.#assertOpen();
    this.wrote = true;
  }
}
