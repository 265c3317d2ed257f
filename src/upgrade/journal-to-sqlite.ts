// The embedded journal store of an earlier version, moved into SQLite in place (`migrate-store`): every
// record (hot and archived, in order) and every audit event (seq, id and time kept) is copied into a new
// database beside it, the two are compared by digest, and only then does the database take its name and
// the journal's files move into `journal-before-sqlite/` (kept for the operator to delete), and last a
// marker checkpoint says the move is complete. Each step is fsynced before the next; a run that stopped
// after store.db took its name is finished by the next (journalMoveUnfinished).
import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { holdsJournalStore, openJournalStore } from './journal-reader.js';
import { acquireProcessLock } from '../data-dir/data-dir-lock.js';
import { SqliteConnection } from '../store/sql/sqlite-connection.js';
import { SqlStore } from '../store/sql/sql-store.js';
import { SQLITE_FILE } from '../store/sqlite-store.js';
import { storeFormatOf } from './store-format.js';
import { contentsDigest, importContents, sqlStoreContents } from './store-contents.js';
import { StoreUnavailableError, type CollectionName } from '../store/types.js';

export const JOURNAL_BACKUP_DIR = 'journal-before-sqlite';
const MOVED_FORMAT = 'ccweb-store/moved-to-sqlite';

export interface JournalMigration {
  records: number;
  auditEvents: number;
  digest: string;
}

export async function migrateJournalToSqlite(dir: string, options: { indexes?: Partial<Record<CollectionName, string[]>>; onProgress?: (line: string) => void } = {}): Promise<JournalMigration> {
  const format = storeFormatOf(dir);
  if (format === 'sqlite') throw new StoreUnavailableError(`${join(dir, SQLITE_FILE)} exists already: nothing to migrate`);
  if (format === 'none') throw new StoreUnavailableError(`${dir} holds no journal store to migrate`);
  // The lock an earlier version's service holds while it runs: the files must not move under it.
  const release = acquireProcessLock(dir);
  try {
    return await copyAndSwap(dir, options);
  } finally {
    release();
  }
}

async function copyAndSwap(dir: string, options: { indexes?: Partial<Record<CollectionName, string[]>>; onProgress?: (line: string) => void }): Promise<JournalMigration> {
  const source = await openJournalStore(dir);
  const temporary = `${SQLITE_FILE}.migrating`;
  for (const name of [temporary, `${temporary}-wal`, `${temporary}-shm`]) rmSync(join(dir, name), { force: true });
  const target = new SqlStore({ dir, ...(options.indexes ? { indexes: options.indexes } : {}), connect: () => new SqliteConnection({ file: join(dir, temporary) }) });
  let copied: { records: number; auditEvents: number };
  let digest: string;
  try {
    await target.open();
    copied = await importContents(target, source, options.onProgress);
    digest = await contentsDigest(source);
    if ((await contentsDigest(sqlStoreContents(target))) !== digest) throw new StoreUnavailableError('migrate-store: the SQLite copy differs from the journal store after the copy; nothing was changed');
  } finally {
    await target.close();
  }
  // Closing the last connection folds the WAL into the file; a WAL left over would be lost by the rename.
  if (existsSync(join(dir, `${temporary}-wal`)) && statSync(join(dir, `${temporary}-wal`)).size > 0) {
    throw new StoreUnavailableError(`migrate-store: ${join(dir, `${temporary}-wal`)} was not folded into the copy; nothing was changed`);
  }
  // The copy is complete and checked: it takes its name (durably, before any journal file moves).
  fsyncFile(join(dir, temporary));
  renameSync(join(dir, temporary), join(dir, SQLITE_FILE));
  for (const name of [`${temporary}-wal`, `${temporary}-shm`]) rmSync(join(dir, name), { force: true });
  fsyncDir(dir);
  moveJournalAside(dir);
  return { ...copied, digest };
}

/** A file's (or, on Linux, a directory's entries') writes made durable. */
function fsyncFile(file: string): void {
  const fd = openSync(file, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

const fsyncDir = fsyncFile;

/** `text` in `file`, whole or not at all: written beside it, made durable, renamed over it. */
function writeFileDurably(file: string, text: string): void {
  const temp = `${file}.${process.pid}.tmp`;
  writeFileSync(temp, text);
  fsyncFile(temp);
  renameSync(temp, file);
  fsyncDir(join(file, '..'));
}

function hasMovedMarker(dir: string): boolean {
  try {
    return (JSON.parse(readFileSync(join(dir, 'checkpoint.json'), 'utf8')) as { format?: unknown }).format === MOVED_FORMAT;
  } catch {
    return false;
  }
}

/**
 * A move that stopped part way (a crash after store.db took its name): store.db, checked complete
 * before it was renamed, with journal files still beside it or a backup folder, and no marker yet.
 */
export function journalMoveUnfinished(dir: string): boolean {
  return storeFormatOf(dir) === 'sqlite' && !hasMovedMarker(dir) && (holdsJournalStore(dir) || existsSync(join(dir, JOURNAL_BACKUP_DIR)));
}

/** Finishes a move that stopped part way (see journalMoveUnfinished); the number of files it moved. */
export async function finishJournalMove(dir: string): Promise<number> {
  if (!journalMoveUnfinished(dir)) throw new StoreUnavailableError(`${join(dir, SQLITE_FILE)} exists already: nothing to migrate`);
  const release = acquireProcessLock(dir);
  try {
    return moveJournalAside(dir);
  } finally {
    release();
  }
}

/** The journal's files into the backup folder, then the marker; each step durable before the next. */
function moveJournalAside(dir: string): number {
  const backup = join(dir, JOURNAL_BACKUP_DIR);
  mkdirSync(backup, { recursive: true });
  fsyncDir(dir);
  let moved = 0;
  for (const name of readdirSync(dir)) {
    if (name === SQLITE_FILE || name === JOURNAL_BACKUP_DIR || name === 'LOCK' || name.startsWith('LOCK.') || name.startsWith(`${SQLITE_FILE}-`)) continue;
    // Renames are atomic: a file is in one place or the other, never both (a second copy is not ours to overwrite).
    if (existsSync(join(backup, name))) throw new StoreUnavailableError(`migrate-store: ${join(dir, name)} is also in ${backup}; move one of them away by hand`);
    renameSync(join(dir, name), join(backup, name));
    moved += 1;
  }
  fsyncDir(backup);
  fsyncDir(dir);
  // An earlier version started here by mistake finds a checkpoint it refuses ("unknown format"), instead
  // of an empty directory it would start a new, empty store in. Written last: its presence says the move is complete.
  writeFileDurably(join(dir, 'checkpoint.json'), `${JSON.stringify({ format: MOVED_FORMAT, seq: 0, note: `the store is ${SQLITE_FILE} (SQLite): start a ccweb-gitea that reads it` })}\n`);
  return moved;
}
