// Repository leases in the store (Tx, src/store/types.ts), on each engine that keeps them: the
// SQL store on SQLite (project main) and on PostgreSQL (project store-on-postgres). The database
// decides every grant and expiry on its own clock; the epoch grows at every grant; a transaction
// fenced on an epoch commits nothing once another holder could have it. Notifications: what a
// transaction announces reaches the listeners once it committed, never if it did not.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { LeaseLostError, type Store } from '../../src/store/index.js';
import { STORE_ENGINE, storeDirs } from '../support/store-helpers.js';

const env = storeDirs();
afterEach(() => {
  vi.restoreAllMocks();
  return env.cleanup();
});

const open = async () => (await env.open({ dir: await env.dir() })) as Store;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const R = 'default:o/r';

describe('store leases', () => {
  it('one holder per repository; the epoch grows at every grant; only the current epoch renews or releases', async () => {
    const store = await open();
    const first = await store.transact((tx) => tx.grantLease(R, { holder: 'node-a', taskId: 't1', ttlMs: 60_000 }));
    expect(first).toMatchObject({ granted: true, epoch: 1 });
    if (!first.granted) throw new Error('unreachable');
    expect(first.expiresAt - first.now).toBe(60_000);
    const refused = await store.transact((tx) => tx.grantLease(R, { holder: 'node-b', taskId: 't2', ttlMs: 60_000 }));
    expect(refused).toMatchObject({ granted: false, current: { repoKey: R, epoch: 1, holder: 'node-a', taskId: 't1', expiresAt: first.expiresAt } });
    // Another repository is another lease.
    expect(await store.transact((tx) => tx.grantLease('default:o/other', { holder: 'node-b', taskId: 't3', ttlMs: 60_000 }))).toMatchObject({ granted: true, epoch: 1 });

    const renewed = await store.transact((tx) => tx.renewLease(R, 1, 120_000));
    expect(renewed!.expiresAt - renewed!.now).toBe(120_000);
    // A shorter renewal never moves the expiry back.
    expect((await store.transact((tx) => tx.renewLease(R, 1, 1)))!.expiresAt).toBe(renewed!.expiresAt);
    expect(await store.transact((tx) => tx.endLease(R, 1, 'expire'))).toBeNull(); // not expired
    expect(await store.transact((tx) => tx.endLease(R, 1, 'release'))).toMatchObject({ endedAt: expect.any(Number) });
    expect(await store.transact((tx) => tx.endLease(R, 1, 'release'))).toBeNull();

    const second = await store.transact((tx) => tx.grantLease(R, { holder: 'node-b', taskId: 't2', ttlMs: 60_000 }));
    // Released: no lease was taken over.
    expect(second).toMatchObject({ granted: true, epoch: 2, replaced: null });
    // The first holder's epoch is over: nothing it sends counts.
    expect(await store.transact((tx) => tx.renewLease(R, 1, 60_000))).toBeNull();
    expect(await store.transact((tx) => tx.endLease(R, 1, 'release'))).toBeNull();
    expect((await store.heldLeases()).leases.map((l) => [l.repoKey, l.epoch, l.holder])).toEqual([
      ['default:o/other', 1, 'node-b'],
      [R, 2, 'node-b'],
    ]);
  });

  it("expiry is the database's: a lease unrenewed past its ttl is taken over (epoch + 1); its holder can neither renew it nor commit a write fenced on it", async () => {
    const store = await open();
    await store.transact((tx) => tx.grantLease(R, { holder: 'node-a', taskId: 't1', ttlMs: 300 }));
    expect(await store.transact((tx) => tx.grantLease(R, { holder: 'node-b', taskId: 't2', ttlMs: 300 }))).toMatchObject({ granted: false });
    await sleep(400);
    const held = await store.heldLeases();
    expect(held.leases[0]!.expiresAt).toBeLessThanOrEqual(held.now); // expired, still listed until ended
    expect(await store.transact((tx) => tx.renewLease(R, 1, 60_000))).toBeNull();
    const fenced = await store
      .transact(async (tx) => {
        await tx.insert('comments', 'late-answer', { by: 'node-a' });
        await tx.fenceLease(R, 1);
      })
      .catch((e: unknown) => e);
    expect(fenced).toBeInstanceOf(LeaseLostError);
    expect(fenced).toMatchObject({ code: 'lease_lost', repoKey: R, epoch: 1 });
    expect(await store.get('comments', 'late-answer')).toBeUndefined();
    // The takeover names the lease it ended and when: its expiry, on the database's clock.
    expect(await store.transact((tx) => tx.grantLease(R, { holder: 'node-b', taskId: 't2', ttlMs: 60_000 }))).toMatchObject({ granted: true, epoch: 2, replaced: { epoch: 1, expiresAt: held.leases[0]!.expiresAt } });
    // While it holds, a fenced write commits.
    await store.transact(async (tx) => {
      await tx.fenceLease(R, 2);
      await tx.insert('comments', 'answer', { by: 'node-b' });
    });
    expect(await store.get('comments', 'answer')).toEqual({ by: 'node-b' });
  });

  it("a node's own clock plays no part: one running an hour ahead cannot take a live lease over", async () => {
    const store = await open();
    await store.transact((tx) => tx.grantLease(R, { holder: 'node-a', taskId: 't1', ttlMs: 60_000 }));
    const ahead = Date.now() + 3_600_000;
    vi.spyOn(Date, 'now').mockImplementation(() => ahead);
    expect(await store.transact((tx) => tx.grantLease(R, { holder: 'node-b', taskId: 't2', ttlMs: 60_000 }))).toMatchObject({ granted: false });
    expect(await store.transact((tx) => tx.endLease(R, 1, 'expire'))).toBeNull();
    await store.transact((tx) => tx.fenceLease(R, 1));
  });

  it('20 concurrent grants for one repository: exactly one is granted', async () => {
    const store = await open();
    const outcomes = await Promise.all(
      Array.from({ length: 20 }, (_, i) => store.transact((tx) => tx.grantLease(R, { holder: `node-${i}`, taskId: `t${i}`, ttlMs: 60_000 }))),
    );
    expect(outcomes.filter((o) => o.granted)).toHaveLength(1);
    const winner = outcomes.findIndex((o) => o.granted);
    for (const o of outcomes) if (!o.granted) expect(o.current).toMatchObject({ holder: `node-${winner}`, epoch: 1 });
  });

  it('a takeover waits for a fenced transaction still running: the write it commits comes before the new epoch', async () => {
    const store = await open();
    await store.transact((tx) => tx.grantLease(R, { holder: 'node-a', taskId: 't1', ttlMs: 300 }));
    const order: string[] = [];
    const fenced = store.transact(async (tx) => {
      await tx.fenceLease(R, 1);
      await sleep(600); // the lease expires meanwhile
      await tx.insert('comments', 'answer', { by: 'node-a' });
      order.push('fenced write committing');
    });
    await sleep(400);
    const takeover = await store.transact((tx) => tx.grantLease(R, { holder: 'node-b', taskId: 't2', ttlMs: 60_000 }));
    order.push('takeover granted');
    await fenced;
    expect(takeover).toMatchObject({ granted: true, epoch: 2 });
    expect(order).toEqual(['fenced write committing', 'takeover granted']);
    expect(await store.get('comments', 'answer')).toEqual({ by: 'node-a' });
  });
});

describe('locks for claims', () => {
  it('lockFreeLeases: only repositories without a holder, a never-leased one too; a grant to one of them in the same transaction is never refused', async () => {
    const store = await open();
    const HELD = 'default:o/held';
    await store.transact((tx) => tx.grantLease(HELD, { holder: 'node-a', taskId: 't0', ttlMs: 60_000 }));
    const grant = await store.transact(async (tx) => {
      const free = await tx.lockFreeLeases([R, HELD, R]);
      return { free: [...free], grant: await tx.grantLease(R, { holder: 'node-b', taskId: 't1', ttlMs: 60_000 }) };
    });
    expect(grant).toMatchObject({ free: [R], grant: { granted: true, epoch: 1 } });
    expect(await store.transact(async (tx) => [...(await tx.lockFreeLeases([R, HELD]))])).toEqual([]);
    await store.transact((tx) => tx.endLease(R, 1, 'release'));
    expect(await store.transact(async (tx) => [...(await tx.lockFreeLeases([R]))])).toEqual([R]);
  });

  it('lock: the hot records of the keys asked, by key', async () => {
    const store = await open();
    await store.transact(async (tx) => {
      for (const key of ['a', 'b', 'c']) await tx.insert('tasks', key, { key });
      await tx.archive('tasks', 'c');
    });
    expect(await store.transact(async (tx) => [...(await tx.lock('tasks', ['a', 'b', 'c', 'missing'], 'skip')).entries()])).toEqual([
      ['a', { key: 'a' }],
      ['b', { key: 'b' }],
    ]);
  });

  // SQLite has one writer: no other transaction can hold a lock meanwhile.
  it.runIf(STORE_ENGINE === 'postgres')('lock on PostgreSQL: a record another transaction holds is skipped (skip) — not waited for — and a writer waits for a share lock', async () => {
    const store = await open();
    await store.transact(async (tx) => {
      for (const key of ['a', 'b']) await tx.insert('tasks', key, { key });
    });
    const S = 'default:o/other';
    // Both lease rows exist (a row being made is waited for instead: the claimers making it wait in key order).
    await store.transact((tx) => tx.lockFreeLeases([R, S]));
    await store.transact((tx) => tx.insert('control', 'global', { globalPaused: false }));
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let locked!: () => void;
    const isLocked = new Promise<void>((resolve) => (locked = resolve));
    const order: string[] = [];
    const holder = store.transact(async (tx) => {
      await tx.lock('tasks', ['a'], 'skip');
      await tx.lockFreeLeases([R]);
      await tx.lock('control', ['global'], 'share');
      locked();
      await held;
      order.push('share lock released');
    });
    await isLocked;
    const other = store.transact(async (tx) => [[...(await tx.lock('tasks', ['a', 'b'], 'skip')).keys()], [...(await tx.lockFreeLeases([R, S]))]]);
    // A guard against hanging, not a timing assertion: a skip that waits never resolves while the holder waits for it.
    const skipped = await Promise.race([other, sleep(10_000).then(() => 'waited for a locked row')]);
    if (typeof skipped === 'string') release(); // fail now, not at the hook's timeout
    expect(skipped).toEqual([['b'], [S]]);
    const writer = store.transact((tx) => tx.put('control', 'global', { globalPaused: true })).then(() => order.push('writer committed'));
    await sleep(200);
    release();
    await Promise.all([holder, writer]);
    expect(order).toEqual(['share lock released', 'writer committed']);
  });
});

describe('store notifications', () => {
  it('a committed notify reaches every listener of its channel, in commit order; a rolled-back one never does', async () => {
    const store = await open();
    const heard: string[] = [];
    const other: string[] = [];
    const stop = await store.listen('ccweb_control', (payload) => heard.push(payload));
    await store.listen('ccweb_audit', (payload) => other.push(payload));
    await store.transact(async (tx) => {
      await tx.insert('control_requests', 'r1', { action: 'stop' });
      await tx.notify('ccweb_control', 'r1');
    });
    await expect(
      store.transact(async (tx) => {
        await tx.notify('ccweb_control', 'never');
        throw new Error('rolled back');
      }),
    ).rejects.toThrow('rolled back');
    for (const i of [1, 2, 3]) await store.transact((tx) => tx.notify('ccweb_control', `n${i}`));
    await store.transact((tx) => tx.notify('ccweb_audit', '7'));
    const deadline = Date.now() + 5000;
    while ((heard.length < 4 || other.length < 1) && Date.now() < deadline) await sleep(20);
    expect(heard).toEqual(['r1', 'n1', 'n2', 'n3']);
    expect(other).toEqual(['7']);
    stop();
    await store.transact((tx) => tx.notify('ccweb_control', 'after'));
    await sleep(200);
    expect(heard).toHaveLength(4);
    await expect(store.transact((tx) => tx.notify('Robert"); DROP TABLE tasks; --', 'x'))).rejects.toThrow(/not a channel name/);
  });
});
