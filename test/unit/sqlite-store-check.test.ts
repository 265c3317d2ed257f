// A store file this version cannot use is named before anything opens it for writing
// (src/service/sqlite-store-check.ts), and the store's own open says the same if asked anyway.
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { STORE_INDEXES } from '../../src/domain/records.js';
import { createStore } from '../../src/store/index.js';
import { SCHEMA_VERSION } from '../../src/store/sql/schema.js';
import { sqliteBinding } from '../../src/store/sql/sqlite-driver.js';
import { sqliteStoreProblem } from '../../src/service/sqlite-store-check.js';
import { StoreError } from '../../src/store/types.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
function storeDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'ccweb-store-check-'));
  dirs.push(d);
  return d;
}
async function writtenStore(dir: string): Promise<string> {
  const store = createStore({ dir, indexes: STORE_INDEXES });
  await store.open();
  await store.transact((tx) => tx.insert('tasks', 't1', { state: 'queued' }));
  await store.close();
  return join(dir, 'store.db');
}

describe('a store file this version cannot use', () => {
  it('a store this version wrote, and an empty file, are fine; the check leaves no -wal or -shm behind', async () => {
    const file = await writtenStore(storeDir());
    expect(sqliteStoreProblem(file)).toBeNull();
    expect([existsSync(`${file}-wal`), existsSync(`${file}-shm`)]).toEqual([false, false]);
    const empty = join(storeDir(), 'store.db');
    writeFileSync(empty, '');
    expect(sqliteStoreProblem(empty)).toBeNull();
  });

  it('another file in its place is not a SQLite database; the store refuses to open it with the same code', async () => {
    const dir = storeDir();
    const file = join(dir, 'store.db');
    writeFileSync(file, 'a text file copied over the store\n'.repeat(100));
    expect(sqliteStoreProblem(file)).toEqual({ code: 'store_unreadable', problem: `${file} is not a SQLite database` });
    const store = createStore({ dir, indexes: STORE_INDEXES });
    const error = await store.open().then(() => null, (e: unknown) => e);
    expect(error).toBeInstanceOf(StoreError);
    expect((error as StoreError).code).toBe('store_unreadable');
    // Nothing was written to it.
    expect(readFileSync(file, 'utf8')).toBe('a text file copied over the store\n'.repeat(100));
  });

  it('a store a newer version wrote names both schema numbers; the store refuses to open it with the same code', async () => {
    const dir = storeDir();
    const file = await writtenStore(dir);
    const db = sqliteBinding().open(file, { readonly: false });
    db.prepare(`UPDATE store_meta SET value = ? WHERE name = 'schema'`).run(String(SCHEMA_VERSION + 1));
    db.close();
    expect(sqliteStoreProblem(file)).toEqual({
      code: 'store_schema_too_new',
      problem: `${file} has store schema ${SCHEMA_VERSION + 1}, written by a newer ccweb-gitea (this one knows ${SCHEMA_VERSION})`,
    });
    const store = createStore({ dir, indexes: STORE_INDEXES });
    const error = await store.open().then(() => null, (e: unknown) => e);
    expect((error as StoreError).code).toBe('store_schema_too_new');
  });
});
