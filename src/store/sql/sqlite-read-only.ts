// A read-only connection of its own to a SQLite store file: no lock is taken and nothing of the store
// is written, so it works beside a running service (WAL lets readers in while the service writes) or
// on a copy of the file. A read-only connection still creates the `-wal` and `-shm` files when they
// are missing (when no service has the store open): those it created are removed when it closes,
// unless a service opened the store meanwhile — left behind they would belong to the user who read
// (root, say), and the service user could not open its store.
import { existsSync, rmSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { liveLockHolder } from '../../data-dir/data-dir-lock.js';
import { sqliteBinding, type SqliteDatabase } from './sqlite-driver.js';

export interface ReadOnlySqlite {
  db: SqliteDatabase;
  close(): void;
}

export function openReadOnly(file: string): ReadOnlySqlite {
  const created = [`${file}-wal`, `${file}-shm`].filter((name) => !existsSync(name));
  let db: SqliteDatabase;
  try {
    db = sqliteBinding().open(file, { readonly: true });
  } catch (error) {
    removeOwnLeftovers(file, created);
    throw error;
  }
  return {
    db,
    close() {
      db.close();
      removeOwnLeftovers(file, created);
    },
  };
}

/** An empty WAL and its index that this read created, with no service holding the store: nobody else's. */
function removeOwnLeftovers(file: string, created: string[]): void {
  if (created.length === 0 || liveLockHolder(dirname(file)) !== null) return;
  const wal = `${file}-wal`;
  if (existsSync(wal) && statSync(wal).size > 0) return; // written by someone since: not ours
  for (const name of created) rmSync(name, { force: true });
}
