// The store an earlier version kept in PostgreSQL (test/fixtures/earlier-postgres/: every record in
// `ccweb_records`, the audit in `ccweb_audit`, a log every node replayed into a replica) moved into this
// version's tables in the same database, in one transaction (`migrate-store`). Records keep key, body
// and archived flag; their order is that of their last write (the earlier tables kept no insertion
// order; the scheduler orders work by `queueSeq`, not by it). Audit events keep seq, id and time. The
// earlier tables move to the schema `ccweb_before_sql`, kept for the operator to drop once the nodes run.
import { digestOf } from './store-digest.js';
import { COLLECTIONS, StoreError, type AuditEvent, type CollectionName, type StoredRecord } from '../store/types.js';
import { EARLIER_POSTGRES_TABLE, SCHEMA_LOCK, SCHEMA_VERSION, schemaStatements } from '../store/sql/schema.js';
import type { SqlConnection, SqlSession } from '../store/sql/sql-connection.js';

export const EARLIER_SCHEMA = 'ccweb_before_sql';
const EARLIER_TABLES = ['ccweb_log', 'ccweb_head', 'ccweb_records', 'ccweb_audit', 'ccweb_nodes', 'ccweb_cluster', 'ccweb_schema'];
const EARLIER_FUNCTIONS = ['ccweb_commit_batch', 'ccweb_audit_append_only'];

export interface EarlierMove {
  records: Record<string, { hot: number; archived: number }>;
  auditEvents: number;
  /** The digest both the earlier tables and the new ones gave (store-digest.ts). */
  digest: string;
}

/** Whether the database holds an earlier version's PostgreSQL store. */
export async function holdsEarlierPostgresStore(connection: SqlConnection): Promise<boolean> {
  const [row] = await connection.read(`SELECT to_regclass(?)::text AS t`, [EARLIER_POSTGRES_TABLE]);
  return Boolean(row?.['t']);
}

export async function moveEarlierPostgresStore(
  connection: SqlConnection,
  options: { indexes?: Partial<Record<CollectionName, string[]>>; onProgress?: (line: string) => void } = {},
): Promise<EarlierMove> {
  return connection.transaction(async (session) => {
    await session.all('SELECT pg_advisory_xact_lock(?)', [SCHEMA_LOCK.toString()]);
    if (!(await holdsEarlier(session))) throw new StoreError('nothing_to_migrate', 'the database holds no store of an earlier ccweb-gitea');
    const running = await session.all(
      `SELECT node_id FROM ccweb_nodes WHERE role <> 'stopped' AND heartbeat_at > now() - interval '30 seconds' ORDER BY node_id`,
    );
    if (running.length > 0) {
      throw new StoreError('database_migration_blocked', `nodes still write the earlier store: ${running.map((r) => String(r['node_id'])).join(', ')}: stop every node first`);
    }
    const unknown = await session.all(`SELECT DISTINCT collection FROM ccweb_records WHERE NOT (collection = ANY (?::text[]))`, [[...COLLECTIONS]]);
    if (unknown.length > 0) throw new StoreError('migration_unknown_collection', `the earlier store holds collections this version does not know: ${unknown.map((r) => String(r['collection'])).join(', ')}`);
    const expected = await digestOf(earlierTables(session));

    for (const statement of schemaStatements('postgres', options.indexes ?? {})) await session.run(statement);
    const [filled] = await session.all(`SELECT (SELECT count(*) FROM audit) + ${COLLECTIONS.map((c) => `(SELECT count(*) FROM "${c}")`).join(' + ')} AS n`);
    if (Number(filled!['n']) > 0) throw new StoreError('database_not_empty', "the database holds this version's store as well as an earlier one: move one of them elsewhere first");
    await session.run(`INSERT INTO store_meta (name, value) VALUES ('schema', ?) ON CONFLICT (name) DO NOTHING`, [String(SCHEMA_VERSION)]);

    const records: EarlierMove['records'] = {};
    for (const collection of COLLECTIONS) {
      await session.run(
        `INSERT INTO "${collection}" (key, archived, body) SELECT key, CASE WHEN archived THEN 1 ELSE 0 END, body::text::json FROM ccweb_records WHERE collection = ? ORDER BY seq, key`,
        [collection],
      );
      const [counts] = await session.all(`SELECT count(*) FILTER (WHERE archived = 0) AS hot, count(*) FILTER (WHERE archived = 1) AS archived FROM "${collection}"`);
      records[collection] = { hot: Number(counts!['hot']), archived: Number(counts!['archived']) };
      options.onProgress?.(`${collection}: ${records[collection]!.hot} record(s), ${records[collection]!.archived} archived`);
    }
    const auditEvents = await session.run(
      `INSERT INTO audit (seq, task_id, delivery_id, actor_id, level, ts, body) SELECT seq, task_id, delivery_id, actor_id, event->>'level', event->>'timestamp', (event - 'seq')::text::json FROM ccweb_audit ORDER BY seq`,
    );
    await session.all(`SELECT setval(pg_get_serial_sequence('audit', 'seq'), greatest((SELECT max(seq) FROM audit), 1), (SELECT max(seq) FROM audit) IS NOT NULL)`);
    options.onProgress?.(`audit: ${auditEvents} event(s)`);

    const found = await digestOf(newTables(session));
    if (found !== expected) throw new StoreError('migration_mismatch', `the moved store does not read back as the earlier one (digest ${found.slice(0, 12)} ≠ ${expected.slice(0, 12)}); nothing was changed`);

    await session.run(`CREATE SCHEMA ${EARLIER_SCHEMA}`);
    for (const table of EARLIER_TABLES) await session.run(`ALTER TABLE IF EXISTS ${table} SET SCHEMA ${EARLIER_SCHEMA}`);
    for (const fn of EARLIER_FUNCTIONS) {
      if ((await session.all(`SELECT 1 FROM pg_proc WHERE proname = ? AND pronamespace = 'public'::regnamespace`, [fn])).length > 0) await session.run(`ALTER FUNCTION ${fn} SET SCHEMA ${EARLIER_SCHEMA}`);
    }
    return { records, auditEvents, digest: found };
  });
}

async function holdsEarlier(session: SqlSession): Promise<boolean> {
  const [row] = await session.all(`SELECT to_regclass(?)::text AS t`, [EARLIER_POSTGRES_TABLE]);
  return Boolean(row?.['t']);
}

const parse = (text: unknown) => JSON.parse(String(text)) as StoredRecord;

function earlierTables(session: SqlSession) {
  return {
    async *records(collection: CollectionName) {
      for (const row of await session.all(`SELECT body::text AS body, archived FROM ccweb_records WHERE collection = ?`, [collection])) {
        yield { record: parse(row['body']), archived: row['archived'] === true };
      }
    },
    async *audit() {
      for (const row of await session.all(`SELECT event::text AS event FROM ccweb_audit ORDER BY seq`)) yield parse(row['event']) as unknown as AuditEvent;
    },
  };
}

function newTables(session: SqlSession) {
  return {
    async *records(collection: CollectionName) {
      for (const row of await session.all(`SELECT body::text AS body, archived FROM "${collection}"`)) yield { record: parse(row['body']), archived: Number(row['archived']) === 1 };
    },
    async *audit() {
      for (const row of await session.all(`SELECT seq, body::text AS body FROM audit ORDER BY seq`)) yield { ...parse(row['body']), seq: Number(row['seq']) } as unknown as AuditEvent;
    },
  };
}
