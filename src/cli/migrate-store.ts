// `ccweb-gitea migrate-store`: the store of an earlier version into this version's: without
// CCWEB_DATABASE_URL, the journal store into SQLite in place; with it, an earlier version's PostgreSQL
// store into this version's tables in place, or else the embedded store into PostgreSQL.
import { join } from 'node:path';
import { ConfigError, loadConfig } from '../config/index.js';
import { STORE_INDEXES } from '../domain/records.js';
import { describeDatabase, StoreError } from '../store/index.js';
import { copyEmbeddedStore } from '../upgrade/embedded-to-postgres.js';
import { sqlStoreContents, type StoreContents } from '../upgrade/store-contents.js';
import { finishJournalMove, JOURNAL_BACKUP_DIR, journalMoveUnfinished, migrateJournalToSqlite } from '../upgrade/journal-to-sqlite.js';
import { openJournalStore } from '../upgrade/journal-reader.js';
import { acquireProcessLock, DataDirLockedError } from '../data-dir/data-dir-lock.js';
import { createSqliteStore, SQLITE_FILE } from '../store/sqlite-store.js';
import { EARLIER_SCHEMA, holdsEarlierPostgresStore, moveEarlierPostgresStore } from '../upgrade/earlier-postgres.js';
import { PostgresConnection } from '../store/sql/postgres-connection.js';
import { storeFormatOf } from '../upgrade/store-format.js';

export interface MigrateStoreIo {
  env: Readonly<Record<string, string | undefined>>;
  argv: readonly string[];
  cwd: string;
  out: (line: string) => void;
  err: (line: string) => void;
}

/** Exit code: 0 copied and checked, 1 refused or failed (the line says why), 78 bad configuration. */
export async function migrateStore(io: MigrateStoreIo): Promise<number> {
  let config;
  try {
    config = loadConfig({ env: io.env, argv: [...io.argv], cwd: io.cwd });
  } catch (error) {
    if (error instanceof ConfigError) {
      io.err(error.message);
      return 78;
    }
    throw error;
  }
  const dir = join(config.dataDir, 'store');
  if (!config.databaseUrl) return journalToSqlite(dir, io);
  // An earlier version's store in the database comes first: the node refuses to start until it is moved,
  // whatever its data directory still holds (e.g. an embedded store copied into PostgreSQL long ago).
  const moved = await earlierPostgresInPlace(config.databaseUrl, io);
  if (moved !== undefined) return moved;
  // The embedded store is SQLite; a journal store an earlier version left is read from its files as it is.
  const format = storeFormatOf(dir);
  if (format === 'none') {
    // Opening it would create an empty store.db and copy nothing into the database, "done".
    io.err(`migrate-store: ${dir} holds no store (neither ${SQLITE_FILE} nor an earlier version's journal): nothing to migrate; check CCWEB_DATA_DIR (${config.dataDir})`);
    return 1;
  }
  const journal = format === 'journal';
  let close: () => Promise<void> | void = () => undefined;
  let source: StoreContents;
  try {
    if (journal) {
      close = acquireProcessLock(dir);
      source = await openJournalStore(dir);
    } else {
      const sqlite = createSqliteStore({ dir, indexes: STORE_INDEXES });
      await sqlite.open();
      close = () => sqlite.close();
      source = sqlStoreContents(sqlite);
    }
  } catch (error) {
    await close();
    io.err(`migrate-store: cannot open ${dir}: ${whyNot(error)}`);
    return 1;
  }
  try {
    io.out(`copying ${dir} into ${describeDatabase(config.databaseUrl)}`);
    const summary = await copyEmbeddedStore(source, { url: config.databaseUrl, indexes: STORE_INDEXES, onProgress: io.out });
    io.out(`done: ${summary.auditEvents} audit event(s) and every record copied, read back and compared (digest ${summary.digest.slice(0, 16)})`);
    io.out('start the service with CCWEB_DATABASE_URL set; the embedded store is left as it was');
    return 0;
  } catch (error) {
    io.err(`migrate-store: ${(error as Error).message}`);
    return 1;
  } finally {
    await close();
  }
}

/** The earlier PostgreSQL store moved in place; undefined when the database holds none. */
async function earlierPostgresInPlace(url: string, io: MigrateStoreIo): Promise<number | undefined> {
  const where = describeDatabase(url);
  const connection = new PostgresConnection({ url, max: 1 });
  try {
    if (!(await holdsEarlierPostgresStore(connection))) return undefined;
    io.out(`moving the store of an earlier version in ${where} into this version's tables (one transaction)`);
    const result = await moveEarlierPostgresStore(connection, { indexes: STORE_INDEXES, onProgress: io.out });
    io.out(`done: ${result.auditEvents} audit event(s) and every record moved, read back and compared (digest ${result.digest.slice(0, 16)})`);
    io.out(`the earlier tables are kept in the schema ${EARLIER_SCHEMA}: drop it (DROP SCHEMA ${EARLIER_SCHEMA} CASCADE) once the nodes run`);
    return 0;
  } catch (error) {
    io.err(`migrate-store: ${where}: ${(error as Error).message}`);
    return 1;
  } finally {
    await connection.close().catch(() => undefined);
  }
}

async function journalToSqlite(dir: string, io: MigrateStoreIo): Promise<number> {
  if (storeFormatOf(dir) === 'none') {
    io.err(`migrate-store: ${dir} holds no store of an earlier version: nothing to migrate (to copy this store into PostgreSQL, set CCWEB_DATABASE_URL)`);
    return 1;
  }
  try {
    if (journalMoveUnfinished(dir)) {
      // An earlier run stopped after store.db (complete and checked) took its name, before the journal's files had all moved.
      io.out(`finishing the move of the journal's files in ${dir} (${join(dir, SQLITE_FILE)} was copied and compared before)`);
      io.out(`done: ${await finishJournalMove(dir)} file(s) moved`);
    } else {
      io.out(`moving the journal store in ${dir} into SQLite (${join(dir, SQLITE_FILE)})`);
      const result = await migrateJournalToSqlite(dir, { indexes: STORE_INDEXES, onProgress: io.out });
      io.out(`done: ${result.records} record(s) and ${result.auditEvents} audit event(s) copied and compared (digest ${result.digest.slice(0, 16)})`);
    }
    io.out(`the journal's files are kept in ${join(dir, JOURNAL_BACKUP_DIR)}: delete them once the service runs`);
    return 0;
  } catch (error) {
    io.err(`migrate-store: ${whyNot(error)}`);
    return 1;
  }
}

/** The lock's message names its holder (pid, host, since): the service to stop, perhaps in another container. */
function whyNot(error: unknown): string {
  const locked = error instanceof DataDirLockedError;
  return locked ? `the service is running on this data directory (${error.message}); stop it first` : (error as Error).message;
}
