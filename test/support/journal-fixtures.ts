// The journal stores an earlier version wrote (test/fixtures/journal-stores/, see its README), each
// with the logical content that version's own engine read from it.
import { cpSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import { COLLECTIONS, type AuditEvent, type CollectionName, type Store, type StoredRecord } from '../../src/store/types.js';

export const JOURNAL_FIXTURES = ['history', 'journal-only', 'crash-leftovers', 'old-layout'] as const;
export type JournalFixture = (typeof JOURNAL_FIXTURES)[number];

const root = join(import.meta.dirname, '../fixtures/journal-stores');

export interface StoreDump {
  /** Collection by collection (COLLECTIONS order): hot records in insertion order, then archived ones by key. */
  records: Array<{ collection: CollectionName; key: string; archived: boolean; record: StoredRecord }>;
  audit: AuditEvent[];
}

export function fixtureDir(name: JournalFixture): string {
  return join(root, name);
}

export function expectedDump(name: JournalFixture): StoreDump {
  return JSON.parse(readFileSync(join(root, `${name}.expected.json`), 'utf8')) as StoreDump;
}

/** A copy of the fixture in a new temp dir (the caller removes `parent`); `dir` is the store directory. */
export function copyFixture(name: JournalFixture, subdir = 'store'): { parent: string; dir: string } {
  const parent = mkdtempSync(join(tmpdir(), `ccweb-journal-${name}-`));
  const dir = join(parent, subdir);
  cpSync(fixtureDir(name), dir, { recursive: true });
  return { parent, dir };
}

/** Records in the dump's order, from records read in any order (hot ones keep theirs). */
export async function dumpOf(records: AsyncIterable<StoreDump['records'][number]>, audit: AsyncIterable<AuditEvent>): Promise<StoreDump> {
  const byCollection = new Map<CollectionName, { hot: StoreDump['records']; archived: StoreDump['records'] }>(COLLECTIONS.map((c) => [c, { hot: [], archived: [] }]));
  for await (const r of records) byCollection.get(r.collection)![r.archived ? 'archived' : 'hot'].push({ collection: r.collection, key: r.key, archived: r.archived, record: r.record });
  const out: StoreDump = { records: [], audit: [] };
  for (const { hot, archived } of byCollection.values()) {
    archived.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    out.records.push(...hot, ...archived);
  }
  for await (const event of audit) out.audit.push(event);
  // Through JSON, as the expected dumps were written.
  return JSON.parse(JSON.stringify(out)) as StoreDump;
}

/** `store` holds exactly the dump: each record under its key and tier, hot ones in order, the audit in seq order. */
export async function expectStoreHolds(store: Store, dump: StoreDump): Promise<void> {
  for (const collection of COLLECTIONS) {
    const of = (archived: boolean) => dump.records.filter((r) => r.collection === collection && r.archived === archived);
    expect(await store.list(collection), collection).toEqual(of(false).map((r) => r.record));
    expect(await store.archivedCount(collection), collection).toBe(of(true).length);
  }
  for (const r of dump.records) expect(await store.get(r.collection, r.key), `${r.collection} ${JSON.stringify(r.key)}`).toEqual(r.record);
  expect(await store.audit()).toEqual(dump.audit);
}
