// What the PostgreSQL engine promises beyond the contract both engines share (the store tests run
// on both: vitest project store-on-postgres): the database is the store, the replica a cache; the
// database itself refuses a second writer's stale view; a database that goes away is waited for
// and nothing is lost or written twice; the schema's version is checked; the audit table is
// append-only; a store with history moves over by `migrate-store`. A real PostgreSQL throughout
// (test/support/postgres-server.ts), crashed with kill -9 where a crash is the point.
import { spawn } from 'node:child_process';
import { connect, createServer as createNetServer, type AddressInfo, type Socket } from 'node:net';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { copyEmbeddedStore, createStore, PostgresStore, sqlStoreContents, storeDigest, StoreError, StoreUnavailableError, type PostgresStoreOptions, type SqlStore } from '../../src/store/index.js';
import { migrateStore } from '../../src/cli/migrate-store.js';
import { migrate, MIGRATIONS, MigrationNeedsNodesStoppedError, SCHEMA_VERSION, WRITER_LOCK, type Migration } from '../../src/store/postgres/schema.js';
import { startThrowawayPostgres, type ThrowawayPostgres } from '../support/postgres-server.js';
import { until } from '../support/until.js';
import { copyFixture, expectedDump, expectStoreHolds, JOURNAL_FIXTURES } from '../support/journal-fixtures.js';
import { commandIo } from '../support/migrate-store-io.js';

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
  const dir = await mkdtemp(join(tmpdir(), 'ccweb-pg-store-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

async function database(): Promise<string> {
  return server.createDatabase(`s${process.pid}_${++n}`);
}

async function openStore(url: string, dir: string, extra: Partial<PostgresStoreOptions> = {}): Promise<PostgresStore> {
  const store = new PostgresStore({ dir, url, nodeId: 'node-a', version: 'test', indexes: { tasks: ['state'] }, ...extra });
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

describe('PostgreSQL store: the database is the store', () => {
  it('an acknowledged commit survives losing the replica: a new data directory is rebuilt from the database alone', async () => {
    const url = await database();
    const first = await openStore(url, join(await tempDir(), 'replica'));
    for (let i = 0; i < 50; i++) {
      await first.transact(async (tx) => {
        await tx.insert('tasks', `t${i}`, { state: i % 2 ? 'queued' : 'succeeded', stateVersion: 1 });
        await tx.appendAudit({ action: 'task.created', actor: 'test', taskId: `t${i}` });
      });
    }
    await first.transact((tx) => tx.archive('tasks', 't0'));
    await first.compact(); // the replica's own cold tier now holds t0
    const before = await storeDigest(first);
    await first.close();

    const elsewhere = await openStore(url, join(await tempDir(), 'replica'));
    expect(await storeDigest(elsewhere)).toBe(before);
    expect(await elsewhere.get('tasks', 't0')).toEqual({ state: 'succeeded', stateVersion: 1 });
    expect(await elsewhere.count('tasks')).toBe(49);
    expect(await elsewhere.archivedCount('tasks')).toBe(1);
    expect((await elsewhere.audit({ taskId: 't7' })).map((e) => e.action)).toEqual(['task.created']);
    expect(elsewhere.stats().replayedAtOpen).toBe(51);
    // The tables hold the same: what an operator's query sees.
    const [row] = await sql<{ body: { state: string }; archived: boolean }>(url, "SELECT body, archived FROM ccweb_records WHERE collection = 'tasks' AND key = 't0'");
    expect(row).toEqual({ body: { state: 'succeeded', stateVersion: 1 }, archived: true });
    expect((await sql<{ n: string }>(url, 'SELECT count(*) AS n FROM ccweb_audit'))[0]!.n).toBe('50');
  });

  it('a replica that fell behind (its node crashed before writing its journal) catches up from the log', async () => {
    const url = await database();
    const dir = join(await tempDir(), 'replica');
    const store = await openStore(url, dir);
    await store.transact((tx) => tx.insert('tasks', 'a', { v: 1 }));
    await store.transact((tx) => tx.insert('tasks', 'b', { v: 2 }));
    await store.close();
    // The replica's journal is unsynced: after a power cut it may have lost its tail.
    for (const name of (await readdir(dir)).filter((f) => f.startsWith('journal-'))) await writeFile(join(dir, name), '');
    const again = await openStore(url, dir);
    expect(await again.list('tasks')).toEqual([{ v: 1 }, { v: 2 }]);
    expect(again.stats().replayedAtOpen).toBe(2);
  });

  it('never removes a directory that is not its replica (an embedded store) and says what to do', async () => {
    const url = await database();
    const dir = join(await tempDir(), 'store');
    const embedded = createStore({ dir });
    await embedded.open();
    await embedded.transact((tx) => tx.insert('tasks', 'kept', {}));
    await embedded.close();
    await expect(openStore(url, dir)).rejects.toThrow(/is not empty and is no replica of a database.*move it away/);
    const reopened = createStore({ dir });
    await reopened.open();
    expect(await reopened.get('tasks', 'kept')).toEqual({});
    await reopened.close();
  });
});

describe('PostgreSQL store: one writer, checked by the database', () => {
  it('a second node on the same database is refused, naming the node that writes, and starts once it stopped', async () => {
    const url = await database();
    const a = await openStore(url, join(await tempDir(), 'replica'), { nodeId: 'node-a' });
    await a.transact((tx) => tx.insert('tasks', 'x', { by: 'a' }));
    const error = await openStore(url, join(await tempDir(), 'replica'), { nodeId: 'node-b' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreError);
    expect((error as StoreError).code).toBe('database_writer_taken');
    expect((error as Error).message).toMatch(/another node writes postgres:\/\/127\.0\.0\.1:\d+\/\w+ \(node node-a, last heartbeat /);
    await a.close();
    const b = await openStore(url, join(await tempDir(), 'replica'), { nodeId: 'node-b' });
    expect(await b.get('tasks', 'x')).toEqual({ by: 'a' });
  });

  it('a standby waits while another node writes, says who, and takes over (with everything written) once that node is gone', async () => {
    const url = await database();
    const a = await openStore(url, join(await tempDir(), 'replica'), { nodeId: 'node-a' });
    await a.transact((tx) => tx.insert('tasks', 'x', { by: 'a' }));
    const waiting: string[] = [];
    let opened = false;
    const standby = openStore(url, join(await tempDir(), 'replica'), { nodeId: 'node-b', standby: { onWaiting: (m) => void waiting.push(m), pollMs: 100 } }).then((b) => {
      opened = true;
      return b;
    });
    await until('the standby to say it waits', () => waiting.length > 0, 20_000);
    expect(waiting[0]).toMatch(/another node writes .* \(node node-a, last heartbeat /);
    await a.transact((tx) => tx.insert('tasks', 'y', { by: 'a' }));
    expect(opened).toBe(false);
    await a.close();
    const b = await standby;
    expect(await b.list('tasks')).toEqual([{ by: 'a' }, { by: 'a' }]);
    await b.transact((tx) => tx.insert('tasks', 'z', { by: 'b' }));
    expect((await sql<{ node_id: string }>(url, 'SELECT node_id FROM ccweb_log ORDER BY seq')).map((r) => r.node_id)).toEqual(['node-a', 'node-a', 'node-b']);
  });

  it('a standby keeps its replica at the writer’s head while it waits: its takeover replays only what it had not applied yet', async () => {
    const url = await database();
    const a = await openStore(url, join(await tempDir(), 'replica'), { nodeId: 'node-a' });
    await a.transact((tx) => tx.insert('tasks', 'first', { by: 'a' }));
    const waiting: string[] = [];
    const b = new PostgresStore({ dir: join(await tempDir(), 'replica'), url, nodeId: 'node-b', version: 'test', indexes: { tasks: ['state'] }, tailMs: 100, standby: { onWaiting: (m) => void waiting.push(m), pollMs: 100 } });
    cleanups.push(() => b.close());
    const opening = b.open();
    await until('the standby to say it waits', () => waiting.length > 0, 20_000);
    for (let i = 0; i < 300; i++) {
      await a.transact(async (tx) => {
        await tx.insert('tasks', `t${i}`, { by: 'a', i });
        await tx.appendAudit({ action: 'task.created', actor: 'test', taskId: `t${i}` });
      });
    }
    await until('the standby to have applied all 300', () => b.stats().tailedWhileWaiting === 300, 20_000);
    expect(b.stats().replayedAtOpen).toBe(1);
    await a.close();
    await opening;
    // Nothing was left to replay at the takeover.
    expect(b.stats()).toMatchObject({ replayedAtOpen: 1, tailedWhileWaiting: 300 });
    expect(await b.count('tasks')).toBe(301);
    expect((await b.audit({ taskId: 't299' })).map((e) => e.action)).toEqual(['task.created']);
    await b.transact((tx) => tx.insert('tasks', 'after', { by: 'b' }));
    expect((await sql<{ seq: string }>(url, 'SELECT seq FROM ccweb_head'))[0]!.seq).toBe('302');
  });

  it('a standby keeps waiting through a PostgreSQL restart (a crash and crash recovery) and takes over afterwards', async () => {
    const url = await database();
    const a = await openStore(url, join(await tempDir(), 'replica'), { nodeId: 'node-a', outageMs: 60_000 });
    await a.transact((tx) => tx.insert('tasks', 'x', { by: 'a' }));
    const waiting: string[] = [];
    let failed: unknown;
    // Its heartbeat sets how long it leaves the lock to the writer after the outage (two of them).
    const standby = openStore(url, join(await tempDir(), 'replica'), { nodeId: 'node-b', outageMs: 60_000, heartbeatMs: 1000, standby: { onWaiting: (m) => void waiting.push(m), pollMs: 100 } });
    standby.catch((error: unknown) => (failed = error));
    await until('the standby to say it waits', () => waiting.length > 0, 20_000);
    await server.crash();
    // Several of the standby's polls meet no server.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    await server.restart();
    await a.transact((tx) => tx.insert('tasks', 'y', { by: 'a' }));
    expect(failed).toBeUndefined();
    await a.close();
    const b = await standby;
    expect(await b.list('tasks')).toEqual([{ by: 'a' }, { by: 'a' }]);
  });

  it('after a PostgreSQL restart the writer keeps writing: idle, it takes its lock back at its next heartbeat, before the standby asks', async () => {
    const url = await database();
    // A's heartbeat comes later after the restart than B's reconnect: without its grace B would win.
    const a = await openStore(url, join(await tempDir(), 'replica'), { nodeId: 'node-a', outageMs: 60_000, heartbeatMs: 1500 });
    await a.transact((tx) => tx.insert('tasks', 'x', { by: 'a' }));
    const waiting: string[] = [];
    let opened = false;
    const standby = openStore(url, join(await tempDir(), 'replica'), { nodeId: 'node-b', outageMs: 60_000, heartbeatMs: 1500, standby: { onWaiting: (m) => void waiting.push(m), pollMs: 100 } });
    void standby.then(() => (opened = true), () => undefined);
    await until('the standby to say it waits', () => waiting.length > 0, 20_000);
    await server.crash();
    await new Promise((resolve) => setTimeout(resolve, 1500));
    await server.restart();
    // Nothing is committed meanwhile: only A's heartbeat can take the lock back, and it must, before
    // B's grace (two heartbeats from when it sees the restart) has passed. By 6 s B has reconnected
    // (≤ 2 s) and its grace (3 s) is over: whoever holds the lock then keeps it.
    await new Promise((resolve) => setTimeout(resolve, 6000));
    const holder = await sql<{ name: string }>(
      url,
      `SELECT a.application_name AS name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
        WHERE l.locktype = 'advisory' AND l.granted AND l.classid::bigint = $1 AND l.objid::bigint = $2`,
      [Number(WRITER_LOCK >> 32n), Number(WRITER_LOCK & 0xffffffffn)],
    );
    expect(holder.map((h) => h.name)).toEqual(['ccweb-gitea node-a']);
    expect(opened).toBe(false);
    await a.transact((tx) => tx.insert('tasks', 'y', { by: 'a' }));
    expect((await sql<{ node_id: string; role: string }>(url, "SELECT node_id, role FROM ccweb_nodes ORDER BY node_id")).map((r) => [r.node_id, r.role])).toEqual([
      ['node-a', 'writer'],
      ['node-b', 'standby'],
    ]);
    await a.close();
    const b = await standby;
    expect(await b.list('tasks')).toEqual([{ by: 'a' }, { by: 'a' }]);
  });

  it('after an outage a standby leaves the free lock to the writer for two of its heartbeats before it takes it', async () => {
    const url = await database();
    const a = await openStore(url, join(await tempDir(), 'replica'), { nodeId: 'node-a', outageMs: 60_000 });
    await a.transact((tx) => tx.insert('tasks', 'x', { by: 'a' }));
    const waiting: string[] = [];
    // It polls every 3 s: the restart may well fall between two polls, unseen but for the server's
    // start time, which is what the grace goes by.
    const standby = openStore(url, join(await tempDir(), 'replica'), { nodeId: 'node-b', outageMs: 60_000, heartbeatMs: 2500, standby: { onWaiting: (m) => void waiting.push(m), pollMs: 3000 } });
    await until('the standby to say it waits', () => waiting.length > 0, 20_000);
    await server.crash();
    // The writer is gone for good while the database is down: nobody will take the lock back.
    await a.close();
    await server.restart();
    const back = Date.now();
    const b = await standby;
    // B's first poll after the restart (≤ 3 s; possibly a moment before restart() has returned) sees
    // the new start time and leaves the lock alone for 2 × 2.5 s. Without that it takes the lock then.
    expect(Date.now() - back).toBeGreaterThanOrEqual(4000);
    expect(await b.list('tasks')).toEqual([{ by: 'a' }]);
  });

  it('a writer whose connection was cut on its side only, its old session still holding the lock, waits for that session instead of stopping', async () => {
    // Test double: a TCP relay in front of the real server that can drop the writer's side of every
    // connection while keeping the server's side open (a NAT or firewall reset); loopback cannot.
    const url = await database();
    const target = new URL(url);
    const upstreams = new Set<Socket>();
    const downstreams = new Set<Socket>();
    const relay = createNetServer((down) => {
      const up = connect(Number(target.port), target.hostname);
      upstreams.add(up);
      downstreams.add(down);
      down.pipe(up);
      up.pipe(down);
      down.on('error', () => undefined);
      up.on('error', () => undefined);
      // The server's side stays open when the writer's closes: only the test ends it.
      down.on('close', () => up.unpipe(down));
    });
    await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
    cleanups.push(async () => {
      for (const sock of [...upstreams, ...downstreams]) sock.destroy();
      await new Promise((resolve) => relay.close(resolve));
    });
    const viaRelay = new URL(url);
    viaRelay.port = String((relay.address() as AddressInfo).port);
    let failed: unknown;
    const a = await openStore(viaRelay.toString(), join(await tempDir(), 'replica'), { nodeId: 'node-a', heartbeatMs: 300, onUnavailable: (e) => (failed = e) });
    await a.transact((tx) => tx.insert('tasks', 'x', { by: 'a' }));
    const stale = [...upstreams];
    for (const down of downstreams) down.destroy();
    // Several heartbeats meet the lock held by A's own old session.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(failed).toBeUndefined();
    // The server ends that session (as its keepalives would) in a moment: A takes its lock back.
    setTimeout(() => {
      for (const up of stale) up.destroy();
    }, 1000);
    // A commit now waits (its retries meet the same lock) until the old session is gone, then lands.
    await a.transact((tx) => tx.insert('tasks', 'y', { by: 'a' }));
    expect(failed).toBeUndefined();
    expect(await a.list('tasks')).toEqual([{ by: 'a' }, { by: 'a' }]);
  });

  it('every node is listed with its role: the writer, a waiting standby, and a node that stopped cleanly', async () => {
    const url = await database();
    const a = await openStore(url, join(await tempDir(), 'replica'), { nodeId: 'node-a', heartbeatMs: 100 });
    const stop = new AbortController();
    const waiting: string[] = [];
    const b = openStore(url, join(await tempDir(), 'replica'), { nodeId: 'node-b', standby: { onWaiting: (m) => void waiting.push(m), signal: stop.signal, pollMs: 100 } });
    const roles = () => Object.fromEntries(a.nodes().map((n) => [n.nodeId, n.role]));
    await until('the writer to see the standby', () => roles()['node-b'] === 'standby', 20_000);
    expect(roles()).toEqual({ 'node-a': 'writer', 'node-b': 'standby' });
    stop.abort();
    await expect(b).rejects.toMatchObject({ code: 'store_open_aborted' });
    await a.close();
    const c = await openStore(url, join(await tempDir(), 'replica'), { nodeId: 'node-c' });
    expect(Object.fromEntries(c.nodes().map((n) => [n.nodeId, n.role]))).toEqual({ 'node-a': 'stopped', 'node-b': 'standby', 'node-c': 'writer' });
  });

  it('a standby stops waiting when its start is aborted (SIGTERM during start-up)', async () => {
    const url = await database();
    await openStore(url, join(await tempDir(), 'replica'), { nodeId: 'node-a' });
    const stop = new AbortController();
    const standby = openStore(url, join(await tempDir(), 'replica'), { nodeId: 'node-b', standby: { onWaiting: () => stop.abort(), signal: stop.signal, pollMs: 100 } });
    await expect(standby).rejects.toMatchObject({ code: 'store_open_aborted' });
  });

  it('a key inserted behind the replica’s back is refused by the database (intake’s dedupe holds even if memory is wrong)', async () => {
    const url = await database();
    const store = await openStore(url, join(await tempDir(), 'replica'));
    await sql(url, `INSERT INTO ccweb_records (collection, key, body, seq) VALUES ('webhook_deliveries', 'default:d-1', '{}', 0)`);
    const error = await store.transact((tx) => tx.insert('webhook_deliveries', 'default:d-1', { taskId: 't' })).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect((error as Error).message).toMatch(/webhook_deliveries: a key this node inserted already exists in the database/);
    // Fail-stop: nothing more is acknowledged; the log holds nothing of the refused batch.
    await expect(store.transact((tx) => tx.insert('tasks', 'after', {}))).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(await sql(url, 'SELECT seq FROM ccweb_log')).toEqual([]);
  });

  it('a compare-and-swap against a version the database no longer has is refused', async () => {
    const url = await database();
    const store = await openStore(url, join(await tempDir(), 'replica'));
    await store.transact((tx) => tx.insert('tasks', 't', { state: 'queued', stateVersion: 1 }));
    await sql(url, `UPDATE ccweb_records SET body = '{"state":"running","stateVersion":2}' WHERE key = 't'`);
    const error = await store.transact((tx) => tx.put('tasks', 't', { state: 'cancelled', stateVersion: 1 }, { expectVersion: 1, versionField: 'stateVersion' })).catch((e: unknown) => e);
    expect((error as Error).message).toMatch(/tasks: a version this node compared against is not the database's/);
    expect((await sql<{ body: unknown }>(url, "SELECT body FROM ccweb_records WHERE key = 't'"))[0]!.body).toEqual({ state: 'running', stateVersion: 2 });
  });

  it('a log that moved on without this node (another writer) stops it rather than merging', async () => {
    const url = await database();
    const store = await openStore(url, join(await tempDir(), 'replica'));
    await store.transact((tx) => tx.insert('tasks', 'a', {}));
    await sql(url, "UPDATE ccweb_head SET seq = seq + 1, node_id = 'intruder'");
    await expect(store.transact((tx) => tx.insert('tasks', 'b', {}))).rejects.toThrow(/log is at seq 2 \(written by intruder\), not 1/);
  });

  it('the audit table is append-only: the database refuses UPDATE, DELETE and TRUNCATE', async () => {
    const url = await database();
    const store = await openStore(url, join(await tempDir(), 'replica'));
    await store.transact((tx) => tx.appendAudit({ action: 'x', actor: 'test' }));
    for (const statement of ["UPDATE ccweb_audit SET action = 'y'", 'DELETE FROM ccweb_audit', 'TRUNCATE ccweb_audit']) {
      await expect(sql(url, statement), statement).rejects.toThrow(/ccweb_audit is append-only/);
    }
  });

  it('refuses a schema newer than it knows, in one line that says what to do', async () => {
    const url = await database();
    const store = await openStore(url, join(await tempDir(), 'replica'));
    await store.close();
    await sql(url, "INSERT INTO ccweb_schema (version, summary) VALUES (99, 'from the future')");
    const error = await openStore(url, join(await tempDir(), 'replica')).catch((e: unknown) => e);
    expect((error as StoreError).code).toBe('database_schema_too_new');
    expect((error as Error).message).toMatch(new RegExp(`schema is version 99, newer than this ccweb-gitea knows \\(${SCHEMA_VERSION}\\): upgrade this node`));
  });

  it('rolling upgrade: an additive migration runs beside a running node; one that needs every node stopped refuses, naming them, until they stopped', async () => {
    const url = await database();
    const a = await openStore(url, join(await tempDir(), 'replica'), { nodeId: 'node-a' });
    const [v1, v2] = [SCHEMA_VERSION + 1, SCHEMA_VERSION + 2];
    const additive: Migration = { version: v1, summary: 'an index', sql: 'CREATE INDEX ccweb_test_v2 ON ccweb_log (node_id)' };
    const reshaping: Migration = { version: v2, summary: 'a reshape', sql: 'CREATE TABLE ccweb_test_v3 (x int)', needsAllNodesStopped: true };
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    cleanups.push(() => client.end());
    expect(await migrate(client, [...MIGRATIONS, additive], 'node-b')).toEqual([v1]);
    const blocked = await migrate(client, [...MIGRATIONS, additive, reshaping], 'node-b').catch((e: unknown) => e);
    expect(blocked).toBeInstanceOf(MigrationNeedsNodesStoppedError);
    expect((blocked as Error).message).toMatch(new RegExp(`moves to version ${v2} \\(a reshape\\), which needs every other node stopped; still running: node-a: stop them`));
    expect((await sql<{ v: number }>(url, 'SELECT max(version) AS v FROM ccweb_schema'))[0]!.v).toBe(v1);
    await a.close();
    expect(await migrate(client, [...MIGRATIONS, additive, reshaping], 'node-b')).toEqual([v2]);
  });

  it('never puts the password of the URL in an error', async () => {
    const url = new URL(await database());
    url.username = 'nobody';
    url.password = 's3cret-pass';
    const error = await openStore(url.toString(), join(await tempDir(), 'replica')).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(Error);
    expect(String((error as Error).message)).not.toContain('s3cret-pass');
    expect((error as StoreError).code).toBe('database_unreachable');
  });
});

describe('PostgreSQL store: the database goes away', () => {
  it('a kill -9 of PostgreSQL during a stream of commits: they wait, then every acknowledged one is there once', async () => {
    const url = await database();
    const store = await openStore(url, join(await tempDir(), 'replica'), { outageMs: 60_000 });
    const acknowledged: string[] = [];
    const commits: Promise<void>[] = [];
    for (let i = 0; i < 40; i++) {
      const key = `k${i}`;
      commits.push(store.transact((tx) => tx.insert('tasks', key, { i })).then(() => void acknowledged.push(key)));
      if (i === 20) {
        await server.crash();
        setTimeout(() => void server.restart(), 1500);
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await Promise.all(commits);
    expect(acknowledged).toHaveLength(40);
    expect(store.stats().databaseReconnects).toBeGreaterThan(0);
    const log = await sql<{ seq: string }>(url, 'SELECT seq FROM ccweb_log ORDER BY seq');
    expect(log.map((r) => Number(r.seq))).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
    const keys = await sql<{ key: string }>(url, "SELECT key FROM ccweb_records WHERE collection = 'tasks' ORDER BY (body->>'i')::int");
    expect(keys.map((r) => r.key)).toEqual(acknowledged.sort((a, b) => Number(a.slice(1)) - Number(b.slice(1))));
  });

  it('an outage longer than allowed stops the store with a clear error; a restart reloads what was acknowledged', async () => {
    const url = await database();
    const dir = join(await tempDir(), 'replica');
    const store = await openStore(url, dir, { outageMs: 1500 });
    await store.transact((tx) => tx.insert('tasks', 'before', {}));
    await server.crash();
    try {
      await expect(store.transact((tx) => tx.insert('tasks', 'during', {}))).rejects.toThrow(/did not come back within 2 s/);
      await expect(store.sync()).rejects.toBeInstanceOf(StoreUnavailableError);
    } finally {
      await server.restart();
    }
    await store.close();
    const again = await openStore(url, dir);
    expect(await again.get('tasks', 'before')).toEqual({});
    expect(await again.get('tasks', 'during')).toBeUndefined();
  });
});

describe('migrate-store', () => {
  async function embeddedWithHistory(dir: string): Promise<SqlStore> {
    const store = createStore({ dir, indexes: { tasks: ['state'] } });
    await store.open();
    for (let i = 0; i < 300; i++) {
      await store.transact(async (tx) => {
        await tx.insert('tasks', `t${i}`, { state: i % 3 ? 'succeeded' : 'queued', stateVersion: 1, n: i });
        await tx.insert('webhook_deliveries', `default:d-${i}`, { taskId: `t${i}` });
        await tx.appendAudit({ action: 'task.created', actor: 'test', taskId: `t${i}`, deliveryId: `d-${i}` });
      });
    }
    for (let i = 0; i < 300; i += 2) await store.transact((tx) => tx.archive('tasks', `t${i}`));
    await store.transact((tx) => tx.put('tasks', 't1', { state: 'failed', stateVersion: 2, n: 1 }, { expectVersion: 1, versionField: 'stateVersion' }));
    return store;
  }

  it('copies every record (archived ones too) and the audit history into an empty database, which then reads the same', async () => {
    const source = await embeddedWithHistory(join(await tempDir(), 'store'));
    cleanups.push(() => source.close());
    expect(await source.archivedCount('tasks')).toBe(150);
    const url = await database();
    const summary = await copyEmbeddedStore(sqlStoreContents(source), { url, nodeId: 'migrate', version: 'test' });
    expect(summary.records['tasks']).toEqual({ hot: 150, archived: 150 });
    expect(summary.auditEvents).toBe(300);

    const store = await openStore(url, join(await tempDir(), 'replica'));
    expect(await storeDigest(store)).toBe(await storeDigest(source));
    expect(await store.get('tasks', 't0')).toEqual({ state: 'queued', stateVersion: 1, n: 0 });
    expect((await store.audit({ deliveryId: 'd-42' })).map((e) => e.seq)).toEqual((await source.audit({ deliveryId: 'd-42' })).map((e) => e.seq));
    // It goes on from there: the next audit seq follows the copied ones, dedupe keys are there.
    await expect(store.transact((tx) => tx.insert('webhook_deliveries', 'default:d-7', {}))).rejects.toMatchObject({ code: 'unique_violation' });
    const next = await store.transact((tx) => tx.appendAudit({ action: 'after', actor: 'test' }));
    expect(next.seq).toBe(301);
  });

  it('the command: refuses a running service’s data directory and a database that is not empty; copies otherwise', async () => {
    const dataDir = await tempDir();
    const source = await embeddedWithHistory(join(dataDir, 'store'));
    const url = await database();
    const { io, lines } = commandIo(dataDir, { CCWEB_DATABASE_URL: url });
    await source.close();
    // The service is running: another live process holds the data directory's lock.
    const service = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' });
    await writeFile(join(dataDir, 'store', 'LOCK'), String(service.pid));
    expect(await migrateStore(io)).toBe(1);
    expect(lines.at(-1)).toMatch(/the service is running on this data directory.*; stop it first/);
    service.kill('SIGKILL');
    await new Promise((resolve) => service.once('exit', resolve));

    expect(await migrateStore(io)).toBe(0);
    expect(lines.at(-2)).toMatch(/done: \d+ log line\(s\); read back and compared/);
    expect(await migrateStore(io)).toBe(1);
    expect(lines.at(-1)).toMatch(/already holds a store \(its log is at seq \d+\): migrate into an empty database/);
    expect(lines.join('\n')).not.toMatch(/postgres:\/\/postgres@/); // the URL is only ever described

    lines.length = 0;
    // Without a database URL the command moves an earlier version's journal store into SQLite: this one is SQLite already.
    expect(await migrateStore({ ...io, env: { ...io.env, CCWEB_DATABASE_URL: '' } })).toBe(1);
    expect(lines.at(-1)).toMatch(/store\.db exists already: nothing to migrate/);
  });

  async function journalIntoDatabase(name: (typeof JOURNAL_FIXTURES)[number]): Promise<void> {
    const { parent: dataDir, dir } = copyFixture(name);
    cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
    const before = await readdir(dir);
    const url = await database();
    const { io, lines } = commandIo(dataDir, { CCWEB_DATABASE_URL: url });
    const code = await migrateStore(io);
    expect(code, lines.join('\n')).toBe(0);
    // Nothing of the journal store was changed or added (no SQLite store in its place either).
    expect((await readdir(dir)).sort()).toEqual(before.sort());
    const store = await openStore(url, join(await tempDir(), 'replica'));
    await expectStoreHolds(store, expectedDump(name));
  }

  const WITHOUT_NUL = JOURNAL_FIXTURES.filter((name) => name !== 'history');
  it.each(WITHOUT_NUL)('the command copies the journal store an earlier version left (%s) as that version read it, and leaves it in place', journalIntoDatabase);

  // `history` holds a record whose text has a NUL (U+0000; a comment's text can). This engine's log keeps
  // ops as jsonb, which refuses it: the copy stops with an error. The SQL engine keeps bodies as text;
  // once migrate-store copies into it, this passes and `.fails` must go.
  it.fails('the command copies a journal store holding a NUL in a record’s text (history)', () => journalIntoDatabase('history'));
});
