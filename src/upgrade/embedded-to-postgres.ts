// The embedded store (SQLite, or an earlier version's journal store read by legacy/journal-reader.ts)
// copied into an empty PostgreSQL database (`ccweb-gitea migrate-store` with CCWEB_DATABASE_URL): every
// record, hot and archived, under its key, and every audit event with its own seq, id and time, in one
// transaction; then read back and compared with the source before it is reported done. The embedded
// store is left as it was.
import { createPostgresSqlStore } from '../store/postgres-sql-store.js';
import { contentsDigest, sqlStoreContents, type StoreContents } from './store-contents.js';
import { COLLECTIONS, StoreError, type AuditEvent, type CollectionName, type StoredRecord } from '../store/types.js';

export interface CopySummary {
  records: Record<string, { hot: number; archived: number }>;
  auditEvents: number;
  /** The digest both stores gave for their records and audit events (they must be equal). */
  digest: string;
}

export async function copyEmbeddedStore(
  source: StoreContents,
  options: { url: string; indexes?: Partial<Record<CollectionName, string[]>>; onProgress?: (line: string) => void },
): Promise<CopySummary> {
  const target = createPostgresSqlStore({ url: options.url, ...(options.indexes ? { indexes: options.indexes } : {}) });
  await target.open();
  try {
    let held = (await target.audit({ limit: 1 })).length;
    for (const collection of COLLECTIONS) held += (await target.count(collection)) + (await target.archivedCount(collection));
    if (held > 0) throw new StoreError('database_not_empty', `${target.dir} already holds a store: migrate into an empty database`);

    const summary: CopySummary = { records: {}, auditEvents: 0, digest: '' };
    for (const collection of COLLECTIONS) summary.records[collection] = { hot: 0, archived: 0 };
    const rows: Array<{ collection: CollectionName; key: string; record: StoredRecord; archived: boolean }> = [];
    for await (const row of source.records()) {
      rows.push(row);
      summary.records[row.collection]![row.archived ? 'archived' : 'hot'] += 1;
    }
    for (const collection of COLLECTIONS) {
      const counts = summary.records[collection]!;
      options.onProgress?.(`${collection}: ${counts.hot} record(s), ${counts.archived} archived`);
    }
    const events: AuditEvent[] = [];
    for await (const event of source.audit()) events.push(event);
    summary.auditEvents = events.length;
    options.onProgress?.(`audit: ${events.length} event(s)`);
    // One transaction: a copy that fails leaves the database as empty as it was.
    await target.importRows(rows, events);

    const expected = await contentsDigest(source);
    const found = await contentsDigest(sqlStoreContents(target));
    if (expected !== found) throw new StoreError('migration_mismatch', `the copy in ${target.dir} does not read back as the source store (digest ${found.slice(0, 12)} ≠ ${expected.slice(0, 12)})`);
    summary.digest = found;
    return summary;
  } finally {
    await target.close();
  }
}
