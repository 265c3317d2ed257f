// Why a reader paging the audit by seq on PostgreSQL never passes an event still to commit. The database
// hands out seqs at INSERT, and transactions commit in any order: a cursor at a seq it saw could pass a
// lower one that commits later. So a transaction that appends events first marks, with an advisory lock
// held until it ends, the sequence's last value L it read (every seq it takes is above L); a reader takes
// the sequence's last value, then the lowest mark of the transactions still running, and reads no seq
// above either. An event at or below that horizon committed already or never will: its transaction took
// its seq before the reader's first look (so it is marked, with L below it, or has ended), and PostgreSQL
// drops a transaction's locks only once its commit is visible.
import type { Row } from './sql-connection.js';

/** The marks' namespace: the advisory lock key is NAMESPACE << 40 plus the marked seq. */
const NAMESPACE = 0x6363;
const LAST_SEQ = `coalesce(pg_sequence_last_value(pg_get_serial_sequence('audit', 'seq')::regclass), 0)`;

/** The statement that marks this transaction (once, before its first event) and wakes the audit's followers. */
export const MARK_AND_NOTIFY = `SELECT pg_notify(?, ''), pg_advisory_xact_lock_shared((${NAMESPACE}::bigint << 40) + ${LAST_SEQ})`;

/** The highest seq a cursor may read up to now. */
export async function auditHorizon(read: (sql: string) => Promise<Row[]>): Promise<number> {
  const [last] = await read(`SELECT ${LAST_SEQ} AS seq`);
  const [mark] = await read(
    `SELECT min(((classid::bigint << 32) | objid::bigint) - (${NAMESPACE}::bigint << 40)) AS seq FROM pg_locks
     WHERE locktype = 'advisory' AND objsubid = 1 AND classid::bigint >> 8 = ${NAMESPACE} AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
  );
  return Math.min(Number(last!['seq']), mark!['seq'] === null ? Infinity : Number(mark!['seq']));
}
