// One hash of everything a store holds, to check that a copy reads back as its source (`migrate-store`).
import { createHash } from 'node:crypto';
import { COLLECTIONS, type AuditEvent, type CollectionName, type Store, type StoredRecord } from '../store/types.js';

const AUDIT_PAGE = 5000;

/** JSON with every object's keys sorted: engines that reorder keys (PostgreSQL's JSONB) hash the same. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v !== null && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : v,
  );
}

/** What a digest is made of, from any source: each collection's records (hot or archived) and the audit in seq order. */
export interface DigestSource {
  records(collection: CollectionName): AsyncIterable<{ record: StoredRecord; archived: boolean }>;
  audit(): AsyncIterable<AuditEvent>;
}

export async function digestOf(source: DigestSource): Promise<string> {
  const hash = createHash('sha256');
  for (const collection of COLLECTIONS) {
    const rows: string[] = [];
    for await (const { record, archived } of source.records(collection)) rows.push(`${archived ? 'c' : 'h'}${canonicalJson(record)}`);
    rows.sort((a, b) => (a.slice(1) < b.slice(1) ? -1 : a.slice(1) > b.slice(1) ? 1 : 0));
    hash.update(`${collection}\n`);
    for (const row of rows) hash.update(`${row}\n`);
  }
  for await (const event of source.audit()) hash.update(`a${canonicalJson(event)}\n`);
  return hash.digest('hex');
}

/** Every record and audit event of a store, in a fixed order, hashed. */
export function storeDigest(store: Store): Promise<string> {
  return digestOf({
    async *records(collection) {
      for (const record of await store.list(collection)) yield { record, archived: false };
      for await (const record of store.scanArchived(collection)) yield { record, archived: true };
    },
    audit: () => allAudit(store),
  });
}

export async function* allAudit(store: Store): AsyncGenerator<AuditEvent> {
  let after = 0;
  for (;;) {
    const page = await store.audit({ afterSeq: after, limit: AUDIT_PAGE });
    if (page.length === 0) return;
    yield* page;
    after = page.at(-1)!.seq;
  }
}
