// Reads a store directory's audit history without opening the store (SQLite: a read-only connection,
// src/cli/sqlite-audit-reader.ts, which leaves no -wal/-shm of its own behind; an earlier
// version's journal store: straight from its files, src/upgrade/journal-reader.ts): no lock is
// taken and no store data is written, so it works beside a running service (or on a copy of the
// directory). A running earlier version that compacts mid-read replaces files (ENOENT): the read
// starts again.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { openJournalStore } from '../upgrade/journal-reader.js';
import type { AuditEvent } from '../store/types.js';
import { readSqliteAudit } from './sqlite-audit-reader.js';
import { SQLITE_FILE } from '../store/sqlite-store.js';
import { storeFormatOf } from '../upgrade/store-format.js';

export interface AuditFilter {
  taskId?: string;
  /** Inclusive bounds, epoch ms. */
  from?: number;
  to?: number;
}

export function matches(event: AuditEvent, filter: AuditFilter): boolean {
  if (filter.taskId !== undefined && event.taskId !== filter.taskId) return false;
  const t = Date.parse(event.timestamp);
  if (filter.from !== undefined && t < filter.from) return false;
  if (filter.to !== undefined && t > filter.to) return false;
  return true;
}

/** Streams the matching audit events of the store in `dir` to `emit`; returns how many. */
export async function readAuditOffline(dir: string, filter: AuditFilter, emit: (e: AuditEvent) => void): Promise<number> {
  if (!existsSync(dir)) throw new Error(`no store at ${dir}`);
  const format = storeFormatOf(dir);
  if (format === 'sqlite') {
    // Bounds compared as the ISO strings the events carry (`matches` below compares the same instants).
    const iso = (t: number | undefined) => (t === undefined ? undefined : new Date(t).toISOString());
    let n = 0;
    for (const event of readSqliteAudit(join(dir, SQLITE_FILE), { ...(filter.taskId !== undefined ? { taskId: filter.taskId } : {}), ...(filter.from !== undefined ? { from: iso(filter.from)! } : {}), ...(filter.to !== undefined ? { to: iso(filter.to)! } : {}) })) {
      n += 1;
      emit(event);
    }
    return n;
  }
  // A journal store an earlier version left (before `migrate-store`): read from its files.
  if (format === 'none') return 0;
  for (let attempt = 0; ; attempt++) {
    const buffered: AuditEvent[] = [];
    try {
      for await (const e of (await openJournalStore(dir)).audit()) if (matches(e, filter)) buffered.push(e);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || attempt >= 3) throw err;
      continue;
    }
    for (const e of buffered) emit(e);
    return buffered.length;
  }
}
