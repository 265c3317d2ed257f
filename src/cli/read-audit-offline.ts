// Reads a store directory's audit history without opening the store (SQLite: a read-only connection;
// an earlier version's journal store: straight from its files):
// no lock is taken and nothing is written, so it works beside a running service (or on a copy of
// the directory). Order: archives, the checkpoint's unarchived events, then the journal — which is
// seq order, so events stream out without sorting. A compaction that replaces files mid-read
// surfaces as ENOENT; the read restarts from the new checkpoint.
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CHECKPOINT_FILE, listSegments, parseSegment } from '../store/journal-files.mjs';
import { expandDerived } from '../store/derived/index.mjs';
import type { AuditEvent } from '../store/types.js';
import { readSqliteAudit } from '../store/sql/sqlite-audit-reader.js';
import { SQLITE_FILE } from '../store/sqlite-store.js';

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

interface CheckpointAudit {
  seq: number;
  audit?: AuditEvent[];
  auditArchives?: string[];
}

async function readOnce(dir: string, filter: AuditFilter, emit: (e: AuditEvent) => void): Promise<number> {
  let count = 0;
  let lastSeq = 0;
  const out = (e: AuditEvent) => {
    if (e.seq <= lastSeq) return; // an event both archived and still in the journal
    lastSeq = e.seq;
    if (!matches(e, filter)) return;
    count += 1;
    emit(e);
  };
  const checkpointPath = join(dir, CHECKPOINT_FILE);
  let checkpointSeq = 0;
  if (existsSync(checkpointPath)) {
    const cp = JSON.parse(await readFile(checkpointPath, 'utf8')) as CheckpointAudit;
    checkpointSeq = cp.seq;
    for (const name of cp.auditArchives ?? []) {
      for (const line of (await readFile(join(dir, name), 'utf8')).split('\n')) if (line !== '') out(JSON.parse(line) as AuditEvent);
    }
    for (const e of cp.audit ?? []) out(e);
  }
  const segments = await listSegments(dir);
  for (const [i, name] of segments.entries()) {
    const file = join(dir, name);
    const parsed = parseSegment(await readFile(file, 'utf8'), file, { allowTornTail: i === segments.length - 1 });
    for (const entry of parsed.entries) {
      if (entry.seq <= checkpointSeq) continue;
      for (const op of entry.ops as unknown[][]) {
        if (op[0] === 'a') out(op[1] as AuditEvent);
        // A derived record (intake's accepted comment) stands for audit events of its own.
        else if (op[0] === 'x') for (const d of expandDerived(op[1] as string, op[2])) if (d[0] === 'a') out(d[1]);
      }
    }
  }
  return count;
}

/** Streams the matching audit events of the store in `dir` to `emit`; returns how many. */
export async function readAuditOffline(dir: string, filter: AuditFilter, emit: (e: AuditEvent) => void): Promise<number> {
  if (!existsSync(dir)) throw new Error(`no store at ${dir}`);
  const sqlite = join(dir, SQLITE_FILE);
  if (existsSync(sqlite)) {
    // Bounds compared as the ISO strings the events carry (`matches` below compares the same instants).
    const iso = (t: number | undefined) => (t === undefined ? undefined : new Date(t).toISOString());
    let n = 0;
    for (const event of readSqliteAudit(sqlite, { ...(filter.taskId !== undefined ? { taskId: filter.taskId } : {}), ...(filter.from !== undefined ? { from: iso(filter.from)! } : {}), ...(filter.to !== undefined ? { to: iso(filter.to)! } : {}) })) {
      n += 1;
      emit(event);
    }
    return n;
  }
  // A journal store an earlier version left (before `migrate-store`): read from its files.
  for (let attempt = 0; ; attempt++) {
    const buffered: AuditEvent[] = [];
    try {
      const n = await readOnce(dir, filter, (e) => buffered.push(e));
      for (const e of buffered) emit(e);
      return n;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || attempt >= 3) throw err;
    }
  }
}
