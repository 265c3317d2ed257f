// What the main thread does when a compaction finishes — taking in the archived records of the new
// cold file and forgetting the audit events of the new archive — is done a slice per event-loop
// turn (a webhook burst archives 100k records between two compactions; done at once, that stalled
// every request for 100–300 ms). These tests run other work on every turn of the handover and check
// that (a) it really is spread over several turns, and (b) on every turn each archived key reads its
// record and each audit event is answered exactly once.
import { readdir } from 'node:fs/promises';
import { getPriority } from 'node:os';
import { afterEach, describe, expect, it } from 'vitest';
import { runCompaction } from '../../src/store/compaction.js';
import type { DurableStore } from '../../src/store/index.js';
import { storeDirs } from '../support/store-helpers.js';

const env = storeDirs('journal');
afterEach(() => env.cleanup());

const RECORDS = 20_000;
const SEGMENT = /^journal-\d+\.ndjson$/;

async function fill(store: DurableStore): Promise<void> {
  for (let start = 0; start < RECORDS; start += 1000) {
    await store.transact(async (tx) => {
      for (let i = start; i < start + 1000; i++) {
        await tx.insert('tasks', `t${i}`, { id: `t${i}`, state: 'succeeded', n: i });
        await tx.archive('tasks', `t${i}`);
        await tx.appendAudit({ action: 'step', actor: 'test', taskId: `t${i}`, deliveryId: `d${i % 7}` });
      }
    });
  }
}

/** Runs `check` on every event-loop turn until `done` settles; returns what `check` returned per turn. */
async function everyTurnUntil<T>(done: Promise<unknown>, check: () => Promise<T>): Promise<T[]> {
  const seen: T[] = [];
  let finished = false;
  void done.finally(() => {
    finished = true;
  });
  while (!finished) {
    seen.push(await check());
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  seen.push(await check());
  return seen;
}

describe('compaction handover on the main thread', () => {
  it('takes in the archived records over several turns; every key reads its record on every turn', async () => {
    const store = await env.open({ dir: await env.dir(), indexes: { tasks: ['state'] } });
    await fill(store);
    expect(store.stats().pendingColdRecords).toBe(RECORDS);

    const probes = [0, 1, 4095, 10_000, RECORDS - 1].map((i) => `t${i}`);
    const pendingPerTurn = await everyTurnUntil(store.compact(), async () => {
      for (const key of probes) expect(await store.get('tasks', key), key).toMatchObject({ id: key });
      expect(await store.archivedCount('tasks')).toBe(RECORDS);
      return store.stats().pendingColdRecords;
    });

    // Seen part-way: some archived records taken in, others still pending, with the loop running.
    expect(pendingPerTurn.filter((n) => n > 0 && n < RECORDS).length).toBeGreaterThan(2);
    expect(pendingPerTurn.at(-1)).toBe(0);
    expect(store.stats().coldRecords).toBe(RECORDS);
    for (let i = 0; i < RECORDS; i += 997) expect(await store.get('tasks', `t${i}`)).toEqual({ id: `t${i}`, state: 'succeeded', n: i });
    const ids = new Set<unknown>();
    for await (const r of store.scanArchived('tasks')) ids.add(r['id']);
    expect(ids.size).toBe(RECORDS);
  });

  it('forgets archived audit events over several turns; every query answers each event once on every turn', async () => {
    const store = await env.open({ dir: await env.dir(), indexes: { tasks: ['state'] } });
    await fill(store);
    const all = await store.audit();
    expect(all).toHaveLength(RECORDS);

    const inMemoryPerTurn = await everyTurnUntil(store.compact(), async () => {
      expect((await store.audit({ taskId: 't12345' })).map((e) => e.seq)).toEqual([all[12_345]!.seq]);
      expect((await store.audit({ deliveryId: 'd3', afterSeq: all[RECORDS - 50]!.seq })).map((e) => e.seq)).toEqual(
        all.slice(RECORDS - 49).filter((e) => e.deliveryId === 'd3').map((e) => e.seq),
      );
      expect(await store.audit({ afterSeq: all[RECORDS - 10]!.seq })).toHaveLength(9);
      return store.stats().auditEventsInMemory;
    });

    expect(inMemoryPerTurn.filter((n) => n > 0 && n < RECORDS).length).toBeGreaterThan(0);
    expect(inMemoryPerTurn.at(-1)).toBe(0);
    expect((await store.audit()).map((e) => e.seq)).toEqual(all.map((e) => e.seq));
    expect(await store.audit({ taskId: 't7' })).toEqual([all[7]]);
  });
});

describe('compaction handover: readers and writers between slices', () => {
  it('compact() finishes while transactions keep coming', async () => {
    const store = await env.open({ dir: await env.dir() });
    await fill(store);
    let writing = true;
    let written = 0;
    const writer = (async () => {
      while (writing) {
        await store.transact((tx) => tx.insert('tasks', `w${written}`, { id: `w${written}` }));
        written += 1;
      }
    })();
    await store.compact();
    writing = false;
    await writer;
    expect(written).toBeGreaterThan(0);
    expect(store.stats().coldRecords).toBe(RECORDS);
  });

  it('a scan paused across slices sees each archived record once', async () => {
    const store = await env.open({ dir: await env.dir(), indexes: { tasks: ['state'] } });
    await fill(store);
    const compaction = store.compact();
    // Wait until the handover is part-way, then scan with turns in between.
    while (store.stats().pendingColdRecords === RECORDS) await new Promise<void>((resolve) => setImmediate(resolve));
    expect(store.stats().pendingColdRecords).toBeGreaterThan(0);
    const seen: string[] = [];
    for await (const record of store.scanArchived('tasks')) {
      seen.push(String(record['id']));
      if (seen.length % 500 === 0) await new Promise<void>((resolve) => setImmediate(resolve));
    }
    await compaction;
    expect(seen).toHaveLength(RECORDS);
    expect(new Set(seen).size).toBe(RECORDS);
  });

  it('writes, deletes and archives between slices hold after the handover, another compaction and a reopen', async () => {
    const dir = await env.dir();
    const options = { dir, indexes: { tasks: ['state'] } };
    let store = await env.open(options);
    await fill(store);
    const model = new Map<string, Record<string, unknown> | undefined>();
    const compaction = store.compact();
    let turn = 0;
    let finished = false;
    void compaction.finally(() => {
      finished = true;
    });
    while (!finished) {
      // Keys spread over the file, so some are taken in already and some not yet.
      const a = `t${(turn * 4099) % RECORDS}`;
      const b = `t${(turn * 7919 + 1) % RECORDS}`;
      const c = `t${(turn * 104_729 + 2) % RECORDS}`;
      const rewritten = { id: a, state: 'queued', turn };
      const again = { id: c, state: 'succeeded', turn, again: true };
      const deletedB = await store.transact(async (tx) => {
        await tx.put('tasks', a, rewritten);
        const hasB = (await tx.get('tasks', b)) !== undefined;
        if (hasB) await tx.delete('tasks', b);
        await tx.put('tasks', c, again);
        await tx.archive('tasks', c);
        return hasB;
      });
      // The model follows once the transaction committed (a body may run more than once).
      model.set(a, rewritten);
      if (deletedB) model.set(b, undefined);
      model.set(c, again);
      turn += 1;
    }
    expect(turn).toBeGreaterThan(3);
    const check = async () => {
      for (const [key, value] of model) expect(await store.get('tasks', key), key).toEqual(value);
      expect(await store.get('tasks', 't19999')).toEqual(model.has('t19999') ? model.get('t19999') : { id: 't19999', state: 'succeeded', n: 19_999 });
    };
    await check();
    await store.compact();
    await check();
    await store.close();
    store = await env.open(options);
    await check();
  });

  it('forgotten audit events leave the in-memory indexes too, a long list of one actor included', async () => {
    const store = await env.open({ dir: await env.dir() });
    for (let start = 0; start < RECORDS; start += 1000) {
      await store.transact(async (tx) => {
        for (let i = start; i < start + 1000; i++) await tx.appendAudit({ action: 'lock.step', actor: 'test', actorId: 'lock:acme/widgets', taskId: `t${i % 50}` });
      });
    }
    expect(store.stats().auditIndexEntriesInMemory).toBe(2 * RECORDS);
    expect(store.stats().auditIndexKeysInMemory).toBe(51);
    await store.compact();
    expect(store.stats()).toMatchObject({ auditEventsInMemory: 0, auditIndexEntriesInMemory: 0, auditIndexKeysInMemory: 0 });
    expect(await store.audit({ actorId: 'lock:acme/widgets' })).toHaveLength(RECORDS);
    await store.transact((tx) => tx.appendAudit({ action: 'lock.step', actor: 'test', actorId: 'lock:acme/widgets' }));
    expect(await store.audit({ actorId: 'lock:acme/widgets' })).toHaveLength(RECORDS + 1);
    expect(store.stats()).toMatchObject({ auditIndexEntriesInMemory: 1, auditIndexKeysInMemory: 1 });
  });
});

describe('compaction thread priority', () => {
  it.runIf(process.platform === 'linux')('runs at nice 10 on Linux, and only that thread: the request path keeps its priority', async () => {
    const dir = await env.dir();
    const store = await env.open({ dir, fsync: false });
    await store.transact((tx) => tx.insert('tasks', 't1', { id: 't1' }));
    await store.close();
    const segments = (await readdir(dir)).filter((name) => SEGMENT.test(name));
    expect(segments.length).toBeGreaterThan(0);
    const before = getPriority();

    const result = await runCompaction({ dir, segments, fsync: false });

    expect(result.nice).toBe(Math.max(before, 10));
    expect(getPriority()).toBe(before);
  });
});
