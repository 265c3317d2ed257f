// A look at the database a node would open, without opening it (no lock, no write): what `doctor`
// asks. It fails with the errors the store's open fails with, for the same reasons: a server that
// cannot be reached or refuses the login (database_unreachable), an earlier version's store that
// `migrate-store` must move first (store_needs_migration), a schema newer than this node knows
// (database_schema_too_new).
import pg from 'pg';
import { describeDatabase } from '../store/sql/database-url.js';
import { StoreError } from '../store/types.js';
import { EARLIER_POSTGRES_TABLE, SCHEMA_VERSION } from '../store/sql/schema.js';
import { earlierStoreFound, schemaTooNew } from '../store/sql/sql-store.js';

export interface DatabaseProbe {
  /** The database without its password (describeDatabase). */
  where: string;
  /** The schema `store_meta` holds; 0 for a database the service has not used yet. */
  schemaVersion: number;
  /** The versions this node would bring it to at start. */
  pending: number[];
  known: number;
}

export async function probeDatabase(url: string, timeoutMs: number): Promise<DatabaseProbe> {
  const where = describeDatabase(url);
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: timeoutMs, query_timeout: timeoutMs });
  client.on('error', () => undefined);
  try {
    await client.connect();
  } catch (error) {
    await client.end().catch(() => undefined);
    throw new StoreError('database_unreachable', `cannot reach ${where}: ${(error as Error).message}`);
  }
  try {
    const tables = await client.query<{ earlier: string | null; meta: string | null }>('SELECT to_regclass($1)::text AS earlier, to_regclass($2)::text AS meta', [EARLIER_POSTGRES_TABLE, 'store_meta']);
    if (tables.rows[0]?.earlier) {
      throw earlierStoreFound(where);
    }
    const version = tables.rows[0]?.meta ? Number((await client.query<{ value: string }>(`SELECT value FROM store_meta WHERE name = 'schema'`)).rows[0]?.value ?? 0) : 0;
    if (version > SCHEMA_VERSION) throw schemaTooNew('postgres', where, version);
    return { where, schemaVersion: version, pending: version < SCHEMA_VERSION ? [SCHEMA_VERSION] : [], known: SCHEMA_VERSION };
  } finally {
    await client.end().catch(() => undefined);
  }
}
