// `ccweb-gitea migrate-store`: the embedded store of the data directory into PostgreSQL.
import { join } from 'node:path';
import { ConfigError, defaultNodeId, loadConfig } from '../config/index.js';
import { copyEmbeddedStore, createStore, describeDatabase, StoreError } from '../store/index.js';
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
  if (!config.databaseUrl) {
    io.err('migrate-store: CCWEB_DATABASE_URL is not set: set it (or CCWEB_DATABASE_URL_FILE) to the empty PostgreSQL database to copy the store into');
    return 78;
  }
  const dir = join(config.dataDir, 'store');
  const source = createStore({ dir });
  try {
    await source.open();
  } catch (error) {
    const locked = error instanceof StoreError && error.code === 'store_locked';
    io.err(`migrate-store: cannot open ${dir}: ${locked ? 'the service is running on this data directory; stop it first' : (error as Error).message}`);
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
    await source.close();
  }
}
