// Which store a data directory's `store/` folder holds: this version's SQLite file, the journal store
// of an earlier version (to be moved by `migrate-store` first), or none yet. The one place this is
// decided: the service's start, `migrate-store` and `export-audit` all ask here.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { holdsJournalStore } from './journal-reader.js';
import { SQLITE_FILE } from '../store/sqlite-store.js';

export type StoreFormat = 'sqlite' | 'journal' | 'none';

/** `sqlite` once `store.db` is there (a moved journal's files beside it do not count), else `journal` if a journal's files are. */
export function storeFormatOf(dir: string): StoreFormat {
  if (existsSync(join(dir, SQLITE_FILE))) return 'sqlite';
  return holdsJournalStore(dir) ? 'journal' : 'none';
}
