// `ccweb-gitea migrate-store`: the data directory's store of an earlier version into this version's:
// without CCWEB_DATABASE_URL, the journal store into SQLite in place; with it, the embedded store into PostgreSQL.
import { join } from 'node:path';
import { ConfigError, defaultNodeId, loadConfig } from '../config/index.js';
import { STORE_INDEXES } from '../domain/records.js';
import { copyEmbeddedStore, describeDatabase, sqlStoreContents, StoreError, type StoreContents } from '../store/index.js';
import { finishJournalMove, JOURNAL_BACKUP_DIR, journalMoveUnfinished, migrateJournalToSqlite } from '../store/journal-to-sqlite.js';
import { openJournalStore } from '../store/legacy/journal-reader.js';
import { acquireProcessLock } from '../store/process-lock.js';
import { createSqliteStore, SQLITE_FILE } from '../store/sqlite-store.js';
import { storeFormatOf } from '../store/store-format.js';
import { VERSION } from './version.js';

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
    const summary = await copyEmbeddedStore(source, { url: config.databaseUrl, nodeId: config.nodeId ?? defaultNodeId(config.dataDir), version: VERSION, onProgress: io.out });
    io.out(`done: ${summary.logLines} log line(s); read back and compared (digest ${summary.digest.slice(0, 16)})`);
    io.out('start the service with CCWEB_DATABASE_URL set; the embedded store is left as it was');
    return 0;
  } catch (error) {
    io.err(`migrate-store: ${(error as Error).message}`);
    return 1;
  } finally {
    await close();
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
  const locked = error instanceof StoreError && error.code === 'store_locked';
  return locked ? `the service is running on this data directory (${error.message}); stop it first` : (error as Error).message;
}
