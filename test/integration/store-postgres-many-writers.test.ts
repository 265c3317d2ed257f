// Every node writes (PostgresStore `writers: 'many'`, docs/DESIGN-nodes-at-once.md's "commits from any node"): each
// batch runs under the cluster's commit lock against a replica brought to the database's head, so
// two nodes committing at once never lose an update, never insert one key twice, and agree on one
// order of log and audit seqs. A real PostgreSQL throughout (test/support/postgres-server.ts); a
// node's death while it holds the lock is its session ended by the server (pg_terminate_backend),
// which is what PostgreSQL sees when a process dies.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { PostgresStore, storeDigest, StoreError, StoreUnavailableError, type PostgresStoreOptions } from '../../src/store/index.js';
import { startThrowawayPostgres, type ThrowawayPostgres } from '../support/postgres-server.js';
import { until } from '../support/until.js';

let server: ThrowawayPostgres;
let n = 0;
const cleanups: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  server = await startThrowawayPostgres();
});
afterAll(async () => {
  await server?.stop();
});
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
});

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'ccweb-pg-many-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

async function openNode(url: string, nodeId: string, extra: Partial<PostgresStoreOptions> = {}): Promise<PostgresStore> {
  const store = new PostgresStore({ dir: join(await tempDir(), 'replica'), url, nodeId, version: 'test', indexes: { tasks: ['state'] }, writers: 'many', tailMs: 50, ...extra });
  cleanups.push(() => store.close());
  await store.open();
  return store;
}

async function sql<T extends pg.QueryResultRow>(url: string, text: string, values: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(text, values)).rows;
  } finally {
    await client.end();
  }
}

interface Counter {
  n: number;
  version: number;
  by: string[];
}

/** One read-modify-write of the shared counter, compare-and-swapped on its version, plus a key of the node's own. */
function bump(store: PostgresStore, node: string, i: number): Promise<number> {
  return store.transact(async (tx) => {
    const c = (await tx.get<Counter>('usage', 'counter'))!;
    await tx.put<Counter>('usage', 'counter', { n: c.n + 1, version: c.version, by: [...c.by, `${node}${i}`] }, { expectVersion: c.version });
    await tx.insert('tasks', `${node}-${i}`, { state: 'queued', stateVersion: 1 });
    return (await tx.appendAudit({ action: 'bumped', actor: node, metadata: { i } })).seq;
  });
}

describe('PostgreSQL store: many writers', () => {
  it('two nodes committing at once, on a shared key and on keys of their own: no update is lost, both replicas converge, one order of seqs', async () => {
    const url = await server.createDatabase(`m${process.pid}_${++n}`);
    const a = await openNode(url, 'node-a');
    const b = await openNode(url, 'node-b');
    await a.transact((tx) => tx.insert<Counter>('usage', 'counter', { n: 0, version: 1, by: [] }));
    const rounds = 40;
    const seqs = await Promise.all(
      Array.from({ length: rounds }, (_, i) => [bump(a, 'a', i), bump(b, 'b', i), bump(a, 'a', i + rounds), bump(b, 'b', i + rounds)]).flat(),
    );
    const total = 4 * rounds;
    // Every body saw the one before it, on whichever node it ran: the counter counts every one of them.
    const [row] = await sql<{ body: Counter }>(url, "SELECT body FROM ccweb_records WHERE collection = 'usage' AND key = 'counter'");
    expect(row!.body.n).toBe(total);
    expect(new Set(row!.body.by).size).toBe(total);
    // Audit seqs were taken at the head: unique across the nodes, the database's order.
    expect(new Set(seqs).size).toBe(total);
    const audited = await sql<{ seq: string }>(url, "SELECT seq FROM ccweb_audit WHERE action = 'bumped' ORDER BY seq");
    expect(audited.map((r) => Number(r.seq))).toEqual([...seqs].sort((x, y) => x - y));
    // Both nodes committed, each batch under the lock.
    const writers = await sql<{ node_id: string; n: string }>(url, 'SELECT node_id, count(*) AS n FROM ccweb_log GROUP BY node_id ORDER BY node_id');
    expect(writers.map((w) => w.node_id)).toEqual(['node-a', 'node-b']);
    expect(a.stats().commitLocks).toBeGreaterThan(0);
    expect(b.stats().commitLocks).toBeGreaterThan(0);
    // Each replica follows the other's commits (the tail), and then both hold the same.
    await until('both replicas to reach the head', async () => (await a.get<Counter>('usage', 'counter'))!.n === total && (await b.get<Counter>('usage', 'counter'))!.n === total, 20_000);
    expect(await storeDigest(a)).toBe(await storeDigest(b));
    expect(await a.count('tasks')).toBe(total);
    expect((await a.audit({})).map((e) => e.seq)).toEqual((await b.audit({})).map((e) => e.seq));
    expect(a.stats().appliedFromOtherNodes).toBeGreaterThan(0);
    expect(b.stats().appliedFromOtherNodes).toBeGreaterThan(0);
  });

  it('one comment delivered to two nodes at once is taken by one of them; the other body sees it (intake’s dedupe across nodes) and neither node stops', async () => {
    const url = await server.createDatabase(`m${process.pid}_${++n}`);
    // No tail: only the catch-up under the commit lock can show a node the other's insert.
    const a = await openNode(url, 'node-a', { tailMs: 0 });
    const b = await openNode(url, 'node-b', { tailMs: 0 });
    const accept = (store: PostgresStore, key: string) =>
      store.transact(async (tx) => {
        if (await tx.get('comment_triggers', key)) return 'duplicate';
        await tx.insert('comment_triggers', key, { key });
        return 'new';
      });
    for (let i = 0; i < 20; i++) {
      const outcomes = await Promise.all([accept(a, `c-${i}`), accept(b, `c-${i}`)]);
      expect(outcomes.sort()).toEqual(['duplicate', 'new']);
    }
    await a.transact((tx) => tx.insert('tasks', 'still-writes', {}));
    await b.transact((tx) => tx.insert('tasks', 'still-writes-too', {}));
    expect((await sql<{ n: string }>(url, "SELECT count(*) AS n FROM ccweb_records WHERE collection = 'comment_triggers'"))[0]!.n).toBe('20');
  });

  it('a body that throws applies nothing on any node, and one whose compare-and-swap lost the race is refused as a conflict, not a stop', async () => {
    const url = await server.createDatabase(`m${process.pid}_${++n}`);
    const a = await openNode(url, 'node-a', { tailMs: 0 });
    const b = await openNode(url, 'node-b', { tailMs: 0 });
    await a.transact((tx) => tx.insert('tasks', 't', { state: 'queued', stateVersion: 1 }));
    // b's replica has not seen t yet (no tail): its caller read version 1 elsewhere and hands it in.
    const claim = (store: PostgresStore, by: string) => store.transact((tx) => tx.put('tasks', 't', { state: 'running', by, stateVersion: 1 }, { expectVersion: 1, versionField: 'stateVersion' }));
    const [first, second] = await Promise.allSettled([claim(a, 'a'), claim(b, 'b')]);
    const outcomes = [first, second].map((o) => o.status);
    expect(outcomes.sort()).toEqual(['fulfilled', 'rejected']);
    const refused = [first, second].find((o) => o.status === 'rejected') as PromiseRejectedResult;
    expect((refused.reason as StoreError).code).toBe('version_conflict');
    await expect(b.transact(() => { throw new Error('nope'); })).rejects.toThrow('nope');
    await a.transact((tx) => tx.insert('tasks', 'after', {}));
    await b.transact((tx) => tx.insert('tasks', 'after-b', {}));
    expect((await sql<{ key: string }>(url, "SELECT key FROM ccweb_records WHERE collection = 'tasks' ORDER BY key")).map((r) => r.key)).toEqual(['after', 'after-b', 't']);
  });

  it('a node whose session ends while it holds the commit lock (its process died) frees the others at once; its batch is refused, never merged', async () => {
    const url = await server.createDatabase(`m${process.pid}_${++n}`);
    let hold: (() => void) | undefined;
    let held = 0;
    const a = await openNode(url, 'node-a', {
      tailMs: 0,
      outageMs: 20_000,
      beforeBatch: () => {
        if (held++ > 0) return;
        return new Promise<void>((resolve) => (hold = resolve));
      },
    });
    const b = await openNode(url, 'node-b', { tailMs: 0 });
    const stuck = a.transact((tx) => tx.insert('tasks', 'from-a', {})).then(
      () => 'committed',
      (e: unknown) => e,
    );
    await until('node-a to hold the commit lock in its batch', () => hold !== undefined, 10_000);
    let bDone = false;
    const fromB = b.transact((tx) => tx.insert('tasks', 'from-b', {})).then(() => (bDone = true));
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(bDone).toBe(false); // b waits for the lock a holds
    await sql(url, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'ccweb-gitea node-a'");
    await fromB;
    hold!();
    const outcome = await stuck;
    expect(outcome).toBeInstanceOf(StoreUnavailableError);
    expect((outcome as Error).message).toMatch(/another writer committed; restart this node to reload/);
    expect((await sql<{ key: string }>(url, "SELECT key FROM ccweb_records WHERE collection = 'tasks'")).map((r) => r.key)).toEqual(['from-b']);
    await b.transact((tx) => tx.insert('tasks', 'b-goes-on', {}));
  });

  it('a node that writes alone and nodes that share the writes never write one database together, and say so', async () => {
    const url = await server.createDatabase(`m${process.pid}_${++n}`);
    const shared = await openNode(url, 'node-a');
    const alone = new PostgresStore({ dir: join(await tempDir(), 'replica'), url, nodeId: 'node-c', version: 'test' });
    cleanups.push(() => alone.close());
    const refusedAlone = await alone.open().catch((e: unknown) => e);
    expect((refusedAlone as StoreError).code).toBe('database_writer_taken');
    expect((refusedAlone as Error).message).toMatch(/another node writes .*node node-a/);
    await shared.close();

    const url2 = await server.createDatabase(`m${process.pid}_${++n}`);
    const first = new PostgresStore({ dir: join(await tempDir(), 'replica'), url: url2, nodeId: 'node-c', version: 'test' });
    cleanups.push(() => first.close());
    await first.open();
    const refusedShared = await openNode(url2, 'node-b').catch((e: unknown) => e);
    expect((refusedShared as StoreError).code).toBe('database_writer_taken');
    expect((refusedShared as Error).message).toMatch(/another node writes .* alone \(node node-c, .*nodes that share the writes cannot join it/);
  });
  it("each node is told the audit events of the other nodes' commits as it applies them, never its own", async () => {
    const url = await server.createDatabase(`m${process.pid}_${++n}`);
    const a = await openNode(url, 'node-a');
    const b = await openNode(url, 'node-b');
    const seenByB: string[] = [];
    const seenByA: string[] = [];
    b.onOthersCommitted((events) => seenByB.push(...events.map((e) => `${e.actor}:${e.action}`)));
    a.onOthersCommitted((events) => seenByA.push(...events.map((e) => `${e.actor}:${e.action}`)));
    for (let i = 0; i < 5; i++) await a.transact((tx) => tx.appendAudit({ action: `a.step${i}`, actor: 'node-a' }));
    await b.transact((tx) => tx.appendAudit({ action: 'b.step', actor: 'node-b' }));
    // b's own commit caught it up with a's first (under the lock); a's follower brings b's.
    await until("a sees b's event", () => seenByA.length > 0, 5_000);
    expect(seenByB).toEqual(Array.from({ length: 5 }, (_, i) => `node-a:a.step${i}`));
    expect(seenByA).toEqual(['node-b:b.step']);
  });

  it('a node whose replica cannot follow the database stops for good and says so once, instead of running on with repositories it can no longer serve', async () => {
    const url = await server.createDatabase(`m${process.pid}_${++n}`);
    const a = await openNode(url, 'node-a');
    const stops: Error[] = [];
    // No tail: the gap below is met by b's next commit, under the commit lock.
    const b = await openNode(url, 'node-b', { tailMs: 600_000, onUnavailable: (e) => void stops.push(e) });
    const [head] = await sql<{ seq: string }>(url, 'SELECT seq FROM ccweb_head WHERE id = 1');
    await a.transact((tx) => tx.insert('tasks', 'one', { state: 'queued', stateVersion: 1 }));
    await a.transact((tx) => tx.insert('tasks', 'two', { state: 'queued', stateVersion: 1 }));
    // The lines b has not applied disappear (a hand-edited database; a catch-up cut by a lost
    // connection mid-page cannot be timed from here): b's replica cannot reach the head.
    await sql(url, 'DELETE FROM ccweb_log WHERE seq > $1', [head!.seq]);
    await expect(b.transact((tx) => tx.insert('tasks', 'three', { state: 'queued', stateVersion: 1 }))).rejects.toThrow(/replica could not follow the database/);
    await expect(b.transact((tx) => tx.insert('tasks', 'four', { state: 'queued', stateVersion: 1 }))).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(stops.map((e) => e.message)).toEqual([expect.stringMatching(/replica could not follow the database.*restart this node/)]);
  });
});
