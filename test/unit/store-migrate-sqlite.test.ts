// `migrate-store` without a database URL: the journal store of an earlier version, with history, archived
// records and archived audit events, moved into SQLite in place; the service refuses the old data until then.
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { DurableStore } from '../../src/store/durable-store.js';
import { holdsJournalStore, JOURNAL_BACKUP_DIR, migrateJournalToSqlite, refuseJournalStore } from '../../src/store/journal-to-sqlite.js';
import { storeDigest } from '../../src/store/store-digest.js';
import { createSqliteStore, SQLITE_FILE } from '../../src/store/sqlite-store.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

const INDEXES = { tasks: ['state'], comments: ['taskId'] };

/** A journal store with updates, deletes, archived records and audit events in archives and in the journal. */
async function journalStoreWithHistory(): Promise<{ dir: string; digest: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'ccweb-migrate-'));
  dirs.push(dir);
  const store = new DurableStore({ dir, indexes: INDEXES, segmentBytes: 4096 });
  await store.open();
  for (let i = 0; i < 60; i++) {
    await store.transact(async (tx) => {
      await tx.insert('tasks', `t${i}`, { taskId: `t${i}`, state: 'queued', stateVersion: 1, text: 'é😀'.repeat(i % 5) });
      await tx.insert('comments', `c${i}`, { taskId: `t${i}`, kind: 'status' });
      await tx.appendAudit({ action: 'task.create', actor: 'system', taskId: `t${i}`, deliveryId: `d${i % 7}`, ...(i % 3 === 0 ? { level: 'alert' as const } : {}) });
    });
  }
  for (let i = 0; i < 60; i += 2) {
    await store.transact((tx) => tx.put('tasks', `t${i}`, { taskId: `t${i}`, state: 'succeeded', stateVersion: 1 }, { expectVersion: 1, versionField: 'stateVersion' }));
  }
  for (let i = 0; i < 20; i += 2) {
    await store.transact(async (tx) => {
      await tx.archive('tasks', `t${i}`);
      await tx.archive('comments', `c${i}`);
    });
  }
  await store.transact((tx) => tx.delete('tasks', 't59'));
  await store.compact(); // archived records into a cold file, the audit so far into an archive
  for (let i = 60; i < 70; i++) await store.transact((tx) => tx.appendAudit({ action: 'late', actor: 'system', taskId: `t${i}` }));
  const digest = await storeDigest(store);
  await store.close();
  return { dir, digest };
}

describe('migrate-store: the journal store into SQLite', () => {
  it('copies every record, archived flag and audit event; the service opens the result; the journal files step aside', async () => {
    const { dir, digest } = await journalStoreWithHistory();
    expect(holdsJournalStore(dir)).toBe(true);
    expect(() => refuseJournalStore(dir)).toThrow(/holds the store of an earlier ccweb-gitea .*run `ccweb-gitea migrate-store` once/);

    const result = await migrateJournalToSqlite(dir, { indexes: INDEXES });
    expect(result.digest).toBe(digest);
    expect(result.auditEvents).toBe(70);
    expect(result.records).toBe(59 + 60);
    expect(existsSync(join(dir, SQLITE_FILE))).toBe(true);
    expect(() => refuseJournalStore(dir)).not.toThrow();
    // An earlier version started on the directory refuses it rather than starting an empty store.
    await expect(new DurableStore({ dir }).open()).rejects.toThrow(/has an unknown format/);
    expect(readdirSync(join(dir, JOURNAL_BACKUP_DIR)).some((name) => name === 'checkpoint.json')).toBe(true);

    const store = createSqliteStore({ dir, indexes: INDEXES });
    await store.open();
    try {
      expect(await storeDigest(store)).toBe(digest);
      expect(await store.get('tasks', 't0')).toEqual({ taskId: 't0', state: 'succeeded', stateVersion: 2 });
      expect(await store.archivedCount('tasks')).toBe(10);
      expect(await store.get('tasks', 't59')).toBeUndefined();
      expect((await store.byIndex<{ taskId: string }>('tasks', 'state', 'succeeded')).map((t) => t.taskId)).toEqual(
        Array.from({ length: 20 }, (_, k) => `t${20 + 2 * k}`),
      );
      expect((await store.audit({ level: 'alert' })).length).toBe(20);
      // New audit events continue after the migrated ones.
      const next = await store.transact((tx) => tx.appendAudit({ action: 'after', actor: 'system' }));
      expect(next.seq).toBe(71);
    } finally {
      await store.close();
    }
    await expect(migrateJournalToSqlite(dir)).rejects.toThrow(/exists already/);
  });
});
