// The PostgreSQL store's schema and its migrations. The version a database holds is in
// `ccweb_schema`; a node applies the migrations it knows in order, under an advisory lock so two
// nodes starting at once do not both migrate, and refuses a database whose schema is newer than it
// knows (an older node must not write what a newer one has reshaped).
import type { ClientBase } from 'pg';
import { StoreError } from '../types.js';

/** Advisory-lock keys (one 64-bit space per database; two constants of our own). */
export const MIGRATION_LOCK = 0x63637765_0001n;
export const WRITER_LOCK = 0x63637765_0002n;
/** Held for one batch by a node of a cluster whose nodes all write (PostgresStore `writers: 'many'`). */
export const COMMIT_LOCK = 0x63637765_0003n;

export interface Migration {
  version: number;
  /** Why the schema changed, for the operator reading `ccweb_schema`. */
  summary: string;
  sql: string;
  /**
   * True for a change older nodes cannot work beside (they would write what it reshapes): it runs
   * only while no other node heartbeats. Every other migration is additive, so a rolling upgrade
   * (new nodes joining old ones) works.
   */
  needsAllNodesStopped?: boolean;
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    summary: 'log, records, append-only audit, head, nodes',
    sql: `
      -- Every committed transaction, in seq order: the same line the embedded store's journal
      -- holds. A node's replica replays it; nothing rewrites it.
      CREATE TABLE ccweb_log (
        seq bigint PRIMARY KEY,
        node_id text NOT NULL,
        committed_at timestamptz NOT NULL DEFAULT now(),
        line text NOT NULL
      );
      -- The last seq committed; a batch moves it from exactly the seq it started from (the fence
      -- against a second writer or a replica that fell behind).
      CREATE TABLE ccweb_head (
        id smallint PRIMARY KEY CHECK (id = 1),
        -- Names this database's history: a replica made from another database is rebuilt, not merged.
        history_id text NOT NULL DEFAULT gen_random_uuid()::text,
        seq bigint NOT NULL,
        node_id text,
        at timestamptz
      );
      INSERT INTO ccweb_head (id, seq) VALUES (1, 0);
      -- Every record as of the head: what an operator queries, and the database's own check of
      -- intake's dedupe (a key inserted twice is refused by the primary key) and of every
      -- compare-and-swap on a version.
      CREATE TABLE ccweb_records (
        collection text NOT NULL,
        key text NOT NULL,
        body jsonb NOT NULL,
        version bigint,
        archived boolean NOT NULL DEFAULT false,
        seq bigint NOT NULL,
        PRIMARY KEY (collection, key)
      );
      CREATE INDEX ccweb_records_task ON ccweb_records ((body->>'taskId')) WHERE collection = 'tasks';
      -- The audit log: append-only, enforced by the database.
      CREATE TABLE ccweb_audit (
        seq bigint PRIMARY KEY,
        at timestamptz NOT NULL,
        action text NOT NULL,
        level text NOT NULL,
        task_id text,
        delivery_id text,
        actor_id text,
        event jsonb NOT NULL
      );
      CREATE INDEX ccweb_audit_task ON ccweb_audit (task_id, seq);
      CREATE FUNCTION ccweb_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        RAISE EXCEPTION 'ccweb_audit is append-only (% refused)', TG_OP;
      END $$;
      CREATE TRIGGER ccweb_audit_no_update_delete BEFORE UPDATE OR DELETE ON ccweb_audit
        FOR EACH ROW EXECUTE FUNCTION ccweb_audit_append_only();
      CREATE TRIGGER ccweb_audit_no_truncate BEFORE TRUNCATE ON ccweb_audit
        FOR EACH STATEMENT EXECUTE FUNCTION ccweb_audit_append_only();
      -- One batch in one statement (one round trip instead of eight): the head moved from exactly
      -- where the batch starts, the keys it inserts absent, the versions it compared against there,
      -- then the log, the records and the audit events. A refused check raises (CC001 head moved,
      -- CC002 key exists, CC003 version differs) and nothing of the batch is kept.
      CREATE FUNCTION ccweb_commit_batch(
        first_seq bigint, last_seq bigint, node text,
        log_seq bigint[], log_line text[],
        abs_c text[], abs_k text[],
        cas_c text[], cas_k text[], cas_f text[], cas_v bigint[],
        up_c text[], up_k text[], up_body text[], up_ver bigint[], up_arch boolean[], up_seq bigint[],
        del_c text[], del_k text[],
        au_seq bigint[], au_at timestamptz[], au_action text[], au_level text[], au_task text[], au_delivery text[], au_actor text[], au_event text[]
      ) RETURNS void LANGUAGE plpgsql AS $$
      DECLARE
        h record;
        bad text;
      BEGIN
        UPDATE ccweb_head SET seq = last_seq, node_id = node, at = now() WHERE id = 1 AND seq = first_seq - 1;
        IF NOT FOUND THEN
          SELECT seq, node_id INTO h FROM ccweb_head WHERE id = 1;
          RAISE EXCEPTION USING ERRCODE = 'CC001', MESSAGE = format('%s|%s', h.seq, coalesce(h.node_id, '?'));
        END IF;
        INSERT INTO ccweb_log (seq, node_id, line) SELECT s, node, l FROM unnest(log_seq, log_line) AS t(s, l);
        SELECT r.collection INTO bad FROM ccweb_records r JOIN unnest(abs_c, abs_k) AS a(c, k) ON r.collection = a.c AND r.key = a.k LIMIT 1;
        IF FOUND THEN RAISE EXCEPTION USING ERRCODE = 'CC002', MESSAGE = bad; END IF;
        SELECT e.c INTO bad FROM unnest(cas_c, cas_k, cas_f, cas_v) AS e(c, k, f, v)
          LEFT JOIN ccweb_records r ON r.collection = e.c AND r.key = e.k
          WHERE r.key IS NULL OR (r.body->>e.f)::bigint IS DISTINCT FROM e.v LIMIT 1;
        IF FOUND THEN RAISE EXCEPTION USING ERRCODE = 'CC003', MESSAGE = bad; END IF;
        INSERT INTO ccweb_records (collection, key, body, version, archived, seq)
          SELECT c, k, b::jsonb, v, a, s FROM unnest(up_c, up_k, up_body, up_ver, up_arch, up_seq) AS u(c, k, b, v, a, s)
          ON CONFLICT (collection, key) DO UPDATE SET body = EXCLUDED.body, version = EXCLUDED.version, archived = EXCLUDED.archived, seq = EXCLUDED.seq;
        DELETE FROM ccweb_records r USING unnest(del_c, del_k) AS d(c, k) WHERE r.collection = d.c AND r.key = d.k;
        INSERT INTO ccweb_audit (seq, at, action, level, task_id, delivery_id, actor_id, event)
          SELECT s, t, a, l, tk, dl, ac, e::jsonb FROM unnest(au_seq, au_at, au_action, au_level, au_task, au_delivery, au_actor, au_event) AS x(s, t, a, l, tk, dl, ac, e);
      END $$;
      -- The nodes that have written here, with their heartbeat.
      CREATE TABLE ccweb_nodes (
        node_id text PRIMARY KEY,
        -- writer (holds the writer lock), standby (waits for it) or stopped (closed cleanly).
        role text NOT NULL DEFAULT 'writer',
        version text NOT NULL,
        started_at timestamptz NOT NULL,
        heartbeat_at timestamptz NOT NULL
      );
    `,
  },
  {
    version: 2,
    summary: "nodes' addresses and the key a standby signs forwarded requests with",
    sql: `
      -- Where the other nodes reach this one: a standby forwards the requests it receives to the
      -- writer's address (src/service/standby-proxy.ts).
      ALTER TABLE ccweb_nodes ADD COLUMN url text;
      -- The key a standby signs the client's address with when it forwards a request, so the writer
      -- can trust that address (src/http/forwarded-client.ts). Only nodes read this database.
      -- gen_random_uuid() is PostgreSQL's strong random source (pg_strong_random): 244 random bits.
      CREATE TABLE ccweb_cluster (
        id smallint PRIMARY KEY CHECK (id = 1),
        forward_key text NOT NULL
      );
      INSERT INTO ccweb_cluster (id, forward_key) VALUES (1, replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''));
    `,
  },
];

export const SCHEMA_VERSION = MIGRATIONS.at(-1)!.version;

/** How recent a heartbeat counts as a node that is still running (three of its 10 s intervals). */
const LIVE_HEARTBEAT = '30 seconds';

export class MigrationNeedsNodesStoppedError extends StoreError {
  constructor(readonly migration: Migration, readonly running: string[]) {
    super(
      'database_migration_blocked',
      `the database's schema moves to version ${migration.version} (${migration.summary}), which needs every other node stopped; ` +
        `still running: ${running.join(', ')}: stop them, start this node, then start them again upgraded`,
    );
  }
}

export class SchemaTooNewError extends StoreError {
  constructor(readonly found: number, readonly known: number) {
    super(
      'database_schema_too_new',
      `the database's schema is version ${found}, newer than this ccweb-gitea knows (${known}): ` +
        'upgrade this node to the version the other nodes run (or point CCWEB_DATABASE_URL at another database)',
    );
  }
}

/** Which migrations a database at `current` still needs; throws when it is ahead of `known`. */
export function pendingMigrations(current: number, migrations: readonly Migration[] = MIGRATIONS): Migration[] {
  const known = migrations.at(-1)?.version ?? 0;
  if (current > known) throw new SchemaTooNewError(current, known);
  return migrations.filter((m) => m.version > current);
}

/**
 * Brings the database to this node's schema; returns the versions applied (none when current).
 * `nodeId`: this node, so a migration that needs every other node stopped can tell who else runs.
 */
export async function migrate(client: ClientBase, migrations: readonly Migration[] = MIGRATIONS, nodeId?: string): Promise<number[]> {
  await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK.toString()]);
  try {
    await client.query(`CREATE TABLE IF NOT EXISTS ccweb_schema (
      version integer PRIMARY KEY,
      summary text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`);
    const { rows } = await client.query<{ v: number | null }>('SELECT max(version) AS v FROM ccweb_schema');
    const applied: number[] = [];
    for (const migration of pendingMigrations(rows[0]?.v ?? 0, migrations)) {
      if (migration.needsAllNodesStopped && nodeId !== undefined) {
        const exists = await client.query<{ t: string | null }>("SELECT to_regclass('ccweb_nodes')::text AS t");
        const running = exists.rows[0]?.t
          ? (await client.query<{ node_id: string }>(`SELECT node_id FROM ccweb_nodes WHERE node_id <> $1 AND role <> 'stopped' AND heartbeat_at > now() - interval '${LIVE_HEARTBEAT}' ORDER BY node_id`, [nodeId])).rows.map((r) => r.node_id)
          : [];
        if (running.length > 0) throw new MigrationNeedsNodesStoppedError(migration, running);
      }
      await client.query('BEGIN');
      try {
        await client.query(migration.sql);
        await client.query('INSERT INTO ccweb_schema (version, summary) VALUES ($1, $2)', [migration.version, migration.summary]);
        await client.query('COMMIT');
      } catch (error) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw error;
      }
      applied.push(migration.version);
    }
    return applied;
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK.toString()]).catch(() => undefined);
  }
}
