// Moving an embedded store into an empty PostgreSQL database (`ccweb-gitea migrate-store`): every
// record, hot and archived, and every audit event with its own seq, written as log lines through
// the same writer a node uses, so the database ends up as if it had always been the store. The copy
// is then read back through a fresh replica and compared with the source before it is reported done.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Op } from '../memory-state.js';
import { storeDigest, unkeyedContentsDigest, type StoreContents } from '../store-contents.js';
import { COLLECTIONS, StoreError } from '../types.js';
import { databaseClient, unreachable } from './client.js';
import { describeDatabase } from './database-url.js';
import { LogWriter } from './log-writer.js';
import { PostgresStore } from './postgres-store.js';
import { migrate } from './schema.js';

export interface CopySummary {
  records: Record<string, { hot: number; archived: number }>;
  auditEvents: number;
  logLines: number;
  /** The digest both stores gave for their records and audit events (they must be equal). */
  digest: string;
}

const OPS_PER_LINE = 500;

/** Copies `source` (the embedded store: SQLite, or an earlier version's journal store) into an empty database. */
export async function copyEmbeddedStore(
  source: StoreContents,
  options: { url: string; nodeId: string; version: string; onProgress?: (line: string) => void },
): Promise<CopySummary> {
  const where = describeDatabase(options.url);
  const client = databaseClient(options.url);
  await client.connect().catch((error: unknown) => {
    throw unreachable(where, error);
  });
  try {
    await migrate(client);
    const { rows } = await client.query<{ seq: string }>('SELECT seq FROM ccweb_head WHERE id = 1');
    if (Number(rows[0]!.seq) !== 0) {
      throw new StoreError('database_not_empty', `${where} already holds a store (its log is at seq ${rows[0]!.seq}): migrate into an empty database`);
    }
  } finally {
    await client.end().catch(() => undefined);
  }

  const writer = new LogWriter({ url: options.url, nodeId: options.nodeId, version: options.version, outageMs: 60_000 });
  await writer.open();
  const summary: CopySummary = { records: {}, auditEvents: 0, logLines: 0, digest: '' };
  let seq = 0;
  let ops: Op[] = [];
  let inFlight: Promise<void>[] = [];
  const flush = async (force: boolean) => {
    if (ops.length === 0 || (!force && ops.length < OPS_PER_LINE)) return;
    seq += 1;
    // The journal line's text has no fresh-insert flag (Transaction.line writes four fields).
    const line = JSON.stringify({ seq, ops: ops.map((op) => (op[0] === 'p' || op[0] === 'c' ? op.slice(0, 4) : op)) });
    inFlight.push(writer.append({ seq, ops, line, expectations: [] }));
    ops = [];
    summary.logLines += 1;
    if (inFlight.length >= 16) {
      await Promise.all(inFlight);
      inFlight = [];
    }
  };
  try {
    for (const collection of COLLECTIONS) summary.records[collection] = { hot: 0, archived: 0 };
    for await (const { collection, key, record, archived } of source.records()) {
      ops.push([archived ? 'c' : 'p', collection, key, record, true] as Op);
      summary.records[collection]![archived ? 'archived' : 'hot'] += 1;
      await flush(false);
    }
    for (const collection of COLLECTIONS) {
      const counts = summary.records[collection]!;
      options.onProgress?.(`${collection}: ${counts.hot} record(s), ${counts.archived} archived`);
    }
    for await (const event of source.audit()) {
      ops.push(['a', event]);
      summary.auditEvents += 1;
      await flush(false);
    }
    await flush(true);
    await Promise.all(inFlight);
    options.onProgress?.(`audit: ${summary.auditEvents} event(s); ${summary.logLines} log line(s) written`);
  } finally {
    await writer.close();
  }

  // Read back through a replica, as a node would, and compare.
  const dir = await mkdtemp(join(tmpdir(), 'ccweb-migrate-check-'));
  const check = new PostgresStore({ dir: join(dir, 'replica'), url: options.url, nodeId: options.nodeId, version: options.version });
  try {
    await check.open();
    // The replica's reads give records without keys: the digest without them is what both can give.
    const expected = await unkeyedContentsDigest(source);
    const found = await storeDigest(check);
    if (expected !== found) throw new StoreError('migration_mismatch', `the copy in ${where} does not read back as the source store (digest ${found.slice(0, 12)} ≠ ${expected.slice(0, 12)})`);
    summary.digest = found;
  } finally {
    await check.close().catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  }
  return summary;
}
