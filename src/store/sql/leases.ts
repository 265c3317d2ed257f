// Repository leases in SQL (the contract: Tx in types.ts). One row per repository; the database
// decides every grant, renewal and expiry on its own clock, in milliseconds since 1970 (PostgreSQL:
// clock_timestamp(), the time of the statement, not of the transaction's start, so a long transaction
// cannot judge an expiry by a stale clock).
import { LeaseLostError, type LeaseGrant, type LeaseRow } from '../types.js';
import type { Dialect } from './schema.js';
import type { Row, SqlSession } from './sql-connection.js';

export function databaseNowMs(dialect: Dialect): string {
  // SQLite: its own clock, unless a test set one (SqliteOptions.clockMs).
  return dialect === 'sqlite'
    ? `CAST(coalesce(ccweb_now_ms(), (julianday('now') - 2440587.5) * 86400000) AS INTEGER)`
    : `(extract(epoch FROM clock_timestamp()) * 1000)::bigint`;
}

const COLUMNS = 'repo_key, epoch, holder, task_id, expires_at';

/** One reading of the clock for a whole statement (PostgreSQL's clock_timestamp() moves within one). */
const withClock = (dialect: Dialect) => `WITH clock AS (SELECT ${databaseNowMs(dialect)} AS now) `;
const NOW = '(SELECT now FROM clock)';

function leaseRow(row: Row): LeaseRow {
  return {
    repoKey: String(row['repo_key']),
    epoch: Number(row['epoch']),
    holder: String(row['holder']),
    taskId: row['task_id'] === null ? null : String(row['task_id']),
    expiresAt: Number(row['expires_at']),
  };
}

export async function grantLease(session: SqlSession, dialect: Dialect, repoKey: string, request: { holder: string; taskId: string | null; ttlMs: number }): Promise<LeaseGrant> {
  // The row as it was (locked on PostgreSQL until this transaction ends), to say which lease a takeover
  // ended and when: a lease never released ended at its last expiry, the one renewals had moved it to.
  const [before] = await session.all(`SELECT epoch, holder, expires_at FROM repo_leases WHERE repo_key = ?${dialect === 'postgres' ? ' FOR UPDATE' : ''}`, [repoKey]);
  const [granted] = await session.all(
    `${withClock(dialect)}INSERT INTO repo_leases (repo_key, epoch, holder, task_id, expires_at) VALUES (?, 1, ?, ?, ${NOW} + ?)
     ON CONFLICT (repo_key) DO UPDATE SET epoch = repo_leases.epoch + 1, holder = excluded.holder, task_id = excluded.task_id, expires_at = excluded.expires_at
     WHERE repo_leases.holder IS NULL OR repo_leases.expires_at <= ${NOW}
     RETURNING epoch, expires_at, ${NOW} AS now`,
    [repoKey, request.holder, request.taskId, Math.max(1, Math.round(request.ttlMs))],
  );
  if (granted) {
    const replaced = before && before['holder'] !== null ? { epoch: Number(before['epoch']), expiresAt: Number(before['expires_at']) } : null;
    return { granted: true, epoch: Number(granted['epoch']), expiresAt: Number(granted['expires_at']), now: Number(granted['now']), replaced };
  }
  const [current] = await session.all(`SELECT ${COLUMNS}, ${databaseNowMs(dialect)} AS now FROM repo_leases WHERE repo_key = ?`, [repoKey]);
  return { granted: false, current: leaseRow(current!), now: Number(current!['now']) };
}

export async function renewLease(session: SqlSession, dialect: Dialect, repoKey: string, epoch: number, ttlMs: number): Promise<{ expiresAt: number; now: number } | null> {
  const [row] = await session.all(
    `${withClock(dialect)}UPDATE repo_leases SET expires_at = ${dialect === 'sqlite' ? 'max' : 'greatest'}(expires_at, ${NOW} + ?)
     WHERE repo_key = ? AND epoch = ? AND holder IS NOT NULL AND expires_at > ${NOW}
     RETURNING expires_at, ${NOW} AS now`,
    [Math.max(1, Math.round(ttlMs)), repoKey, epoch],
  );
  return row ? { expiresAt: Number(row['expires_at']), now: Number(row['now']) } : null;
}

/** When the lease ended on the database's clock (now, or its expiry if that came first); null when `epoch` is not the current holder's. */
export async function endLease(session: SqlSession, dialect: Dialect, repoKey: string, epoch: number, how: 'release' | 'expire'): Promise<{ endedAt: number } | null> {
  const [row] = await session.all(
    `${withClock(dialect)}UPDATE repo_leases SET holder = NULL, task_id = NULL WHERE repo_key = ? AND epoch = ? AND holder IS NOT NULL${how === 'expire' ? ` AND expires_at <= ${NOW}` : ''}
     RETURNING ${dialect === 'sqlite' ? 'min' : 'least'}(expires_at, ${NOW}) AS ended_at`,
    [repoKey, epoch],
  );
  return row ? { endedAt: Number(row['ended_at']) } : null;
}

export async function fenceLease(session: SqlSession, dialect: Dialect, repoKey: string, epoch: number): Promise<void> {
  const rows = await session.all(
    `SELECT epoch FROM repo_leases WHERE repo_key = ? AND epoch = ? AND holder IS NOT NULL AND expires_at > ${databaseNowMs(dialect)}${dialect === 'postgres' ? ' FOR SHARE' : ''}`,
    [repoKey, epoch],
  );
  if (rows.length === 0) throw new LeaseLostError(repoKey, epoch);
}

export async function lockFreeLeases(session: SqlSession, dialect: Dialect, repoKeys: readonly string[]): Promise<Set<string>> {
  const keys = [...new Set(repoKeys)].sort();
  if (keys.length === 0) return new Set();
  const list = keys.map(() => '?').join(', ');
  // A repository never leased has no row to lock yet: a free one (epoch 0; the first grant makes it 1)
  // is made first. Rows are made in key order, so two claimers making rows at once wait for each other
  // in one order and never deadlock; once a row exists, nobody waits for it here again.
  const existing = new Set((await session.all(`SELECT repo_key FROM repo_leases WHERE repo_key IN (${list})`, keys)).map((r) => String(r['repo_key'])));
  const missing = keys.filter((k) => !existing.has(k));
  if (missing.length > 0) {
    await session.run(`INSERT INTO repo_leases (${COLUMNS}) VALUES ${missing.map(() => '(?, 0, NULL, NULL, 0)').join(', ')} ON CONFLICT (repo_key) DO NOTHING`, missing);
  }
  const rows = await session.all(
    `SELECT repo_key FROM repo_leases WHERE repo_key IN (${list}) AND holder IS NULL ORDER BY repo_key${dialect === 'postgres' ? ' FOR UPDATE SKIP LOCKED' : ''}`,
    keys,
  );
  return new Set(rows.map((r) => String(r['repo_key'])));
}

/** Every held lease, and the database's clock when they were read (to judge expiry by). */
export async function heldLeases(read: (sql: string, params?: readonly unknown[]) => Promise<Row[]>, dialect: Dialect): Promise<{ leases: LeaseRow[]; now: number }> {
  const [clock] = await read(`SELECT ${databaseNowMs(dialect)} AS now`);
  const rows = await read(`SELECT ${COLUMNS} FROM repo_leases WHERE holder IS NOT NULL ORDER BY repo_key`);
  return { leases: rows.map(leaseRow), now: Number(clock!['now']) };
}
