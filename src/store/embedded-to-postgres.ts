// The embedded store (SQLite, or an earlier version's journal store) copied into an empty PostgreSQL
// database (`ccweb-gitea migrate-store` with CCWEB_DATABASE_URL): every record, hot and archived, and
// every audit event with its own seq, id and time, in one transaction; then read back and compared with
// the source before it is reported done. The embedded store is left as it was.
import { createPostgresSqlStore } from './postgres-sql-store.js';
import { allAudit, storeDigest } from './store-digest.js';
import { COLLECTIONS, StoreError, type AuditEvent, type CollectionName, type Store, type StoredRecord } from './types.js';

export interface CopySummary {
  records: Record<string, { hot: number; archived: number }>;
  auditEvents: number;
  /** The digest both stores gave for their records and audit events (they must be equal). */
  digest: string;
}

/** What the copy reads of the source: any embedded store (SQLite, or an earlier version's journal store). */
export type CopySource = Store & {
  entries(collection: CollectionName): Iterable<[string, StoredRecord, boolean]> | AsyncIterable<[string, StoredRecord, boolean]>;
};

export async function copyEmbeddedStore(
  source: CopySource,
  options: { url: string; indexes?: Partial<Record<CollectionName, string[]>>; onProgress?: (line: string) => void },
): Promise<CopySummary> {
  const target = createPostgresSqlStore({ url: options.url, ...(options.indexes ? { indexes: options.indexes } : {}) });
  await target.open();
  try {
    let held = (await target.audit({ limit: 1 })).length;
    for (const collection of COLLECTIONS) held += (await target.count(collection)) + (await target.archivedCount(collection));
    if (held > 0) throw new StoreError('database_not_empty', `${target.dir} already holds a store: migrate into an empty database`);

    const summary: CopySummary = { records: {}, auditEvents: 0, digest: '' };
    const rows: Array<{ collection: CollectionName; key: string; record: StoredRecord; archived: boolean }> = [];
    for (const collection of COLLECTIONS) {
      const counts = { hot: 0, archived: 0 };
      for await (const [key, record, archived] of source.entries(collection)) {
        rows.push({ collection, key, record, archived });
        counts[archived ? 'archived' : 'hot'] += 1;
      }
      summary.records[collection] = counts;
      options.onProgress?.(`${collection}: ${counts.hot} record(s), ${counts.archived} archived`);
    }
    const events: AuditEvent[] = [];
    for await (const event of allAudit(source)) events.push(event);
    summary.auditEvents = events.length;
    options.onProgress?.(`audit: ${events.length} event(s)`);
    // One transaction: a copy that fails leaves the database as empty as it was.
    await target.importRows(rows, events);

    const expected = await storeDigest(source);
    const found = await storeDigest(target);
    if (expected !== found) throw new StoreError('migration_mismatch', `the copy in ${target.dir} does not read back as the source store (digest ${found.slice(0, 12)} ≠ ${expected.slice(0, 12)})`);
    summary.digest = found;
    return summary;
  } finally {
    await target.close();
  }
}
