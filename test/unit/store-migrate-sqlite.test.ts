// `migrate-store` without a database URL: the journal store an earlier version wrote (the fixtures of
// test/fixtures/journal-stores/: history, archives, audit archives, derived records, crash leftovers,
// a torn last line, the layout from before indexes) moved into SQLite in place; the service refuses the
// old data until then.
import { existsSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { migrateStore } from '../../src/cli/migrate-store.js';
import { checkDataDir } from '../../src/service/startup-checks.js';
import { JOURNAL_BACKUP_DIR, migrateJournalToSqlite } from '../../src/upgrade/journal-to-sqlite.js';
import { holdsJournalStore, openJournalStore } from '../../src/upgrade/journal-reader.js';
import { createSqliteStore, SQLITE_FILE } from '../../src/store/sqlite-store.js';
import type { StoredRecord } from '../../src/store/types.js';
import { contentsDigest, sqlStoreContents } from '../../src/upgrade/store-contents.js';
import { storeFormatOf } from '../../src/upgrade/store-format.js';
import { copyFixture, expectedDump, expectStoreHolds, JOURNAL_FIXTURES } from '../support/journal-fixtures.js';
import { commandIo } from '../support/migrate-store-io.js';

const parents: string[] = [];
afterEach(() => {
  for (const parent of parents.splice(0)) rmSync(parent, { recursive: true, force: true });
});

const INDEXES = { tasks: ['state'], comments: ['taskId'] };

function fixture(name: (typeof JOURNAL_FIXTURES)[number]): { dataDir: string; dir: string } {
  const { parent, dir } = copyFixture(name);
  parents.push(parent);
  return { dataDir: parent, dir };
}

describe('migrate-store: the journal store into SQLite', () => {
  it.each(JOURNAL_FIXTURES)('%s: every record under its key and tier and every audit event, as the earlier version read them', async (name) => {
    const { dataDir, dir } = fixture(name);
    expect(() => checkDataDir(dataDir, { embedded: true })).toThrow(/holds the store of an earlier ccweb-gitea/);

    const expected = expectedDump(name);
    const result = await migrateJournalToSqlite(dir, { indexes: INDEXES });
    expect(result.records).toBe(expected.records.length);
    expect(result.auditEvents).toBe(expected.audit.length);
    expect(() => checkDataDir(dataDir, { embedded: true })).not.toThrow();

    const store = createSqliteStore({ dir, indexes: INDEXES });
    await store.open();
    try {
      await expectStoreHolds(store, expected);
      expect(await contentsDigest(sqlStoreContents(store))).toBe(result.digest);
      // New audit events continue after the migrated ones.
      const next = await store.transact((tx) => tx.appendAudit({ action: 'after', actor: 'system' }));
      expect(next.seq).toBe(expected.audit.at(-1)!.seq + 1);
    } finally {
      await store.close();
    }
  });

  it('the digest the copy is checked by covers keys: a record under another key differs', async () => {
    const { dir } = fixture('history');
    const result = await migrateJournalToSqlite(dir, { indexes: INDEXES });
    const store = createSqliteStore({ dir, indexes: INDEXES });
    await store.open();
    try {
      let hot: [string, StoredRecord] | undefined;
      for await (const [key, record, archived] of store.entries('tasks')) if (!archived) hot ??= [key, record];
      const [key, record] = hot!;
      await store.transact(async (tx) => {
        await tx.delete('tasks', key);
        await tx.insert('tasks', `${key}-elsewhere`, record);
      });
      expect(await contentsDigest(sqlStoreContents(store))).not.toBe(result.digest);
    } finally {
      await store.close();
    }
  });

  it('moves the journal files aside, leaves a checkpoint an earlier version refuses, and does not run twice', async () => {
    const { dir } = fixture('history');
    const before = readdirSync(dir).sort();
    expect(storeFormatOf(dir)).toBe('journal');
    expect(storeFormatOf(join(dir, 'nothing-here'))).toBe('none');
    await migrateJournalToSqlite(dir, { indexes: INDEXES });
    // The marker checkpoint beside store.db is not a journal store.
    expect(storeFormatOf(dir)).toBe('sqlite');
    expect(readdirSync(join(dir, JOURNAL_BACKUP_DIR)).sort()).toEqual(before);
    expect(readdirSync(dir).sort()).toEqual(['checkpoint.json', JOURNAL_BACKUP_DIR, SQLITE_FILE]);
    // An earlier version started on the directory finds a checkpoint of another format (its load refuses it).
    expect((JSON.parse(readFileSync(join(dir, 'checkpoint.json'), 'utf8')) as { format: string }).format).not.toBe('ccweb-store/1');
    expect(holdsJournalStore(dir)).toBe(true);
    await expect(openJournalStore(dir)).rejects.toThrow(/unknown format/);
    await expect(migrateJournalToSqlite(dir)).rejects.toThrow(/exists already/);
    // The backup is the journal store as it was.
    const kept = await openJournalStore(join(dir, JOURNAL_BACKUP_DIR));
    const events = [];
    for await (const e of kept.audit()) events.push(e);
    expect(events).toEqual(expectedDump('history').audit);
  });

  it('the command: moves the store, says what it copied and where the journal went; refuses a running earlier version', async () => {
    const { dataDir, dir } = fixture('crash-leftovers');
    const { io, lines } = commandIo(dataDir);
    writeFileSync(join(dir, 'LOCK'), String(process.ppid));
    expect(await migrateStore(io)).toBe(1);
    expect(lines.at(-1)).toBe(`ERR migrate-store: the service is running on this data directory (store ${dir} is in use by process ${process.ppid}); stop it first`);
    rmSync(join(dir, 'LOCK'));
    const expected = expectedDump('crash-leftovers');
    expect(await migrateStore(io)).toBe(0);
    expect(lines.filter((l) => l.startsWith('done:'))).toEqual([
      expect.stringMatching(new RegExp(`^done: ${expected.records.length} record\\(s\\) and ${expected.audit.length} audit event\\(s\\) copied and compared \\(digest [0-9a-f]{16}\\)$`)),
    ]);
    expect(lines.at(-1)).toBe(`the journal's files are kept in ${join(dir, JOURNAL_BACKUP_DIR)}: delete them once the service runs`);
    expect(() => checkDataDir(dataDir, { embedded: true })).not.toThrow();
  });

  // A crash while the journal's files moved aside: store.db (renamed only once checked) with part of
  // the journal beside it and no marker. The re-run finishes the move instead of "exists already".
  it.each([
    ['right after store.db took its name', 0],
    ['half way through the moves', 6],
    ['after the moves, before the marker', Number.POSITIVE_INFINITY],
  ])('a move interrupted %s is finished by running migrate-store again', async (_when, movedBeforeCrash) => {
    const { dataDir, dir } = fixture('history');
    const before = readdirSync(dir).sort();
    await migrateJournalToSqlite(dir, { indexes: INDEXES });
    // Back to the state the crash left.
    const backup = join(dir, JOURNAL_BACKUP_DIR);
    rmSync(join(dir, 'checkpoint.json'));
    for (const name of readdirSync(backup).sort().slice(Math.min(movedBeforeCrash, before.length))) renameSync(join(backup, name), join(dir, name));
    if (movedBeforeCrash === 0) rmSync(backup, { recursive: true });
    expect(storeFormatOf(dir)).toBe('sqlite');
    const { io, lines } = commandIo(dataDir);
    expect(await migrateStore(io)).toBe(0);
    expect(lines).toContain(`done: ${before.length - Math.min(movedBeforeCrash, before.length)} file(s) moved`);
    expect(readdirSync(dir).sort()).toEqual(['checkpoint.json', JOURNAL_BACKUP_DIR, SQLITE_FILE]);
    expect(readdirSync(backup).sort()).toEqual(before);
    await expect(openJournalStore(dir)).rejects.toThrow(/unknown format/);
    const events = [];
    for await (const e of (await openJournalStore(backup)).audit()) events.push(e);
    expect(events).toEqual(expectedDump('history').audit);
    // Done now: a third run has nothing to do.
    expect(await migrateStore(io)).toBe(1);
    expect(lines.at(-1)).toBe(`ERR migrate-store: ${join(dir, SQLITE_FILE)} exists already: nothing to migrate`);
  });

  it('refuses while a live process holds the directory (an earlier version still running), changing nothing', async () => {
    const { dir } = fixture('journal-only');
    // The parent process is alive and is not this one: the lock is taken.
    writeFileSync(join(dir, 'LOCK'), String(process.ppid));
    await expect(migrateJournalToSqlite(dir)).rejects.toMatchObject({ code: 'store_locked' });
    expect(existsSync(join(dir, SQLITE_FILE))).toBe(false);
    expect(readdirSync(dir).sort()).toEqual(['LOCK', 'journal-0000000000000001.ndjson']);
  });

  it('a corrupt journal stops the move before anything is renamed', async () => {
    const { dir } = fixture('journal-only');
    const file = join(dir, 'journal-0000000000000001.ndjson');
    writeFileSync(file, readFileSync(file, 'utf8').replace('"seq":3', '"seq":33'));
    await expect(migrateJournalToSqlite(dir)).rejects.toThrow(/corrupt at line 3: seq 33 does not follow 2/);
    expect(readdirSync(dir)).toEqual(['journal-0000000000000001.ndjson']);
  });
});
