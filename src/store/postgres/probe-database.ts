// A look at the database a node would open, without opening it (no lock, no write): what `doctor`
// asks. It fails with the same errors the store's open fails with, for the same reasons: a server
// that cannot be reached or refuses the login (`unreachable`), a schema newer than this node knows
// (`pendingMigrations`).
import { databaseClient, unreachable } from './client.js';
import { describeDatabase } from './database-url.js';
import { pendingMigrations, SCHEMA_VERSION } from './schema.js';

export interface DatabaseProbe {
  /** The database without its password (describeDatabase). */
  where: string;
  /** The version `ccweb_schema` holds; 0 for a database the service has not used yet. */
  schemaVersion: number;
  /** The versions this node would apply at start. */
  pending: number[];
  known: number;
}

export async function probeDatabase(url: string, timeoutMs: number): Promise<DatabaseProbe> {
  const where = describeDatabase(url);
  const client = databaseClient(url, { connectionTimeoutMillis: timeoutMs, query_timeout: timeoutMs });
  try {
    await client.connect();
  } catch (error) {
    await client.end().catch(() => undefined);
    throw unreachable(where, error);
  }
  try {
    const table = await client.query<{ t: string | null }>("SELECT to_regclass('ccweb_schema')::text AS t");
    const version = table.rows[0]?.t ? ((await client.query<{ v: number | null }>('SELECT max(version) AS v FROM ccweb_schema')).rows[0]?.v ?? 0) : 0;
    return { where, schemaVersion: version, pending: pendingMigrations(version).map((m) => m.version), known: SCHEMA_VERSION };
  } finally {
    await client.end().catch(() => undefined);
  }
}
