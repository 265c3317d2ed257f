import { appendFile, readFile, readdir, writeFile, copyFile, stat, mkdir } from 'node:fs/promises';
import { execa } from 'execa';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  JournalCorruptionError,
  StoreUnavailableError,
  UniqueViolationError,
  VersionConflictError,
  type AuditEvent,
} from '../../src/store/index.js';
import { onPostgres, storeDirs } from '../support/store-helpers.js';

const env = storeDirs();
afterEach(() => env.cleanup());

const INDEXES = { tasks: ['repoKey', 'state'], webhook_deliveries: ['taskId'] };

async function journalText(dir: string): Promise<string> {
  const names = (await readdir(dir)).filter((n) => n.startsWith('journal-')).sort();
  let text = '';
  for (const name of names) text += await readFile(join(dir, name), 'utf8');
  return text;
}

function expectUniqueSeqs(events: AuditEvent[]) {
  const seqs = events.map((e) => e.seq);
  expect(new Set(seqs).size).toBe(seqs.length);
  expect([...seqs].sort((a, b) => a - b)).toEqual(seqs);
  expect(new Set(events.map((e) => e.eventId)).size).toBe(events.length);
}

/** On PostgreSQL the replica is only a cache: one that cannot be read is rebuilt from the database's log. */
async function expectRebuiltReplica(dir: string, keys: string[]): Promise<void> {
  const rebuilt = await env.open({ dir });
  expect(rebuilt.list('tasks').length).toBe(keys.length);
  for (const key of keys) expect(rebuilt.get('tasks', key)).toEqual({});
  expect((rebuilt as unknown as { rebuiltBecause?: string }).rebuiltBecause).toMatch(/could not be read/);
}

describe('store transactions', () => {
  it('rejects a duplicate insert with UniqueViolationError and applies nothing', async () => {
    const store = await env.open({ dir: await env.dir() });
    await store.transact((tx) => tx.insert('tasks', 'a', { n: 1 }));
    const error = await store.transact((tx) => tx.insert('tasks', 'a', { n: 2 })).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UniqueViolationError);
    expect((error as UniqueViolationError).code).toBe('unique_violation');
    expect(store.get('tasks', 'a')).toEqual({ n: 1 });
  });

  it('compare-and-swap: increments the version on success, throws VersionConflictError on mismatch', async () => {
    const store = await env.open({ dir: await env.dir() });
    await store.transact((tx) => tx.insert('tasks', 't', { state: 'queued', stateVersion: 1 }));
    await store.transact((tx) => tx.insert('control', 'c', { paused: false, version: 4 }));

    const stored = await store.transact((tx) =>
      tx.put('tasks', 't', { state: 'running', stateVersion: 999 }, { expectVersion: 1, versionField: 'stateVersion' }),
    );
    expect(stored).toEqual({ state: 'running', stateVersion: 2 });
    expect(store.get('tasks', 't')).toEqual({ state: 'running', stateVersion: 2 });

    const conflict = await store
      .transact((tx) => tx.put('tasks', 't', { state: 'done' }, { expectVersion: 1, versionField: 'stateVersion' }))
      .catch((e: unknown) => e);
    expect(conflict).toBeInstanceOf(VersionConflictError);
    expect(conflict).toMatchObject({ expected: 1, actual: 2, collection: 'tasks', key: 't' });
    expect(store.get('tasks', 't')).toEqual({ state: 'running', stateVersion: 2 });

    await store.transact((tx) => tx.put('control', 'c', { paused: true }, { expectVersion: 4 }));
    expect(store.get('control', 'c')).toEqual({ paused: true, version: 5 });
    // An absent record never matches a CAS.
    await expect(store.transact((tx) => tx.put('control', 'nope', {}, { expectVersion: 0 }))).rejects.toBeInstanceOf(
      VersionConflictError,
    );
  });

  it('is atomic: a throw mid-fn applies nothing and writes no journal line', async () => {
    const dir = await env.dir();
    const store = await env.open({ dir, indexes: INDEXES });
    await store.transact((tx) => tx.insert('tasks', 'keep', { state: 'queued' }));
    const before = await journalText(dir);
    const auditBefore = store.audit().length;

    const boom = new Error('boom');
    await expect(
      store.transact((tx) => {
        tx.insert('tasks', 'new', { state: 'queued' });
        tx.put('tasks', 'keep', { state: 'running' });
        tx.delete('tasks', 'keep');
        tx.appendAudit({ action: 'x', actor: 'system' });
        throw boom;
      }),
    ).rejects.toBe(boom);
    await store.sync();

    expect(store.get('tasks', 'new')).toBeUndefined();
    expect(store.get('tasks', 'keep')).toEqual({ state: 'queued' });
    expect(store.byIndex('tasks', 'state', 'running')).toEqual([]);
    expect(store.audit().length).toBe(auditBefore);
    expect(await journalText(dir)).toBe(before);
    expect(store.stats().commits).toBe(1);

    // The next audit event gets the next seq: the aborted one never existed.
    await store.transact((tx) => tx.appendAudit({ action: 'y', actor: 'system' }));
    expect(store.audit().map((e) => e.seq)).toEqual([1]);
  });

  it('rejects an async fn without applying anything', async () => {
    const store = await env.open({ dir: await env.dir() });
    await expect(
      store.transact(async (tx) => {
        tx.insert('tasks', 'a', {});
      }),
    ).rejects.toThrow(/synchronous/);
    expect(store.get('tasks', 'a')).toBeUndefined();
  });

  it('50 concurrent inserts of the same key: exactly one succeeds', async () => {
    const store = await env.open({ dir: await env.dir() });
    const results = await Promise.allSettled(
      Array.from({ length: 50 }, (_, i) =>
        store.transact((tx) => {
          tx.insert('webhook_deliveries', 'delivery-1', { winner: i });
          tx.appendAudit({ action: 'webhook.accept', actor: 'system', deliveryId: 'delivery-1' });
          return i;
        }),
      ),
    );
    const ok = results.filter((r) => r.status === 'fulfilled');
    expect(ok).toHaveLength(1);
    for (const r of results) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(UniqueViolationError);
    expect(store.get('webhook_deliveries', 'delivery-1')).toEqual({ winner: (ok[0] as PromiseFulfilledResult<number>).value });
    expect(store.audit({ deliveryId: 'delivery-1' })).toHaveLength(1);
  });

  it('group-commits concurrent transactions into few batches', async () => {
    const store = await env.open({ dir: await env.dir() });
    await Promise.all(Array.from({ length: 100 }, (_, i) => store.transact((tx) => tx.insert('turns', `t${i}`, { i }))));
    expect(store.stats().commits).toBe(100);
    expect(store.stats().batches).toBeLessThan(10);
  });

  it('tx reads its own writes; read-only transactions resolve without a journal line', async () => {
    const dir = await env.dir();
    const store = await env.open({ dir });
    const seen = await store.transact((tx) => {
      tx.insert('sessions', 's', { v: 1 });
      const a = tx.get('sessions', 's');
      tx.delete('sessions', 's');
      return [a, tx.get('sessions', 's')];
    });
    expect(seen).toEqual([{ v: 1 }, undefined]);
    const lines = (await journalText(dir)).split('\n').filter(Boolean).length;
    expect(await store.transact((tx) => tx.get('sessions', 's'))).toBeUndefined();
    expect((await journalText(dir)).split('\n').filter(Boolean).length).toBe(lines);
  });

  it('returns frozen records, decoupled from the caller object', async () => {
    const store = await env.open({ dir: await env.dir() });
    const input = { nested: { a: 1 }, list: [1, 2] };
    const stored = await store.transact((tx) => tx.insert('tasks', 'f', input));
    input.nested.a = 2;
    expect(store.get('tasks', 'f')).toEqual({ nested: { a: 1 }, list: [1, 2] });
    const got = store.get<{ nested: { a: number }; list: number[] }>('tasks', 'f')!;
    // Within a transaction `insert` hands back the value as written; the stored, frozen record is
    // what the serialized journal text parses to (several writes of one key are serialized once).
    expect(got).toEqual({ nested: { a: 1 }, list: [1, 2] });
    expect(stored).toBeDefined();
    expect(() => {
      got.nested.a = 3;
    }).toThrow(TypeError);
    expect(() => got.list.push(3)).toThrow(TypeError);
  });

  it('maintains secondary indexes on insert/put/delete, in insertion order', async () => {
    const store = await env.open({ dir: await env.dir(), indexes: INDEXES });
    await store.transact((tx) => {
      for (const [key, state] of [['a', 'queued'], ['b', 'running'], ['c', 'queued'], ['d', 'queued']] as const) {
        tx.insert('tasks', key, { repoKey: 'r1', state });
      }
    });
    const keys = (state: string) => store.byIndex<{ k?: string }>('tasks', 'state', state).map((r) => store.list('tasks').indexOf(r));
    expect(keys('queued')).toEqual([0, 2, 3]);
    await store.transact((tx) => tx.put('tasks', 'a', { repoKey: 'r1', state: 'running' }));
    expect(keys('running')).toEqual([0, 1]);
    expect(keys('queued')).toEqual([2, 3]);
    await store.transact((tx) => tx.put('tasks', 'a', { repoKey: 'r1', state: 'queued' }));
    expect(keys('queued')).toEqual([0, 2, 3]); // insertion order, not re-index order
    await store.transact((tx) => tx.delete('tasks', 'c'));
    expect(store.byIndex('tasks', 'state', 'queued')).toHaveLength(2);
    expect(store.byIndex('tasks', 'repoKey', 'r1')).toHaveLength(3);
    expect(store.byIndex('tasks', 'state', 'nothing')).toEqual([]);
    expect(store.byIndex('tasks', 'repoKey', 'r1')).toEqual(store.list('tasks'));
    // Unindexed field: answered by a scan.
    await store.transact((tx) => tx.insert('turns', 'u', { n: 1 }));
    expect(store.byIndex('turns', 'n', 1)).toEqual([{ n: 1 }]);
    expect(store.byIndex('turns', 'n', 2)).toEqual([]);
  });

  it('queries audit events by task, delivery, actor, time range, afterSeq and limit', async () => {
    const store = await env.open({ dir: await env.dir() });
    await store.transact((tx) => {
      tx.appendAudit({ action: 'webhook.accept', actor: 'system', deliveryId: 'd1', taskId: 't1' });
      tx.appendAudit({ action: 'task.transition', actor: 'system', taskId: 't1', actorId: 'task:t1' });
      tx.appendAudit({ action: 'task.transition', actor: 'system', taskId: 't2', actorId: 'task:t2' });
      tx.appendAudit({ action: 'lock', actor: 'system', actorId: 'task:t1' });
    });
    const all = store.audit();
    expect(all.map((e) => e.seq)).toEqual([1, 2, 3, 4]);
    expectUniqueSeqs(all);
    expect(all[0]!.eventId).toMatch(/^audit-/);
    expect(all[0]!.timestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(store.audit({ taskId: 't1' }).map((e) => e.seq)).toEqual([1, 2]);
    expect(store.audit({ deliveryId: 'd1' }).map((e) => e.seq)).toEqual([1]);
    expect(store.audit({ actorId: 'task:t1' }).map((e) => e.seq)).toEqual([2, 4]);
    expect(store.audit({ actorId: 'task:t1', taskId: 't1' }).map((e) => e.seq)).toEqual([2]);
    expect(store.audit({ afterSeq: 2 }).map((e) => e.seq)).toEqual([3, 4]);
    expect(store.audit({ afterSeq: 1, limit: 2 }).map((e) => e.seq)).toEqual([2, 3]);
    expect(store.audit({ from: '2999-01-01T00:00:00.000Z' })).toEqual([]);
    expect(store.audit({ to: '2000-01-01T00:00:00.000Z' })).toEqual([]);
    expect(store.audit({ from: all[0]!.timestamp, to: all[3]!.timestamp })).toHaveLength(4);
    expect(store.audit({ taskId: 'missing' })).toEqual([]);
  });
});

describe('store durability', () => {
  it('reopen restores records, order, indexes and audit events', async () => {
    const dir = await env.dir();
    const store = await env.open({ dir, indexes: INDEXES });
    for (let i = 0; i < 20; i++) {
      await store.transact((tx) => {
        tx.insert('tasks', `t${i}`, { repoKey: `r${i % 3}`, state: 'queued', stateVersion: 1 });
        tx.appendAudit({ action: 'task.create', actor: 'system', taskId: `t${i}` });
      });
    }
    await store.transact((tx) => tx.put('tasks', 't3', { repoKey: 'r0', state: 'running', stateVersion: 1 }, { expectVersion: 1, versionField: 'stateVersion' }));
    await store.transact((tx) => tx.delete('tasks', 't4'));
    const snapshot = { tasks: store.list('tasks'), audit: store.audit(), running: store.byIndex('tasks', 'state', 'running') };
    await store.close();

    const again = await env.open({ dir, indexes: INDEXES });
    expect(again.list('tasks')).toEqual(snapshot.tasks);
    expect(again.audit()).toEqual(snapshot.audit);
    expect(again.byIndex('tasks', 'state', 'running')).toEqual(snapshot.running);
    expect(again.byIndex('tasks', 'repoKey', 'r1')).toHaveLength(6); // 7 minus deleted t4
    await again.transact((tx) => tx.appendAudit({ action: 'next', actor: 'system' }));
    expect(again.audit().at(-1)!.seq).toBe(21);
  });

  it('drops a torn last journal line and keeps working', async () => {
    const dir = await env.dir();
    const store = await env.open({ dir });
    await store.transact((tx) => tx.insert('tasks', 'a', { v: 1 }));
    await store.transact((tx) => tx.insert('tasks', 'b', { v: 2 }));
    await store.close();
    const [segment] = (await readdir(dir)).filter((n) => n.startsWith('journal-'));
    const file = join(dir, segment!);
    const goodSize = (await stat(file)).size;
    await appendFile(file, '{"seq":3,"ops":[["p","tasks","c",{"v":');

    const again = await env.open({ dir });
    expect(again.list('tasks')).toEqual([{ v: 1 }, { v: 2 }]);
    expect((await stat(file)).size).toBe(goodSize);
    await again.transact((tx) => tx.insert('tasks', 'c', { v: 3 }));
    await again.close();
    const third = await env.open({ dir });
    expect(third.list('tasks')).toEqual([{ v: 1 }, { v: 2 }, { v: 3 }]);
  });

  it('drops a torn tail of zero bytes (file extended, data not written)', async () => {
    const dir = await env.dir();
    const store = await env.open({ dir });
    await store.transact((tx) => tx.insert('tasks', 'a', { v: 1 }));
    await store.close();
    const [segment] = (await readdir(dir)).filter((n) => n.startsWith('journal-'));
    await appendFile(join(dir, segment!), Buffer.alloc(300));
    const again = await env.open({ dir });
    expect(again.list('tasks')).toEqual([{ v: 1 }]);
  });

  it('refuses to open a journal corrupted before its last line, naming file and line', async () => {
    const dir = await env.dir();
    const store = await env.open({ dir });
    for (let i = 0; i < 3; i++) await store.transact((tx) => tx.insert('tasks', `t${i}`, {}));
    await store.close();
    const [segment] = (await readdir(dir)).filter((n) => n.startsWith('journal-'));
    const file = join(dir, segment!);
    const lines = (await readFile(file, 'utf8')).split('\n');
    lines[1] = lines[1]!.slice(0, 10) + 'garbage';
    await writeFile(file, lines.join('\n'));
    if (onPostgres) return expectRebuiltReplica(dir, ['t0', 't1', 't2']);

    const error = await env.open({ dir }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(JournalCorruptionError);
    expect((error as Error).message).toContain(file);
    expect((error as Error).message).toContain('line 2');
  });

  it('refuses a seq gap in the journal', async () => {
    const dir = await env.dir();
    const store = await env.open({ dir });
    for (let i = 0; i < 3; i++) await store.transact((tx) => tx.insert('tasks', `t${i}`, {}));
    await store.close();
    const [segment] = (await readdir(dir)).filter((n) => n.startsWith('journal-'));
    const file = join(dir, segment!);
    const lines = (await readFile(file, 'utf8')).split('\n');
    lines.splice(1, 1);
    await writeFile(file, lines.join('\n'));
    if (onPostgres) return expectRebuiltReplica(dir, ['t0', 't1', 't2']);
    await expect(env.open({ dir })).rejects.toThrow(/line 2: seq 3 does not follow 1/);
  });
});

describe('store segments and compaction', () => {
  async function fill(store: Awaited<ReturnType<typeof env.open>>, from: number, to: number) {
    const pending: Promise<unknown>[] = [];
    for (let i = from; i < to; i++) {
      pending.push(
        store.transact((tx) => {
          const key = `t${i % 40}`;
          const current = tx.get<{ stateVersion: number }>('tasks', key);
          if (current) tx.put('tasks', key, { repoKey: 'r', state: `s${i}`, pad: 'x'.repeat(100), stateVersion: 0 }, { expectVersion: current.stateVersion, versionField: 'stateVersion' });
          else tx.insert('tasks', key, { repoKey: 'r', state: `s${i}`, stateVersion: 1 });
          if (i % 7 === 0) tx.delete('tasks', `t${(i + 3) % 40}`);
          tx.appendAudit({ action: 'task.transition', actor: 'system', taskId: key, actorId: `task:${key}`, stateVersion: i });
        }),
      );
    }
    await Promise.all(pending);
  }

  it('rotates segments and compacts them in a worker; same state and audit after reopen', async () => {
    const dir = await env.dir();
    const store = await env.open({ dir, segmentBytes: 4096, indexes: INDEXES });
    await fill(store, 0, 300);
    await store.compactionIdle();
    await fill(store, 300, 600);
    await store.compact();
    expect(store.stats().compactions).toBeGreaterThanOrEqual(1);
    expect(store.stats().lastCheckpointSeq).toBe(600);
    await fill(store, 600, 700); // some tail left in the journal, not yet compacted
    const tasks = store.list('tasks');
    const audit = store.audit();
    expect(audit).toHaveLength(700);
    expectUniqueSeqs(audit);
    await store.close();

    const again = await env.open({ dir, indexes: INDEXES });
    expect(again.list('tasks')).toEqual(tasks);
    expect(again.audit()).toEqual(audit);
    expect(again.byIndex('tasks', 'state', 's699')).toHaveLength(1);
    await again.compact();
    expect(again.stats().segments).toBe(0);
    await again.close();
    const third = await env.open({ dir, indexes: INDEXES });
    expect(third.audit()).toEqual(audit);
    expect(third.list('tasks')).toEqual(tasks);
  });

  it('compacts automatically as segments seal (worker under vitest)', async () => {
    const dir = await env.dir();
    const store = await env.open({ dir, segmentBytes: 2048 });
    for (let round = 0; round < 5; round++) {
      await fill(store, round * 100, round * 100 + 100);
      await store.compactionIdle();
    }
    expect(store.lastCompactionError).toBeUndefined();
    expect(store.stats().compactions).toBeGreaterThanOrEqual(1);
    expect(store.stats().lastCheckpointSeq).toBeGreaterThan(0);
    const audit = store.audit();
    await store.close();
    const again = await env.open({ dir });
    expect(again.audit()).toEqual(audit);
    expectUniqueSeqs(again.audit());
  });

  it('a crash between checkpoint and segment deletion neither loses nor duplicates anything', async () => {
    const dir = await env.dir();
    const store = await env.open({ dir, segmentBytes: 1 << 30 });
    await fill(store, 0, 100);
    const [segment] = (await readdir(dir)).filter((n) => n.startsWith('journal-'));
    await copyFile(join(dir, segment!), join(dir, 'saved'));
    await store.compact();
    const audit = store.audit();
    const tasks = store.list('tasks');
    await store.close();
    // Put the folded segment back, as if the process died before unlinking it.
    await copyFile(join(dir, 'saved'), join(dir, segment!));

    const again = await env.open({ dir });
    expect(again.audit()).toEqual(audit);
    expect(again.list('tasks')).toEqual(tasks);
    await fill(again, 100, 120);
    await again.compact();
    await again.close();
    const third = await env.open({ dir });
    expect(third.audit()).toHaveLength(120);
    expectUniqueSeqs(third.audit());
  });
});

describe('store audit archives', () => {
  it('moves audit events out of the checkpoint into archives; ignores an unlisted (crash leftover) archive', async () => {
    const dir = await env.dir();
    const store = await env.open({ dir });
    for (let i = 0; i < 30; i++) await store.transact((tx) => tx.appendAudit({ action: 'a', actor: 'system', taskId: `t${i}` }));
    await store.compact();
    for (let i = 30; i < 40; i++) await store.transact((tx) => tx.appendAudit({ action: 'a', actor: 'system', taskId: `t${i}` }));
    await store.compact();
    const audit = store.audit();
    await store.close();

    const checkpoint = JSON.parse(await readFile(join(dir, 'checkpoint.json'), 'utf8'));
    expect(checkpoint.audit).toEqual([]);
    expect(checkpoint.auditArchives).toHaveLength(2);
    // A compaction that died before its checkpoint: archive written, not listed.
    const leftover = 'audit-0000000000000041-0000000000000050.ndjson';
    await writeFile(join(dir, leftover), audit.slice(30).map((e) => JSON.stringify(e)).join('\n') + '\n');

    const again = await env.open({ dir });
    expect(again.audit()).toEqual(audit);
    expect((await readdir(dir)).includes(leftover)).toBe(false);
    expectUniqueSeqs(again.audit());
  });

  it('filters by level in the archives and in memory; an event without a level is info', async () => {
    const store = await env.open({ dir: await env.dir() });
    const levels = [undefined, 'security', 'alert', 'info', 'security'] as const;
    const write = (round: number) =>
      store.transact((tx) => levels.forEach((level, i) => tx.appendAudit({ action: `a${round}.${i}`, actor: 'system', taskId: 't', ...(level ? { level } : {}) })));
    await write(0);
    await store.compact(); // round 0 is archived, round 1 stays in memory
    await write(1);
    expect(store.audit({ level: 'security' }).map((e) => e.action)).toEqual(['a0.1', 'a0.4', 'a1.1', 'a1.4']);
    expect(store.audit({ level: 'info', taskId: 't' }).map((e) => e.action)).toEqual(['a0.0', 'a0.3', 'a1.0', 'a1.3']);
    expect(store.audit({ level: 'alert', limit: 1 }).map((e) => e.action)).toEqual(['a0.2']);
    await store.close();
  });
});

describe('store failure and lifecycle', () => {
  it('fail-stops after a journal write failure', async () => {
    let failNext = false;
    const store = await env.open({
      dir: await env.dir(),
      beforeJournalWrite: () => {
        if (failNext) throw new Error('EIO: injected');
      },
    });
    await store.transact((tx) => tx.insert('tasks', 'ok', {}));
    failNext = true;
    const pending = Array.from({ length: 5 }, (_, i) => store.transact((tx) => tx.insert('tasks', `p${i}`, {})));
    for (const p of pending) await expect(p).rejects.toBeInstanceOf(StoreUnavailableError);
    await expect(store.transact((tx) => tx.insert('tasks', 'later', {}))).rejects.toBeInstanceOf(StoreUnavailableError);
    await expect(store.transact(() => 1)).rejects.toBeInstanceOf(StoreUnavailableError);
    await expect(store.sync()).rejects.toThrow(/injected/);
  });

  it('rejects every call after close', async () => {
    const store = await env.open({ dir: await env.dir() });
    const last = store.transact((tx) => tx.insert('tasks', 'a', {}));
    await store.close();
    await expect(last).resolves.toBeDefined();
    await expect(store.transact(() => 1)).rejects.toBeInstanceOf(StoreUnavailableError);
    await expect(store.sync()).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(() => store.get('tasks', 'a')).toThrow(StoreUnavailableError);
    expect(() => store.list('tasks')).toThrow(StoreUnavailableError);
    await expect(store.open()).rejects.toBeInstanceOf(StoreUnavailableError);
  });

  it('rejects an unknown collection inside the transaction', async () => {
    const store = await env.open({ dir: await env.dir() });
    await expect(store.transact((tx) => tx.insert('nope' as 'tasks', 'a', {}))).rejects.toThrow(/unknown collection/);
  });
});

describe('store: several writes of one key in a transaction', () => {
  it('journals the key once, with its last value, and replays to the same state', async () => {
    const { mkdtempSync, readdirSync, readFileSync, rmSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const { createStore } = await import('../../src/store/index.js');
    const dir = mkdtempSync(join(tmpdir(), 'ccweb-coalesce-'));
    const store = createStore({ dir });
    await store.open();
    await store.transact((tx) => {
      tx.insert('tasks', 't', { state: 'received', stateVersion: 0 });
      tx.put('tasks', 't', { state: 'queued', stateVersion: 0 }, { expectVersion: 0, versionField: 'stateVersion' });
      tx.put('tasks', 't', { ...tx.get('tasks', 't'), note: 'x' });
      tx.insert('tasks', 'gone', { a: 1 });
      tx.delete('tasks', 'gone');
      tx.appendAudit({ action: 'a1', actor: 'test' });
      tx.appendAudit({ action: 'a2', actor: 'test' });
    });
    await store.close();
    const journal = readdirSync(dir).filter((f) => f.startsWith('journal-'));
    const line = readFileSync(join(dir, journal[0]!), 'utf8').trim().split('\n').at(-1)!;
    const ops = (JSON.parse(line) as { ops: unknown[][] }).ops;
    expect(ops.map((o) => [o[0], o[2] ?? (o[1] as { action: string }).action])).toEqual([['p', 't'], ['a', 'a1'], ['a', 'a2']]);
    const again = createStore({ dir });
    await again.open();
    expect(again.get('tasks', 't')).toEqual({ state: 'queued', stateVersion: 1, note: 'x' });
    expect(again.get('tasks', 'gone')).toBeUndefined();
    await again.close();
    rmSync(dir, { recursive: true, force: true });
  });
});

describe('store checkpoint text', () => {
  it('is one JSON document with an entry per line, read back line by line, and old single-line checkpoints still load', async () => {
    const { toLineJson, parseLineJson } = await import('../../src/store/durable-json-file.mjs');
    const doc = {
      format: 'ccweb-store/1',
      seq: 7,
      collections: { tasks: [['a', { s: 'line\nbreak, "quoted" ],' }], ['b', { n: 2 }]], empty: [], leases: [['r', { held: true }]] },
      audit: [],
    };
    const text = toLineJson(doc);
    expect(JSON.parse(text)).toEqual(doc);
    expect(text.split('\n').length).toBeGreaterThan(6);
    expect(parseLineJson(text)).toEqual(doc);
    expect(parseLineJson(JSON.stringify(doc))).toEqual(doc);
    expect(() => parseLineJson(text.slice(0, text.lastIndexOf('\n')))).toThrow(/ends early/);
    expect(() => parseLineJson(text.replace('"b",{"n":2}', '"b",{"n":'))).toThrow();
  });
});

describe('durable file writes', () => {
  const env = storeDirs();
  afterEach(() => env.cleanup());

  it('a text larger than one flush slice is written whole, a surrogate pair at a slice boundary intact', async () => {
    const { writeFileDurably } = await import('../../src/store/durable-json-file.mjs');
    const dir = await env.dir();
    const slice = 2 * 1024 * 1024;
    // '😀' (two UTF-16 units) straddles the first slice boundary; more such pairs further on.
    const text = `${'a'.repeat(slice - 1)}😀${'é'.repeat(slice)}${'😀'.repeat(slice / 2)}end`;
    await writeFileDurably(join(dir, 'big.json'), text, { fsync: true });
    const back = await readFile(join(dir, 'big.json'), 'utf8');
    expect(back.length).toBe(text.length);
    expect(back === text).toBe(true);
    expect((await readdir(dir)).filter((name) => name.endsWith('.tmp'))).toEqual([]);
  });

  // A real short write, not a double: the file-size limit (`ulimit -f`, whose signal Node ignores) makes
  // write(2) write part of a piece and return. Linux and bash only.
  it.runIf(process.platform === 'linux')('a short write fails the whole write: neither the file nor a temp file is left', async () => {
    const dir = await env.dir();
    const script = join(dir, 'write.mjs');
    await writeFile(
      script,
      [
        `const { writeFileDurably } = await import(${JSON.stringify(new URL('../../src/store/durable-json-file.mjs', import.meta.url).href)});`,
        // 3.5 MB under a 3 MB limit: the first 2 MB piece fits, the second is cut short.
        `try { await writeFileDurably(${JSON.stringify(join(dir, 'out', 'ck.json'))}, 'x'.repeat(3.5 * 1024 * 1024), { fsync: true }); console.log('resolved'); }`,
        `catch (error) { console.log('rejected', error.code); }`,
      ].join('\n'),
    );
    await mkdir(join(dir, 'out'));
    const { stdout } = await execa('bash', ['-c', `ulimit -f 3072; exec ${JSON.stringify(process.execPath)} ${JSON.stringify(script)}`]);
    expect(stdout.trim()).toBe('rejected EFBIG');
    expect(await readdir(join(dir, 'out'))).toEqual([]);
  });
});
