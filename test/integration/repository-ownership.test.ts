// Repository ownership across nodes that all write (src/cluster/ownership.ts): two
// PostgresStore nodes in `writers: 'many'` mode on a real PostgreSQL (test/support/postgres-server.ts).
// The nodes' liveness is what the store's heartbeats say; a node's death is its heartbeat row aged
// past the window (what the database shows of a node killed with -9) or marked stopped.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createOwnership, type Ownership, type OwnershipOptions } from '../../src/cluster/ownership.js';
import { rendezvousOwner } from '../../src/cluster/ownership-decisions.js';
import type { RepositoryOwnerRecord } from '../../src/domain/records.js';
import { PostgresStore } from '../../src/store/index.js';
import { COMMIT_LOCK } from '../../src/store/postgres/schema.js';
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

async function openNode(url: string, nodeId: string): Promise<PostgresStore> {
  const dir = await mkdtemp(join(tmpdir(), 'ccweb-owners-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  const store = new PostgresStore({ dir: join(dir, 'replica'), url, nodeId, version: 'test', nodeUrl: `http://127.0.0.1:1/${nodeId}`, indexes: { tasks: ['state', 'repoKey'] }, writers: 'many', tailMs: 50, heartbeatMs: 200 });
  cleanups.push(() => store.close());
  await store.open();
  return store;
}

async function ownershipOf(store: PostgresStore, nodeId: string, extra: Partial<OwnershipOptions> = {}): Promise<Ownership> {
  const o = await createOwnership({ store, nodeId, nodes: () => store.nodes(), liveWindowMs: 1_000, heartbeatMs: 200, ownHeartbeat: () => store.ownHeartbeat(), intervalMs: 100, ...extra });
  cleanups.push(() => o.stop());
  return o;
}

async function sql(url: string, text: string, values: unknown[] = []): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(text, values);
  } finally {
    await client.end();
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const bothLive = (a: PostgresStore, b: PostgresStore) => until('both nodes see each other', () => a.nodes().length === 2 && b.nodes().length === 2, 10_000);

describe('repository ownership', () => {
  it('a repository goes to the node it hashes to, whichever node is asked, and is recorded once', async () => {
    const url = await server.createDatabase(`own${process.pid}_${++n}`);
    const a = await openNode(url, 'node-a');
    const b = await openNode(url, 'node-b');
    await bothLive(a, b);
    const oa = await ownershipOf(a, 'node-a');
    const ob = await ownershipOf(b, 'node-b');
    const repos = Array.from({ length: 12 }, (_, i) => `org/r${i}`);
    // Both nodes are asked about every repository at once (a load balancer spreads the webhooks).
    const routes = await Promise.all(repos.flatMap((r) => [oa.routeOf(r), ob.routeOf(r.toUpperCase())]));
    for (const [i, r] of repos.entries()) {
      const expected = rendezvousOwner(r, ['node-a', 'node-b']);
      expect(routes[2 * i]!.nodeId).toBe(expected);
      expect(routes[2 * i + 1]!.nodeId).toBe(expected);
      expect(routes[2 * i]!.self).toBe(expected === 'node-a');
      expect(routes[2 * i + 1]!.self).toBe(expected === 'node-b');
      // The other node's address, for the forward.
      if (expected === 'node-b') expect(routes[2 * i]!.url).toBe('http://127.0.0.1:1/node-b');
    }
    await a.sync();
    await b.sync();
    await until('both replicas hold every owner', async () => (await b.list('repository_owners')).length === repos.length && (await a.list('repository_owners')).length === repos.length, 5_000);
    for (const r of repos) {
      const owner = rendezvousOwner(r, ['node-a', 'node-b']);
      expect(oa.owns(r)).toBe(owner === 'node-a');
      expect(ob.owns(r.toUpperCase())).toBe(owner === 'node-b');
    }
    expect((await oa.owned()).length + (await ob.owned()).length).toBe(repos.length);
    // Each repository was taken exactly once.
    const taken = (await a.audit()).filter((e) => e.action === 'cluster.repository_taken');
    expect(taken).toHaveLength(repos.length);
    expect(new Set(taken.map((e) => String(e.metadata?.['repoKey']).toLowerCase())).size).toBe(repos.length);
  });

  it('two nodes that disagree on who is alive still record one owner: the first to take a repository keeps it while it heartbeats', async () => {
    const url = await server.createDatabase(`own${process.pid}_${++n}`);
    const a = await openNode(url, 'node-a');
    const b = await openNode(url, 'node-b');
    await bothLive(a, b);
    // b has not seen a's heartbeat yet (it just started): every repository hashes to b in its view.
    const ob = await ownershipOf(b, 'node-b', { nodes: () => b.nodes().filter((x) => x.nodeId === 'node-b') });
    const oa = await ownershipOf(a, 'node-a');
    const repos = Array.from({ length: 12 }, (_, i) => `org/d${i}`).filter((r) => rendezvousOwner(r, ['node-a', 'node-b']) === 'node-a');
    expect(repos.length).toBeGreaterThan(0);
    for (const r of repos) expect((await ob.routeOf(r)).self).toBe(true);
    // a's view says these are a's; the records say b's, and b is alive: a forwards, it does not take.
    for (const r of repos) {
      const route = await oa.routeOf(r);
      expect(route).toMatchObject({ self: false, nodeId: 'node-b' });
    }
    await a.sync();
    expect((await a.audit()).filter((e) => e.action.startsWith('cluster.repository_taken'))).toHaveLength(repos.length);
  });

  it("a node that stopped heartbeating loses its repositories to the live one, with an alert naming it; the live one's own stay", async () => {
    const url = await server.createDatabase(`own${process.pid}_${++n}`);
    const a = await openNode(url, 'node-a');
    const b = await openNode(url, 'node-b');
    await bothLive(a, b);
    const gainedByA: string[][] = [];
    const lostByB: string[][] = [];
    const oa = await ownershipOf(a, 'node-a', { onGained: async (r) => void gainedByA.push(r) });
    const ob = await ownershipOf(b, 'node-b', { onLost: (r) => void lostByB.push(r) });
    ob.start();
    const repos = Array.from({ length: 10 }, (_, i) => `org/s${i}`);
    for (const r of repos) await (rendezvousOwner(r, ['node-a', 'node-b']) === 'node-a' ? oa : ob).routeOf(r);
    const ofB = repos.filter((r) => rendezvousOwner(r, ['node-a', 'node-b']) === 'node-b');
    expect(ofB.length).toBeGreaterThan(0);
    await b.sync();
    await until("a's replica holds every owner", async () => (await a.list('repository_owners')).length === repos.length, 5_000);
    gainedByA.length = 0;
    // While b heartbeats, a's passes take nothing.
    await oa.refresh();
    await oa.refresh();
    expect(gainedByA).toEqual([]);
    // b's heartbeat stops (its process is frozen: kill -STOP, a long pause) and ages past the window.
    await b.close();
    await sql(url, "UPDATE ccweb_nodes SET role = 'writer', heartbeat_at = now() - interval '1 hour' WHERE node_id = 'node-b'");
    await until("a sees b's old heartbeat", () => {
      const seen = a.nodes().find((x) => x.nodeId === 'node-b');
      return seen !== undefined && Date.parse(seen.heartbeatAt) < Date.now() - 60_000;
    }, 5_000);
    // a has heartbeated for a whole window since it started: it judges the others. But while another
    // session holds the cluster's commit lock for longer than a heartbeat, a's decision is old by the
    // time its transaction runs, and stands for nothing.
    await sleep(1_100);
    const holder = new pg.Client({ connectionString: url });
    await holder.connect();
    cleanups.push(() => holder.end());
    await holder.query('SELECT pg_advisory_lock($1)', [COMMIT_LOCK.toString()]);
    const late = oa.refresh();
    await sleep(500);
    await holder.query('SELECT pg_advisory_unlock($1)', [COMMIT_LOCK.toString()]);
    await late;
    expect(gainedByA).toEqual([]);
    // (a's own heartbeat waited behind the lock too, on its one connection: one more steady window.)
    await sleep(1_100);
    await oa.refresh();
    expect(gainedByA.flat().sort()).toEqual([...ofB].sort());
    for (const r of repos) expect(oa.owns(r)).toBe(true);
    const alerts = (await a.audit({ level: 'alert' })).filter((e) => e.action === 'cluster.repository_taken_over');
    expect(alerts.map((e) => e.metadata?.['repoKey']).sort()).toEqual([...ofB].sort());
    expect(alerts.every((e) => e.metadata?.['previous'] === 'node-b')).toBe(true);
    // Once gained, a later pass takes nothing more.
    await oa.refresh();
    expect(gainedByA.flat().length).toBe(ofB.length);
  });

  it('a node whose own heartbeat stopped moving (a database outage) takes nobody\'s repositories until it has heartbeated a whole window again', async () => {
    const url = await server.createDatabase(`own${process.pid}_${++n}`);
    const a = await openNode(url, 'node-a');
    const b = await openNode(url, 'node-b');
    await bothLive(a, b);
    // a's own heartbeat as a sees it: frozen while it cannot be written (the outage).
    let frozen: ReturnType<PostgresStore['ownHeartbeat']> | null = null;
    let resumedAt = 0;
    const gained: string[] = [];
    const oa = await ownershipOf(a, 'node-a', {
      // Back from the outage: the first beat after a gap starts a new steady run.
      ownHeartbeat: () => frozen ?? (resumedAt > 0 ? { lastAt: a.ownHeartbeat().lastAt, steadySince: resumedAt } : a.ownHeartbeat()),
      onGained: async (r) => void gained.push(...r),
    });
    const ob = await ownershipOf(b, 'node-b');
    const ofB = Array.from({ length: 10 }, (_, i) => `org/q${i}`).filter((r) => rendezvousOwner(r, ['node-a', 'node-b']) === 'node-b');
    for (const r of ofB) await ob.routeOf(r);
    await b.sync();
    await until("a's replica holds b's owners", async () => (await a.list('repository_owners')).length === ofB.length, 5_000);
    await sleep(1_100);
    // The outage: a's view stops moving, and b's heartbeat in it grows old (b's own stopped too).
    await b.close();
    await sql(url, "UPDATE ccweb_nodes SET heartbeat_at = now() - interval '1 hour' WHERE node_id = 'node-b'");
    await until("a sees b's old heartbeat", () => {
      const seen = a.nodes().find((x) => x.nodeId === 'node-b');
      return seen !== undefined && Date.parse(seen.heartbeatAt) < Date.now() - 60_000;
    }, 5_000);
    frozen = a.ownHeartbeat();
    await sleep(600); // past two of a's heartbeats without its own written
    await oa.refresh();
    expect(gained).toEqual([]);
    expect((await oa.routeOf(ofB[0]!)).nodeId).toBe('node-b');
    // Back: a's own heartbeat moves again; one more window, then b's repositories are a's.
    frozen = null;
    resumedAt = Date.now();
    await sleep(250);
    await oa.refresh();
    expect(gained).toEqual([]);
    await sleep(1_200);
    await oa.refresh();
    expect(gained.sort()).toEqual([...ofB].sort());
  });

  it('acts for a repository only once its actors are hosted; a gain that failed is asked for again, and comments waiting for Gitea count as work', async () => {
    const url = await server.createDatabase(`own${process.pid}_${++n}`);
    const a = await openNode(url, 'node-a');
    let attempts = 0;
    let release!: () => void;
    const hosting = new Promise<void>((r) => (release = r));
    const oa = await ownershipOf(a, 'node-a', {
      onGained: async () => {
        attempts += 1;
        if (attempts === 1) throw new Error('store unavailable');
        await hosting;
      },
    });
    // A comment parked for Gitea's confirmation, in a repository nobody owns yet.
    await a.transact((tx) => tx.insert('pending_intake', 'k1', { key: 'k1', state: 'waiting', comment: { repoKey: 'default:org/p' } }));
    await expect(oa.refresh()).rejects.toThrow('store unavailable');
    expect((await a.list<RepositoryOwnerRecord>('repository_owners')).map((r) => r.repoKey)).toEqual(['default:org/p']);
    expect(oa.owns('default:org/p')).toBe(false);
    const second = oa.refresh();
    await until('the second gain to start', () => attempts === 2, 5_000);
    // Recorded as a's, being hosted: not acted for yet.
    expect(oa.owns('default:org/p')).toBe(false);
    release();
    await second;
    expect(oa.owns('DEFAULT:org/P')).toBe(true);
    await oa.refresh();
    expect(attempts).toBe(2);
  });

  it('takes unowned unfinished work that hashes to it; leads() names exactly one live node', async () => {
    const url = await server.createDatabase(`own${process.pid}_${++n}`);
    const a = await openNode(url, 'node-a');
    const b = await openNode(url, 'node-b');
    await bothLive(a, b);
    const oa = await ownershipOf(a, 'node-a');
    const ob = await ownershipOf(b, 'node-b');
    expect([oa.leads(), ob.leads()].filter(Boolean)).toHaveLength(1);
    // Tasks written before any node owned their repositories (a store moved from standby mode).
    await a.transact(async (tx) => {
      for (let i = 0; i < 8; i++) await tx.insert('tasks', `t${i}`, { taskId: `t${i}`, repoKey: `org/u${i}`, state: i === 7 ? 'succeeded' : 'queued' });
    });
    await b.sync();
    await until('b sees the tasks', async () => (await b.list('tasks')).length === 8, 5_000);
    await Promise.all([oa.refresh(), ob.refresh()]);
    await a.sync();
    await until('both replicas hold the owners', async () => (await a.list('repository_owners')).length === 7 && (await b.list('repository_owners')).length === 7, 5_000);
    const owners = await a.list<RepositoryOwnerRecord>('repository_owners');
    // A finished task's repository needs no owner.
    expect(owners.map((o) => o.repoKey).sort()).toEqual(Array.from({ length: 7 }, (_, i) => `org/u${i}`));
    for (const o of owners) expect(o.nodeId).toBe(rendezvousOwner(o.repoKey, ['node-a', 'node-b']));
  });
});
