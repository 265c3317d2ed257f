// What a store holds, as `migrate-store` copies it and then compares the copy with its source: every
// record with its key and tier, and every audit event in seq order. The digest of two stores is equal
// when they hold the same records under the same keys in each collection and tier (in any order) and
// the same audit.
import { createHash } from 'node:crypto';
import type { SqlStore } from '../store/sql/sql-store.js';
import { canonicalJson } from './store-digest.js';
import { COLLECTIONS, type AuditEvent, type CollectionName, type Store, type StoredRecord } from '../store/types.js';

export interface StoreRow {
  collection: CollectionName;
  key: string;
  archived: boolean;
  record: StoredRecord;
}

export interface StoreContents {
  records(): AsyncIterable<StoreRow>;
  audit(): AsyncIterable<AuditEvent>;
}

const AUDIT_PAGE = 5000;
const PER_TRANSACTION = 2000;
const MOD = 1n << 256n;

async function* allAudit(store: Store): AsyncGenerator<AuditEvent> {
  for (let after = 0; ; ) {
    const page = await store.audit({ afterSeq: after, limit: AUDIT_PAGE });
    if (page.length === 0) return;
    yield* page;
    after = page.at(-1)!.seq;
  }
}

/** The contents of an embedded (SQLite) store, read a page at a time. */
export function sqlStoreContents(store: SqlStore): StoreContents {
  return {
    async *records() {
      for (const collection of COLLECTIONS) {
        for await (const [key, record, archived] of store.entries(collection)) yield { collection, key, archived, record };
      }
    },
    audit: () => allAudit(store),
  };
}

/** Writes every record and audit event of `source` into `target` (empty), a transaction per 2,000. */
export async function importContents(target: SqlStore, source: StoreContents, onProgress?: (line: string) => void): Promise<{ records: number; auditEvents: number }> {
  let records = 0;
  let rows: StoreRow[] = [];
  for await (const row of source.records()) {
    rows.push(row);
    if (rows.length >= PER_TRANSACTION) {
      await target.importRows(rows, []);
      records += rows.length;
      rows = [];
    }
  }
  await target.importRows(rows, []);
  records += rows.length;
  onProgress?.(`records: ${records} copied`);
  let auditEvents = 0;
  let events: AuditEvent[] = [];
  for await (const event of source.audit()) {
    events.push(event);
    if (events.length >= PER_TRANSACTION) {
      await target.importRows([], events);
      auditEvents += events.length;
      events = [];
      onProgress?.(`audit: ${auditEvents} event(s) copied`);
    }
  }
  await target.importRows([], events);
  auditEvents += events.length;
  onProgress?.(`audit: ${auditEvents} event(s) copied`);
  return { records, auditEvents };
}

/**
 * A digest of records and audit events. Records are summed (each row's SHA-256 as a number, modulo
 * 2^256), so their order does not matter and nothing is held to sort them; audit events are hashed in
 * seq order. Each row's hash covers its key: a copy that put a record under another key differs.
 */
export async function contentsDigest(contents: StoreContents): Promise<string> {
  let sum = 0n;
  for await (const row of contents.records()) {
    // Canonical JSON: PostgreSQL's JSONB gives an object's keys back in its own order.
    const h = createHash('sha256').update(`${row.collection}\n${JSON.stringify(row.key)}\n${row.archived ? 'c' : 'h'}${canonicalJson(row.record)}`).digest('hex');
    sum = (sum + BigInt(`0x${h}`)) % MOD;
  }
  const hash = createHash('sha256').update(`${sum.toString(16)}\n`);
  for await (const event of contents.audit()) hash.update(`a${canonicalJson(event)}\n`);
  return hash.digest('hex');
}
