// The cold tier: archived records leave memory but stay readable by key; writes and deletes of an
// archived key supersede its copy, across compactions and reopens; archived audit events answer
// the same queries as in-memory ones. Checked against a plain Map model under random workloads.
import { readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { UniqueViolationError, type AuditEvent, type AuditQuery, type DurableStore, type StoredRecord } from '../../src/store/index.js';
import { hash32, recordId } from '../../src/store/cold-files.mjs';
import { seededRandom as rng } from '../support/seeded-random.js';
import { storeDirs } from '../support/store-helpers.js';

const env = storeDirs('journal');
afterEach(() => env.cleanup());

const INDEXES = { tasks: ['state'] };

interface Model {
  hot: Map<string, StoredRecord>;
  cold: Map<string, StoredRecord>;
}

async function archived(store: DurableStore): Promise<StoredRecord[]> {
  const out: StoredRecord[] = [];
  for await (const r of store.scanArchived('tasks')) out.push(r);
  return out;
}

async function expectMatchesModel(store: DurableStore, model: Model, keys: Iterable<string>) {
  for (const key of keys) {
    const expected = model.hot.get(key) ?? model.cold.get(key);
    expect(await store.get('tasks', key), key).toEqual(expected);
  }
  expect(new Set((await store.list('tasks')).map((r) => r['id']))).toEqual(new Set(model.hot.keys()));
  expect(await store.count('tasks')).toBe(model.hot.size);
  expect(await store.archivedCount('tasks')).toBe(model.cold.size);
  expect(new Set((await archived(store)).map((r) => r['id']))).toEqual(new Set(model.cold.keys()));
  const queued = [...model.hot.values()].filter((r) => r['state'] === 'queued').map((r) => r['id']);
  expect((await store.byIndex('tasks', 'state', 'queued')).map((r) => r['id']).sort()).toEqual(queued.sort());
}

async function randomWorkload(store: DurableStore, model: Model, random: () => number, steps: number, keySpace: number) {
  for (let i = 0; i < steps; i++) {
    const key = `k${Math.floor(random() * keySpace)}`;
    const roll = random();
    const state = random() < 0.5 ? 'queued' : 'succeeded';
    // Drawn outside the body (a body may run more than once), always in this order: the seed fixes the workload.
    const record = roll < 0.45 ? { id: key, state, n: i, pad: 'x'.repeat(Math.floor(random() * 300)) } : undefined;
    // Archived in the same transaction that wrote it: the archived copy is the new value.
    const archiveWritten = record !== undefined && random() < 0.3;
    const exists = model.hot.has(key) || model.cold.has(key);
    await store.transact(async (tx) => {
      // `has` first (it reads only a cold line's key), then `get`: both answer the model.
      expect(await tx.has('tasks', key), key).toBe(exists);
      expect((await tx.get('tasks', key)) !== undefined, key).toBe(exists);
      if (record) {
        await tx.put('tasks', key, record);
        if (archiveWritten) await tx.archive('tasks', key);
      } else if (roll < 0.75) {
        await tx.archive('tasks', key);
      } else if (roll < 0.9 && exists) {
        await tx.delete('tasks', key);
      }
      await tx.appendAudit({ action: 'step', actor: 'test', taskId: key, actorId: `a${i % 5}`, deliveryId: i % 3 === 0 ? `d${i % 11}` : null });
    });
    // The model follows once the transaction committed.
    if (record) {
      model.cold.delete(key);
      model.hot.set(key, record);
      if (archiveWritten) {
        model.hot.delete(key);
        model.cold.set(key, record);
      }
    } else if (roll < 0.75) {
      if (model.hot.has(key)) {
        model.cold.set(key, model.hot.get(key)!);
        model.hot.delete(key);
      }
    } else if (roll < 0.9 && exists) {
      model.hot.delete(key);
      model.cold.delete(key);
    }
  }
}

/** Two session keys whose (collection, key) hashes are equal: the cold index then offers both lines for either. */
function sessionKeysSharingAHash(): [string, string] {
  const seen = new Map<number, string>();
  for (let i = 0; ; i++) {
    const key = `s${i}`;
    const h = hash32(recordId('sessions', key));
    const earlier = seen.get(h);
    if (earlier !== undefined) return [earlier, key];
    seen.set(h, key);
  }
}

const QUERIES: AuditQuery[] = [
  {},
  { taskId: 'k3' },
  { taskId: 'k17', afterSeq: 40 },
  { actorId: 'a2', limit: 7 },
  { deliveryId: 'd4' },
  { afterSeq: 100, limit: 25 },
  { taskId: 'k5', actorId: 'a1' },
  { taskId: 'nope' },
];

describe('store cold tier', () => {
  it('random archive/put/delete across compactions and reopens matches a Map model', async () => {
    for (const seed of [1, 2, 3]) {
      const dir = await env.dir();
      const random = rng(seed);
      const model: Model = { hot: new Map(), cold: new Map() };
      const keys = Array.from({ length: 40 }, (_, i) => `k${i}`);
      let store = await env.open({ dir, segmentBytes: 8 * 1024, indexes: INDEXES });
      const allEvents: AuditEvent[] = [];
      for (let round = 0; round < 6; round++) {
        await randomWorkload(store, model, random, 150, 40);
        await expectMatchesModel(store, model, keys);
        if (round % 2 === 0) await store.compact();
        else await store.compactionIdle();
        await expectMatchesModel(store, model, keys);
        if (round % 3 === 2) {
          await store.close();
          store = await env.open({ dir, segmentBytes: 8 * 1024, indexes: INDEXES });
          await expectMatchesModel(store, model, keys);
        }
      }
      allEvents.push(...(await store.audit()));
      expect(allEvents.map((e) => e.seq)).toEqual(Array.from({ length: 900 }, (_, i) => i + 1));
      // Every query answered from archives + memory equals filtering the whole log.
      for (const q of QUERIES) {
        const expected = allEvents
          .filter((e) => (q.taskId === undefined || e.taskId === q.taskId) && (q.actorId === undefined || e.actorId === q.actorId))
          .filter((e) => (q.deliveryId === undefined || e.deliveryId === q.deliveryId) && (q.afterSeq === undefined || e.seq > q.afterSeq))
          .slice(0, q.limit ?? Infinity);
        expect(await store.audit(q), JSON.stringify(q)).toEqual(expected);
      }
      expect(store.stats().auditArchives).toBeGreaterThan(1);
      expect(store.stats().coldRecords).toBeGreaterThan(0);
    }
  });

  it('archived records leave memory after compaction; audit events too', async () => {
    const dir = await env.dir();
    const store = await env.open({ dir, indexes: INDEXES });
    for (let i = 0; i < 200; i++) {
      await store.transact(async (tx) => {
        await tx.insert('tasks', `t${i}`, { id: `t${i}`, state: 'succeeded' });
        await tx.archive('tasks', `t${i}`);
        await tx.appendAudit({ action: 'done', actor: 'test', taskId: `t${i}` });
      });
    }
    expect(store.stats().pendingColdRecords).toBe(200);
    await store.compact();
    const stats = store.stats();
    expect(stats.pendingColdRecords).toBe(0);
    expect(stats.coldRecords).toBe(200);
    expect(stats.auditEventsInMemory).toBe(0);
    expect(await store.get('tasks', 't150')).toEqual({ id: 't150', state: 'succeeded' });
    expect(Object.isFrozen(await store.get('tasks', 't150'))).toBe(true);
    expect((await store.audit({ taskId: 't150' })).map((e) => e.action)).toEqual(['done']);
    // A unique insert still sees the archived key.
    await expect(store.transact((tx) => tx.insert('tasks', 't7', { id: 't7' }))).rejects.toBeInstanceOf(UniqueViolationError);
  });

  it('a deleted archived key stays deleted after later compactions and a reopen (its index entry is retired on disk)', async () => {
    const dir = await env.dir();
    let store = await env.open({ dir, indexes: INDEXES });
    await store.transact(async (tx) => {
      await tx.insert('tasks', 'gone', { id: 'gone' });
      await tx.insert('tasks', 'back', { id: 'back', v: 1 });
      await tx.archive('tasks', 'gone');
      await tx.archive('tasks', 'back');
    });
    await store.compact();
    await store.transact(async (tx) => {
      await tx.delete('tasks', 'gone');
      await tx.put('tasks', 'back', { id: 'back', v: 2 });
    });
    expect(await store.get('tasks', 'gone')).toBeUndefined();
    await store.compact();
    await store.transact((tx) => tx.delete('tasks', 'back'));
    await store.compact();
    await store.close();
    store = await env.open({ dir, indexes: INDEXES });
    expect(await store.get('tasks', 'gone')).toBeUndefined();
    expect(await store.get('tasks', 'back')).toBeUndefined();
    expect(await store.archivedCount('tasks')).toBe(0);
  });

  it('ignores an unlisted cold file and index (a compaction that died before its checkpoint)', async () => {
    const dir = await env.dir();
    let store = await env.open({ dir, indexes: INDEXES });
    await store.transact(async (tx) => {
      await tx.insert('tasks', 'a', { id: 'a' });
      await tx.archive('tasks', 'a');
    });
    await store.close();
    const leftover = 'cold-0000000000000001-0000000000000001.ndjson';
    await writeFile(join(dir, leftover), '["tasks","b",{"id":"b"}]\n');
    await writeFile(join(dir, leftover.replace('.ndjson', '.idx')), Buffer.alloc(16));
    store = await env.open({ dir, indexes: INDEXES });
    expect(await readdir(dir)).not.toContain(leftover);
    expect(await store.get('tasks', 'a')).toEqual({ id: 'a' });
    expect(await store.get('tasks', 'b')).toBeUndefined();
    await store.compact();
    expect(await store.get('tasks', 'a')).toEqual({ id: 'a' });
  });

  it('refuses to open with a damaged cold index, naming the file', async () => {
    const dir = await env.dir();
    const store = await env.open({ dir, indexes: INDEXES });
    await store.transact(async (tx) => {
      await tx.insert('tasks', 'a', { id: 'a' });
      await tx.archive('tasks', 'a');
    });
    await store.compact();
    await store.close();
    const index = (await readdir(dir)).find((n) => n.startsWith('cold-') && n.endsWith('.idx'))!;
    await writeFile(join(dir, index), Buffer.alloc(7));
    await expect(env.open({ dir, indexes: INDEXES })).rejects.toThrow(new RegExp(`store index .*${index} is unreadable`));
  });

  it('two archived keys with the same 32-bit hash, one written again while the compaction runs: each key keeps its own value', async () => {
    // Found by review: matching a compaction's cold file to pending records by hash alone gave Y's
    // index entry X's line (Y unreadable) and left X's stale copy live (a deleted X came back).
    const [x, y] = sessionKeysSharingAHash();
    const dir = await env.dir();
    let store = await env.open({ dir, indexes: INDEXES });
    await store.transact(async (tx) => {
      await tx.insert('sessions', x, { v: 'x1' });
      await tx.archive('sessions', x);
    });
    await store.transact(async (tx) => {
      await tx.insert('sessions', y, { v: 'y1' });
      await tx.archive('sessions', y);
    });
    const compaction = store.compact();
    await new Promise((r) => setTimeout(r, 5)); // the segment is rotated; the worker folds seq 1–2
    await store.transact((tx) => tx.put('sessions', x, { v: 'x2' }));
    await compaction;
    expect(await store.get('sessions', y)).toEqual({ v: 'y1' });
    expect(await store.get('sessions', x)).toEqual({ v: 'x2' });
    await store.transact((tx) => tx.delete('sessions', x));
    expect(await store.get('sessions', x)).toBeUndefined();
    await store.close();
    store = await env.open({ dir, indexes: INDEXES });
    expect([await store.get('sessions', x), await store.get('sessions', y)]).toEqual([undefined, { v: 'y1' }]);
  });

  it('has: true for hot, pending and archived keys (escaped characters too), false for a key sharing an archived key\'s hash and for deleted ones', async () => {
    const [x, y] = sessionKeysSharingAHash();
    const odd = 'repo "quoted" \\ é 😀\u0001:issue:7';
    const dir = await env.dir();
    let store = await env.open({ dir, indexes: INDEXES });
    await store.transact(async (tx) => {
      for (const key of [x, odd, 'plain']) {
        await tx.insert('sessions', key, { v: key, pad: 'p'.repeat(200) });
        await tx.archive('sessions', key);
      }
      await tx.insert('sessions', 'hot', { v: 'hot' });
    });
    const answers = () =>
      store.transact(async (tx) => {
        const out: Array<[string, boolean]> = [];
        for (const key of [x, y, odd, 'plain', 'hot', 'plai', 'plainer', 'never']) out.push([key, await tx.has('sessions', key)]);
        return out;
      });
    const expected = [[x, true], [y, false], [odd, true], ['plain', true], ['hot', true], ['plai', false], ['plainer', false], ['never', false]];
    expect(await answers()).toEqual(expected); // archived, still pending in memory
    await store.compact();
    expect(store.stats().pendingColdRecords).toBe(0);
    expect(await answers()).toEqual(expected); // archived, in a cold file: y shares x's hash, so x's line is read
    await store.close();
    store = await env.open({ dir, indexes: INDEXES });
    expect(await answers()).toEqual(expected);
    // Within a transaction: a deletion and an insert are seen; a refused transaction changes nothing.
    await store.transact(async (tx) => {
      await tx.delete('sessions', odd);
      expect(await tx.has('sessions', odd)).toBe(false);
      expect(await tx.has('sessions', y)).toBe(false);
      await tx.insert('sessions', y, { v: 'y' });
      expect(await tx.has('sessions', y)).toBe(true);
    });
    expect(await store.transact(async (tx) => [await tx.has('sessions', odd), await tx.has('sessions', y), await tx.has('sessions', x)])).toEqual([false, true, true]);
  });

  it('a store from before indexes (audit archives without .idx, a single-line checkpoint) opens and gets its indexes', async () => {
    const dir = await env.dir();
    let store = await env.open({ dir, indexes: INDEXES });
    for (let i = 0; i < 50; i++) {
      await store.transact(async (tx) => {
        await tx.put('tasks', `t${i % 7}`, { id: `t${i % 7}`, state: 'queued', n: i });
        await tx.appendAudit({ action: 'step', actor: 'test', taskId: `t${i % 7}` });
      });
    }
    await store.compact();
    const before = { t3: await store.audit({ taskId: 't3' }), all: await store.audit(), records: await store.list('tasks') };
    await store.close();
    for (const name of await readdir(dir)) if (name.startsWith('audit-') && name.endsWith('.idx')) await rm(join(dir, name));
    const checkpoint = join(dir, 'checkpoint.json');
    await writeFile(checkpoint, JSON.stringify(JSON.parse(await readFile(checkpoint, 'utf8'))));
    store = await env.open({ dir, indexes: INDEXES });
    expect(await store.audit({ taskId: 't3' })).toEqual(before.t3);
    expect(await store.audit()).toEqual(before.all);
    expect(await store.list('tasks')).toEqual(before.records);
    expect((await readdir(dir)).some((n) => n.startsWith('audit-') && n.endsWith('.idx'))).toBe(true);
  });
});
