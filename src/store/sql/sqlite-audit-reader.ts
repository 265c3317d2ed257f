// The audit history of a SQLite store, read through a read-only connection of its own: no lock is
// taken and nothing of the store is written, so it works beside a running service (WAL lets readers
// in while the service writes) or on a copy of the file. A read-only connection still creates the
// `-wal` and `-shm` files when they are missing (when no service has the store open): those it
// created are removed after the read, unless a service opened the store meanwhile — left behind they
// would belong to the user who read (root, say), and the service user could not open its store.
import { existsSync, rmSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { liveLockHolder } from '../process-lock.js';
import type { AuditEvent } from '../types.js';
import { auditEvent } from './sql-store.js';
import { sqliteBinding } from './sqlite-driver.js';

export interface AuditFileFilter {
  taskId?: string;
  /** Inclusive ISO bounds. */
  from?: string;
  to?: string;
}

/** Every matching event of the store file, in seq order, one at a time. */
export function* readSqliteAudit(file: string, filter: AuditFileFilter): Generator<AuditEvent> {
  const created = [`${file}-wal`, `${file}-shm`].filter((name) => !existsSync(name));
  const db = sqliteBinding().open(file, { readonly: true });
  try {
    const where: string[] = [];
    const params: string[] = [];
    if (filter.taskId !== undefined) (where.push('task_id = ?'), params.push(filter.taskId));
    if (filter.from !== undefined) (where.push('ts >= ?'), params.push(filter.from));
    if (filter.to !== undefined) (where.push('ts <= ?'), params.push(filter.to));
    const rows = db.prepare(`SELECT seq, body FROM audit${where.length > 0 ? ` WHERE ${where.join(' AND ')}` : ''} ORDER BY seq`).iterate(...params);
    for (const row of rows as Iterable<{ seq: number; body: string }>) yield auditEvent(JSON.parse(row.body) as Omit<AuditEvent, 'seq'>, row.seq);
  } finally {
    db.close();
    removeOwnLeftovers(file, created);
  }
}

/** An empty WAL and its index that this read created, with no service holding the store: nobody else's. */
function removeOwnLeftovers(file: string, created: string[]): void {
  if (created.length === 0 || liveLockHolder(dirname(file)) !== null) return;
  const wal = `${file}-wal`;
  if (existsSync(wal) && statSync(wal).size > 0) return; // written by someone since: not ours
  for (const name of created) rmSync(name, { force: true });
}
