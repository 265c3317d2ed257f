// The audit history of a SQLite store, read through a read-only connection of its own
// (src/store/sql/sqlite-read-only.ts): it works beside a running service or on a copy of the file, and leaves no
// -wal/-shm of its own behind.
import type { AuditEvent } from '../store/types.js';
import { auditEvent } from '../store/sql/sql-store.js';
import { openReadOnly } from '../store/sql/sqlite-read-only.js';

export interface AuditFileFilter {
  taskId?: string;
  /** Inclusive ISO bounds. */
  from?: string;
  to?: string;
}

/** Every matching event of the store file, in seq order, one at a time. */
export function* readSqliteAudit(file: string, filter: AuditFileFilter): Generator<AuditEvent> {
  const { db, close } = openReadOnly(file);
  try {
    const where: string[] = [];
    const params: string[] = [];
    if (filter.taskId !== undefined) (where.push('task_id = ?'), params.push(filter.taskId));
    if (filter.from !== undefined) (where.push('ts >= ?'), params.push(filter.from));
    if (filter.to !== undefined) (where.push('ts <= ?'), params.push(filter.to));
    const rows = db.prepare(`SELECT seq, body FROM audit${where.length > 0 ? ` WHERE ${where.join(' AND ')}` : ''} ORDER BY seq`).iterate(...params);
    for (const row of rows as Iterable<{ seq: number; body: string }>) yield auditEvent(JSON.parse(row.body) as Omit<AuditEvent, 'seq'>, row.seq);
  } finally {
    close();
  }
}
