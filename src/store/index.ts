import { createPostgresSqlStore, type PostgresSqlStoreOptions } from './postgres-sql-store.js';
import { createSqliteStore, type SqliteStoreOptions } from './sqlite-store.js';
import type { SqlStore } from './sql/sql-store.js';

export * from './types.js';
export { AUDIT_CHANNEL, SqlStore } from './sql/sql-store.js';
export { createSqliteStore, SQLITE_FILE, type SqliteStoreOptions } from './sqlite-store.js';
export { describeDatabase, isPostgresUrl } from './sql/database-url.js';
export { createPostgresSqlStore, type PostgresSqlStoreOptions } from './postgres-sql-store.js';

/** The embedded store (SQLite in the data directory, the default), or PostgreSQL when a database URL is given. */
export function createStore(options: SqliteStoreOptions | PostgresSqlStoreOptions): SqlStore {
  return 'url' in options ? createPostgresSqlStore(options) : createSqliteStore(options);
}
