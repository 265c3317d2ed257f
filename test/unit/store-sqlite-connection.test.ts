// The SQLite connection's group commit when SQLite itself ends the write transaction mid-batch. The full
// disk is real: SQLite's own page limit (max_page_count), not a double.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SqliteConnection } from '../../src/store/sql/sqlite-connection.js';
import { StoreUnavailableError } from '../../src/store/types.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function open(file: string, failures: Error[] = []): SqliteConnection {
  return new SqliteConnection({ file, onFailure: (e) => void failures.push(e) });
}

describe('SQLite connection: a batch SQLite rolled back', () => {
  it('a full disk in one body fails the whole batch and every later transaction; nothing of it is on disk after a reopen', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ccweb-sqlite-conn-'));
    dirs.push(dir);
    const file = join(dir, 'store.db');
    const failures: Error[] = [];
    const conn = open(file, failures);
    await conn.transaction((s) => s.run('CREATE TABLE t (k TEXT PRIMARY KEY, v TEXT)'));
    const pages = Number((await conn.read('PRAGMA page_count'))[0]!['page_count']);
    await conn.transaction((s) => s.all(`PRAGMA max_page_count = ${pages + 4}`));

    const insert = (k: string, bytes: number) => conn.transaction(async (s) => s.run('INSERT INTO t (k, v) VALUES (?, ?)', [k, 'x'.repeat(bytes)]));
    // One event-loop turn: the three bodies share one batch.
    const q1 = insert('q1', 10);
    const q2 = insert('q2', 400_000);
    const q3 = insert('q3', 10);
    const [r1, r2, r3] = await Promise.allSettled([q1, q2, q3]);

    expect(r2.status).toBe('rejected');
    expect(String((r2 as PromiseRejectedResult).reason)).toMatch(/full/i);
    for (const r of [r1, r3]) {
      expect(r.status).toBe('rejected');
      expect((r as PromiseRejectedResult).reason).toBeInstanceOf(StoreUnavailableError);
    }
    expect(failures).toHaveLength(1);
    await expect(insert('q4', 10)).rejects.toBeInstanceOf(StoreUnavailableError);
    await conn.close();

    const again = open(file);
    expect(await again.read('SELECT k FROM t ORDER BY k')).toEqual([]);
    await again.close();
  });

  it('a body that throws by itself rolls back only its own writes; the batch commits the others', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ccweb-sqlite-conn-'));
    dirs.push(dir);
    const file = join(dir, 'store.db');
    const failures: Error[] = [];
    const conn = open(file, failures);
    await conn.transaction((s) => s.run('CREATE TABLE t (k TEXT PRIMARY KEY, v TEXT)'));
    const q1 = conn.transaction(async (s) => s.run('INSERT INTO t (k, v) VALUES (?, ?)', ['q1', 'a']));
    const q2 = conn.transaction(async (s) => {
      await s.run('INSERT INTO t (k, v) VALUES (?, ?)', ['q2', 'b']);
      throw new Error('changed its mind');
    });
    const q3 = conn.transaction(async (s) => s.run('INSERT INTO t (k, v) VALUES (?, ?)', ['q3', 'c']));
    const [r1, r2, r3] = await Promise.allSettled([q1, q2, q3]);
    expect([r1.status, r2.status, r3.status]).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(failures).toEqual([]);
    await conn.close();
    const again = open(file);
    expect((await again.read('SELECT k FROM t ORDER BY k')).map((r) => r['k'])).toEqual(['q1', 'q3']);
    await again.close();
  });
});
