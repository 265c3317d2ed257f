// The embedded store: SQLite, one file in the data directory (`store.db`, with its `-wal` and
// `-shm` beside it while open), for one node.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { acquireProcessLock } from '../data-dir/data-dir-lock.js';
import { SqliteConnection } from './sql/sqlite-connection.js';
import { SqlStore } from './sql/sql-store.js';
import type { CollectionName } from './types.js';

export const SQLITE_FILE = 'store.db';

export interface SqliteStoreOptions {
  dir: string;
  indexes?: Partial<Record<CollectionName, string[]>>;
  /** Test hook: runs before each COMMIT; throwing simulates an I/O failure. */
  beforeCommit?: () => void;
  /** Test hook: the clock leases are judged by (SqliteOptions.clockMs). */
  clockMs?: () => number;
  /** Called once when the store stops for good (a commit SQLite could not make). */
  onFailure?: (error: Error) => void;
}

export function createSqliteStore(options: SqliteStoreOptions): SqlStore {
  let release: (() => void) | undefined;
  return new SqlStore({
    dir: options.dir,
    ...(options.indexes ? { indexes: options.indexes } : {}),
    connect: () => {
      mkdirSync(options.dir, { recursive: true, mode: 0o700 });
      // SQLite would let a second process write the file too: two services would then both run tasks.
      release = acquireProcessLock(options.dir);
      return new SqliteConnection({
        file: join(options.dir, SQLITE_FILE),
        ...(options.beforeCommit ? { beforeCommit: options.beforeCommit } : {}),
        ...(options.clockMs ? { clockMs: options.clockMs } : {}),
        ...(options.onFailure ? { onFailure: options.onFailure } : {}),
      });
    },
    onClose: () => release?.(),
  });
}
