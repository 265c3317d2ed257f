// Whether this version can open a SQLite store file, asked without opening it for writing (no lock,
// nothing written): serve asks before it opens the store, doctor asks beside a running service.
import { closeSync, openSync, readSync } from 'node:fs';
import { newerSchemaProblem } from '../store/sql/schema.js';
import { isUnreadableStoreError } from '../store/sql/sqlite-connection.js';
import { openReadOnly } from '../store/sql/sqlite-read-only.js';

export interface SqliteStoreProblem {
  code: 'store_unreadable' | 'store_schema_too_new';
  problem: string;
}

/** Every SQLite database file starts with these 16 bytes. */
const HEADER = Buffer.from('SQLite format 3\0', 'latin1');

function header(file: string): Buffer {
  const fd = openSync(file, 'r');
  try {
    const buf = Buffer.alloc(HEADER.length);
    return buf.subarray(0, readSync(fd, buf, 0, buf.length, 0));
  } finally {
    closeSync(fd);
  }
}

/**
 * The reason this version cannot use `file` as its store, or null (an empty file is an empty store).
 * A file that cannot be read for another reason (EACCES, a read-only directory) throws that error: the
 * data directory's problem, not the file's.
 */
export function sqliteStoreProblem(file: string): SqliteStoreProblem | null {
  const head = header(file);
  if (head.length === 0) return null;
  if (!head.equals(HEADER)) return { code: 'store_unreadable', problem: `${file} is not a SQLite database` };
  let found: number | undefined;
  try {
    const { db, close } = openReadOnly(file);
    try {
      const meta = db.prepare(`SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'store_meta'`).all();
      if (meta.length > 0) {
        const rows = db.prepare(`SELECT value FROM store_meta WHERE name = 'schema'`).all();
        found = rows[0] ? Number(rows[0]['value']) : undefined;
      }
    } finally {
      close();
    }
  } catch (error) {
    if (!isUnreadableStoreError(error)) throw error;
    return { code: 'store_unreadable', problem: `${file} cannot be read by SQLite (${(error as Error).message})` };
  }
  const newer = newerSchemaProblem(file, found);
  return newer ? { code: 'store_schema_too_new', problem: newer } : null;
}
