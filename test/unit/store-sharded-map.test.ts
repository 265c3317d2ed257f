// ShardedMap (src/store/sharded-map.ts) behaves as a Map — before and after it splits — and, given an
// order, iterates in it; its parts really share the keys, so no single part (and no single doubling)
// holds them all.
import { createHash } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { ShardedMap, partOf } from '../../src/store/sharded-map.js';
import { seededRandom } from '../support/seeded-random.js';
import { storeDirs } from '../support/store-helpers.js';

interface Entry {
  ord: number;
  value: number;
}

describe('ShardedMap', () => {
  it('answers as a Map under random set/update/delete, across its split; iterates in insertion order given the order', () => {
    const random = seededRandom(7);
    const map = new ShardedMap<Entry>({ orderOf: (e) => e.ord, splitAt: 200 });
    const model = new Map<string, Entry>();
    let nextOrd = 0;
    for (let step = 0; step < 6000; step++) {
      const key = `task:${Math.floor(random() * 900)}`;
      const roll = random();
      if (roll < 0.6) {
        const existing = model.get(key);
        if (existing) {
          // An update keeps the key's place, as CollectionState.put does.
          existing.value = step;
        } else {
          const entry = { ord: nextOrd++, value: step };
          model.set(key, entry);
          map.set(key, entry);
        }
      } else {
        expect(map.delete(key)).toBe(model.delete(key));
      }
      if (step % 500 === 0 || step === 5999) {
        expect(map.size).toBe(model.size);
        expect([...map.entries()]).toEqual([...model.entries()]);
        expect([...map.keys()]).toEqual([...model.keys()]);
        expect(map.valuesWhere((e) => e.value % 3 === 0)).toEqual([...model.values()].filter((e) => e.value % 3 === 0));
      }
      expect(map.get(key)).toBe(model.get(key));
      expect(map.has(key)).toBe(model.has(key));
    }
    expect(map.split).toBe(true);
  });

  it('without an order, holds the same entries after its split (any order)', () => {
    const map = new ShardedMap<number>({ splitAt: 50 });
    for (let i = 0; i < 300; i++) map.set(`k${i}`, i);
    for (let i = 0; i < 300; i += 3) map.delete(`k${i}`);
    expect(map.split).toBe(true);
    expect(map.size).toBe(200);
    expect(new Map(map.entries())).toEqual(new Map(Array.from({ length: 300 }, (_, i) => [`k${i}`, i] as const).filter(([, i]) => i % 3 !== 0)));
    map.clear();
    expect(map.size).toBe(0);
    expect(map.split).toBe(false);
  });

  it('stays one Map until it is large', () => {
    const map = new ShardedMap<number>();
    for (let i = 0; i < 2048; i++) map.set(`k${i}`, i);
    expect(map.split).toBe(false);
    map.set('one-more', 0);
    expect(map.split).toBe(true);
  });

  it('spreads keys that share a long prefix or suffix over all 16 parts, none with more than twice its share', () => {
    const shapes = [
      (i: number) => `task:gitea-task-${i.toString(16).padStart(24, '0')}`,
      (i: number) => `${i}:received-receipt-of-the-task-comment`,
      (i: number) => `default:${i}`,
      // A task id is a SHA-256 prefix (taskIdFor): all of its hex digits vary.
      (i: number) => `gitea-task-${createHash('sha256').update(String(i)).digest('hex').slice(0, 24)}:status:received`,
      (i: number) => `webhook_deliveries\u0000default:${i}`,
      // A comment trigger (commentTriggerKey) in the cold tier's pending map, a burst within 4 seconds.
      (i: number) => `comment_triggers\u0000default:acme/widgets:comment:${1_000_000 + i}:created:2026-12-01T17:04:1${Math.floor(i / 4000)}Z`,
      (i: number) => `comment_triggers\u0000default:a-much-longer-organisation/and-a-longer-repository-name:comment:${1_000_000 + i}:created:2026-12-01T17:04:1${Math.floor(i / 4000)}Z`,
    ];
    for (const shape of shapes) {
      const counts = new Array<number>(16).fill(0);
      for (let i = 0; i < 16_000; i++) counts[partOf(shape(i))]! += 1;
      expect(Math.min(...counts), shape(1)).toBeGreaterThan(0);
      expect(Math.max(...counts), shape(1)).toBeLessThan(2000);
    }
  });
});

describe('a store whose collections and indexes are split', () => {
  const env = storeDirs();
  afterEach(() => env.cleanup());

  it('lists in insertion order, answers by key and by index, before and after a reopen', async () => {
    const dir = await env.dir();
    const options = { dir, fsync: false, indexes: { tasks: ['state', 'taskId'] } };
    let store = await env.open(options);
    const model = new Map<string, { id: string; taskId: string; state: string; n: number }>();
    const put = (id: string, n: number) => {
      const record = { id, taskId: id, state: n % 3 === 0 ? 'queued' : 'done', n };
      model.delete(id); // a key deleted and written again goes to the end …
      model.set(id, record);
      return record;
    };
    // The model is brought up to date as each batch is planned; the bodies only write (a body may run more than once).
    for (let start = 0; start < 12_000; start += 1000) {
      const batch: Array<[string, Record<string, unknown>]> = [];
      for (let i = start; i < start + 1000; i++) batch.push([`t${i}`, put(`t${i}`, i)]);
      await store.transact(async (tx) => {
        for (const [key, record] of batch) await tx.put('tasks', key, record);
      });
    }
    const deleted: string[] = [];
    for (let i = 0; i < 12_000; i += 7) {
      deleted.push(`t${i}`);
      model.delete(`t${i}`);
    }
    const updated: Array<[string, Record<string, unknown>]> = [];
    for (let i = 1; i < 12_000; i += 5) {
      if (i % 7 === 0) continue;
      // … an update keeps its place — also one that moves the record into another index bucket, where it
      // lands out of insertion order.
      const record = { ...model.get(`t${i}`)!, n: -i, ...(i % 10 === 1 ? { state: 'queued' } : {}) };
      model.set(`t${i}`, record);
      updated.push([`t${i}`, record]);
    }
    await store.transact(async (tx) => {
      for (const key of deleted) await tx.delete('tasks', key);
      for (const [key, record] of updated) await tx.put('tasks', key, record);
    });
    const again: Array<[string, Record<string, unknown>]> = [];
    for (let i = 0; i < 700; i += 7) again.push([`t${i}`, put(`t${i}`, i)]);
    await store.transact(async (tx) => {
      for (const [key, record] of again) await tx.put('tasks', key, record);
    });

    for (let round = 0; round < 2; round++) {
      expect((await store.list('tasks')).map((r) => r['id'])).toEqual([...model.keys()]);
      expect(await store.count('tasks')).toBe(model.size);
      expect(await store.get('tasks', 't11')).toEqual(model.get('t11'));
      expect(await store.byIndex('tasks', 'taskId', 't5001')).toEqual([model.get('t5001')]);
      for (const state of ['queued', 'done']) {
        expect((await store.byIndex('tasks', 'state', state)).map((r) => r['id'])).toEqual([...model.values()].filter((r) => r.state === state).map((r) => r.id));
      }
      await store.close();
      store = await env.open(options);
    }
  });
});
