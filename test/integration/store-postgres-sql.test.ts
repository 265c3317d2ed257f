// The SQL store on PostgreSQL beyond the contract every engine passes (test/unit/store.test.ts runs on
// it in the store-on-postgres project): one live process per node id, on the database's clock; an
// earlier version's PostgreSQL store refused at open and moved in place by `migrate-store`; the
// embedded store copied into an empty database. A real PostgreSQL throughout.
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { migrateStore } from '../../src/cli/migrate-store.js';
import { formatOperatorError, OperatorError } from '../../src/service/operator-error.js';
import { storeOpenError } from '../../src/service/startup-checks.js';
import { IDLE_IN_TRANSACTION_MS } from '../../src/store/postgres-sql-store.js';
import { createPostgresSqlStore, createSqliteStore, createStore, type SqlStore } from '../../src/store/index.js';
import { copyEmbeddedStore } from '../../src/upgrade/embedded-to-postgres.js';
import { sqlStoreContents } from '../../src/upgrade/store-contents.js';
import { storeDigest } from '../../src/upgrade/store-digest.js';
import { EARLIER_SCHEMA } from '../../src/upgrade/earlier-postgres.js';
import { NodeIdInUseError } from '../../src/store/sql/nodes.js';
import { SCHEMA_VERSION } from '../../src/store/sql/schema.js';
import { startPostgresRelay } from '../support/postgres-relay.js';
import { startThrowawayPostgres, type ThrowawayPostgres } from '../support/postgres-server.js';
import { copyFixture, expectedDump, expectStoreHolds, JOURNAL_FIXTURES } from '../support/journal-fixtures.js';
import { until } from '../support/until.js';
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
  const dir = await mkdtemp(join(tmpdir(), 'ccweb-pg-sql-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

const EARLIER_FIXTURE = join(import.meta.dirname, '../fixtures/earlier-postgres');
const database = () => server.createDatabase(`q${process.pid}_${++n}`);

async function sql<T extends pg.QueryResultRow>(url: string, text: string, values: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(text, values)).rows;
  } finally {
    await client.end();
  }
}

type NodeOptions = NonNullable<Parameters<typeof createPostgresSqlStore>[0]['node']>;

async function openNode(url: string, node: Partial<NodeOptions> = {}): Promise<SqlStore> {
  const store = createPostgresSqlStore({ url, node: { nodeId: 'node-a', url: 'http://10.0.0.1:8080', version: 'test', heartbeatMs: 200, ...node } });
  cleanups.push(() => store.close());
  await store.open();
  return store;
}

describe('PostgreSQL SQL store: one live process per data directory', () => {
  it('a node started on a data directory another live process holds is refused (store_locked) naming it, whatever its node id; once that process is gone it starts', async () => {
    const url = await database();
    const lockDir = join(await tempDir(), 'store');
    // The other node's process: alive, its pid in the directory's LOCK.
    const other = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' });
    await mkdir(lockDir, { recursive: true });
    await writeFile(join(lockDir, 'LOCK'), String(other.pid));
    const open = () => createPostgresSqlStore({ url, lockDir, node: { nodeId: 'node-two', url: null, version: 'test', heartbeatMs: 200 } });
    const error = await open().open().catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'store_locked', message: expect.stringContaining(`in use by process ${other.pid}`) });
    expect(storeOpenError(error, lockDir)).toMatchObject({ refusal: 'store_locked', key: 'CCWEB_DATA_DIR', exitCode: 75 });
    other.kill('SIGKILL');
    await new Promise((r) => other.once('exit', r));
    const store = open();
    cleanups.push(() => store.close());
    await store.open();
    expect(JSON.parse(await readFile(join(lockDir, 'LOCK'), 'utf8'))).toMatchObject({ pid: process.pid });
    await store.close();
    await expect(readFile(join(lockDir, 'LOCK'), 'utf8')).rejects.toMatchObject({ code: 'ENOENT' });
  });
});

describe('PostgreSQL SQL store: one live process per node id', () => {
  it('a second process with a live node id is refused in one line naming the other (host, pid, url, last heartbeat); after a clean stop it starts', async () => {
    const url = await database();
    const first = await openNode(url, { host: 'machine-one', pid: 4242 });
    const error = await openNode(url, { host: 'machine-two', url: 'http://10.0.0.2:8080' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NodeIdInUseError);
    const heartbeat = (await first.nodes())[0]!.heartbeatAt;
    expect((error as Error).message).toBe(`node id node-a is in use by a running process: host machine-one, pid 4242, url http://10.0.0.1:8080, last heartbeat ${(error as NodeIdInUseError).other.heartbeatAt} (database clock)`);
    expect(Date.parse((error as NodeIdInUseError).other.heartbeatAt)).toBeLessThanOrEqual(Date.parse(heartbeat) + 1000);
    // How serve reports it: exit 78 (a setup error: not restarted), one line naming the key.
    const refusal = storeOpenError(error, '/data');
    expect(refusal).toBeInstanceOf(OperatorError);
    expect((refusal as OperatorError).exitCode).toBe(78);
    expect((refusal as OperatorError).refusal).toBe('node_id_in_use');
    expect(formatOperatorError(refusal as OperatorError)).toMatch(/^ccweb-gitea: node id node-a is in use by a running process: host machine-one, pid 4242, .* \[CCWEB_NODE_ID\]: give each node its own CCWEB_NODE_ID, or stop the other process first \(exit 78\)$/);
    // Another id on the same database is another node.
    await openNode(url, { nodeId: 'node-b', host: 'machine-two' });

    await first.close();
    const second = await openNode(url, { host: 'machine-two', url: 'http://10.0.0.2:8080' });
    expect((await second.nodes()).map((r) => [r.nodeId, r.host, r.state])).toEqual([
      ['node-a', 'machine-two', 'running'],
      ['node-b', 'machine-two', 'running'],
    ]);
  });

  it('the heartbeat keeps the id; three missed heartbeats (on the database clock) free it', async () => {
    const url = await database();
    // Its heartbeat is far apart: as if its process were stopped (SIGSTOP) right after starting.
    await openNode(url, { host: 'machine-one', heartbeatMs: 60_000 });
    await openNode(url, { nodeId: 'node-b', host: 'machine-one', heartbeatMs: 100 });
    // Right away, with the check's own window of 3 × 200 ms, both count as live.
    await expect(openNode(url, { host: 'machine-two' })).rejects.toBeInstanceOf(NodeIdInUseError);
    await new Promise((resolve) => setTimeout(resolve, 800));
    const taker = await openNode(url, { host: 'machine-two' });
    expect((await taker.nodes()).find((r) => r.nodeId === 'node-a')!.host).toBe('machine-two');
    // node-b kept beating all along: still refused.
    await expect(openNode(url, { nodeId: 'node-b', host: 'machine-two' })).rejects.toBeInstanceOf(NodeIdInUseError);
  });

  it("on this host, a row whose process no longer runs is this node's previous life (killed, restarted at once): it starts", async () => {
    const url = await database();
    const gone = spawn(process.execPath, ['-e', '0'], { stdio: 'ignore' });
    await new Promise((resolve) => gone.once('exit', resolve));
    let taken = 0;
    await openNode(url, { host: hostname(), pid: gone.pid!, heartbeatMs: 100, onNodeIdTaken: () => void (taken += 1) });
    const restarted = await openNode(url, { heartbeatMs: 100 });
    expect((await restarted.nodes())[0]).toMatchObject({ host: hostname(), pid: process.pid, state: 'running' });
    // The earlier store object (standing for the dead process) hears at its next heartbeat that it lost the id.
    await until('the earlier store to hear its id was taken', () => taken === 1, 5000);
    // A process of this host that does run is another live node: refused.
    const alive = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' });
    cleanups.push(async () => alive.kill('SIGKILL'));
    const url2 = await database();
    await openNode(url2, { host: hostname(), pid: alive.pid!, heartbeatMs: 100 });
    await expect(openNode(url2, { heartbeatMs: 100 })).rejects.toBeInstanceOf(NodeIdInUseError);
  });
});

describe('PostgreSQL SQL store: opening', () => {
  it('a server that does not answer: database_unreachable, naming the database without its password', async () => {
    const error = await createPostgresSqlStore({ url: 'postgres://ccweb:s3cret-pass@127.0.0.1:1/ccweb' }).open().catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'database_unreachable' });
    expect((error as Error).message).toMatch(/^cannot reach postgres:\/\/127\.0\.0\.1:1\/ccweb: /);
    expect((error as Error).message).not.toMatch(/s3cret/);
    expect((storeOpenError(error, '/data') as OperatorError).exitCode).toBe(75);
  });

  it('refuses a schema newer than it knows, in one line that says what to do', async () => {
    const url = await database();
    const store = createPostgresSqlStore({ url });
    await store.open();
    await store.close();
    await sql(url, "UPDATE store_meta SET value = $1 WHERE name = 'schema'", [String(SCHEMA_VERSION + 1)]);
    const error = await createPostgresSqlStore({ url }).open().catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'database_schema_too_new' });
    expect((error as Error).message).toMatch(new RegExp(`the database's schema is version ${SCHEMA_VERSION + 1}, newer than this ccweb-gitea knows \\(${SCHEMA_VERSION}\\)$`));
    expect((error as Error).message).not.toMatch(/postgres:\/\/postgres@/);
  });
});

describe('PostgreSQL SQL store: a node that starts beside running ones', () => {
  it('takes no lock on tables that are there already: it opens while another node holds rows of every table in an open transaction', async () => {
    const url = await database();
    const first = await openNode(url, { nodeId: 'node-a' });
    await first.transact(async (tx) => {
      await tx.insert('tasks', 't1', { taskId: 't1', state: 'queued' });
      await tx.appendAudit({ action: 'x', actor: 'test' });
    });
    // Another node mid-transaction: row locks on a collection, an audit event not yet committed.
    const busy = new pg.Client({ connectionString: url });
    await busy.connect();
    cleanups.push(() => busy.end());
    await busy.query('BEGIN');
    await busy.query(`UPDATE tasks SET body = body WHERE key = 't1'`);
    await busy.query(`INSERT INTO audit (task_id, ts, body) VALUES (NULL, '2026-01-01T00:00:00Z', '{}')`);
    const second = createPostgresSqlStore({ url, node: { nodeId: 'node-b', url: null, version: 'test', heartbeatMs: 200 } });
    cleanups.push(() => second.close());
    // CREATE … IF NOT EXISTS would wait here for the other transaction (and deadlock with it under load).
    const opened = await Promise.race([second.open().then(() => 'opened'), new Promise((r) => setTimeout(() => r('blocked'), 5_000))]);
    await busy.query('ROLLBACK');
    expect(opened).toBe('opened');
  });
});

describe('PostgreSQL SQL store: the audit', () => {
  it('is append-only, enforced by the database: UPDATE, DELETE and TRUNCATE are refused', async () => {
    const url = await database();
    const store = await openNode(url);
    await store.transact((tx) => tx.appendAudit({ action: 'x', actor: 'test' }));
    for (const statement of ["UPDATE audit SET level = 'alert'", 'DELETE FROM audit', 'TRUNCATE audit']) {
      await expect(sql(url, statement)).rejects.toThrow(/audit is append-only \((UPDATE|DELETE|TRUNCATE) refused\)/);
    }
    expect(await store.audit()).toHaveLength(1);
  });
});

describe('PostgreSQL SQL store: what one node commits, the others hear', () => {
  it('a notify committed on one node reaches another; after a PostgreSQL crash and restart the listener is back', async () => {
    const url = await database();
    const a = await openNode(url, { nodeId: 'node-a' });
    const b = await openNode(url, { nodeId: 'node-b' });
    const heard: string[] = [];
    await b.listen('ccweb_control', (payload) => heard.push(payload));
    await a.transact((tx) => tx.notify('ccweb_control', 'stop:t1'));
    await until('node-b to hear node-a', () => heard.includes('stop:t1'), 5000);

    await server.crash();
    await server.restart();
    // The listening session is opened again (a notify sent meanwhile is lost: it is only a wake-up).
    await until(
      'node-b to hear node-a after the restart',
      async () => {
        await a.transact((tx) => tx.notify('ccweb_control', 'stop:t2')).catch(() => undefined);
        return heard.includes('stop:t2');
      },
      20_000,
    );
  });
});

describe('PostgreSQL SQL store: the server goes away in the middle of a transaction', () => {
  it('the transaction fails with store_unavailable (nothing thrown at the process), and the store works again once the server is back', async () => {
    const url = await database();
    const store = await openNode(url, { nodeId: 'node-mid' });
    let inside!: () => void;
    const entered = new Promise<void>((r) => (inside = r));
    let goOn!: () => void;
    const held = new Promise<void>((r) => (goOn = r));
    const failing = store.transact(async (tx) => {
      await tx.put('tasks', 'mid', { state: 'queued' });
      inside();
      await held; // the connection is checked out, between two statements, while the server dies
      await tx.put('tasks', 'mid-2', { state: 'queued' });
    });
    failing.catch(() => undefined);
    await entered;
    await server.crash();
    await new Promise((r) => setTimeout(r, 300));
    goOn();
    await expect(failing).rejects.toMatchObject({ code: 'store_unavailable' });
    await server.restart();
    await until('a commit after the restart', async () => (await store.transact((tx) => tx.put('tasks', 'after', { state: 'queued' })).then(() => true, () => false)), 20_000);
    expect(await store.get('tasks', 'mid')).toBeUndefined();
  });
});

describe('PostgreSQL SQL store: a database that stays away (CCWEB_DATABASE_OUTAGE_SECONDS)', () => {
  it('an outage shorter than the limit is ridden out; one longer than the limit is reported once, naming how long', async () => {
    const url = await database();
    const reports: string[] = [];
    const store = await openNode(url, { nodeId: 'node-outage', heartbeatMs: 100, outageMs: 10_000, onUnreachable: (e) => void reports.push(e.message) });
    const beatAt = async () => Date.parse((await store.nodes()).find((n) => n.nodeId === 'node-outage')!.heartbeatAt);
    await server.crash();
    const before = Date.now();
    await server.restart();
    // A heartbeat reached the database again, within the limit: nothing reported.
    await until('a heartbeat after the restart', async () => (await beatAt().catch(() => 0)) > before, 20_000);
    expect(reports).toEqual([]);
    await server.crash();
    await until('the outage reported', async () => reports.length > 0, 30_000);
    await new Promise((r) => setTimeout(r, 500));
    expect(reports).toHaveLength(1);
    expect(reports[0]).toMatch(/^the database did not answer for 1\d s \(/);
    await server.restart();
  });

  it('a database that hangs instead of refusing (a partition: nothing answers, nothing is closed) is reported at the limit too', async () => {
    const relay = await startPostgresRelay(await database());
    cleanups.push(() => relay.close());
    const reports: string[] = [];
    await openNode(relay.url, { nodeId: 'node-hang', heartbeatMs: 100, outageMs: 3_000, onUnreachable: (e) => void reports.push(e.message) });
    // Cleanups run last first: the hung connections are cut before the store closes, or its close would wait on them.
    cleanups.push(async () => relay.setMode('cut'));
    await new Promise((r) => setTimeout(r, 500));
    expect(reports).toEqual([]);
    relay.setMode('half-open');
    const at = Date.now();
    await until('the hang reported', async () => reports.length > 0, 20_000);
    expect(Date.now() - at).toBeLessThan(6_000);
    expect(reports[0]).toMatch(/^the database did not answer for [3-5] s \(no answer\)$/);
  });

  it('a pause of this process past the limit (here its event loop blocked, as SIGSTOP would) is no outage: the database answers and nothing is reported', async () => {
    const url = await database();
    const reports: string[] = [];
    await openNode(url, { nodeId: 'node-paused', heartbeatMs: 100, outageMs: 2_000, onUnreachable: (e) => void reports.push(e.message) });
    await new Promise((r) => setTimeout(r, 300));
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 3_000);
    await new Promise((r) => setTimeout(r, 1_000));
    expect(reports).toEqual([]);
  });
});

describe('PostgreSQL SQL store: a process that stops mid-transaction', () => {
  it(`holds its fenced lease no longer than ${IDLE_IN_TRANSACTION_MS} ms past its expiry: the server ends its transaction, another node takes over, and the stopped one commits nothing`, async () => {
    const url = await database();
    const paused = await openNode(url, { nodeId: 'node-paused' });
    const other = await openNode(url, { nodeId: 'node-other' });
    const R = 'default:o/r';
    await paused.transact((tx) => tx.grantLease(R, { holder: 'node-paused', taskId: 't1', ttlMs: 500 }));
    let fenced!: () => void;
    const inside = new Promise<void>((r) => (fenced = r));
    // A worker's fenced write whose process stops after the fence (FOR SHARE on the lease row): it never goes on.
    let resumed = false;
    const stopped = paused.transact(async (tx) => {
      await tx.fenceLease(R, 1);
      fenced();
      await new Promise((r) => setTimeout(r, IDLE_IN_TRANSACTION_MS + 5_000));
      resumed = true;
      await tx.put('tasks', 't1', { state: 'succeeded', by: 'node-paused' });
    });
    stopped.catch(() => undefined);
    await inside;
    await new Promise((r) => setTimeout(r, 600)); // the lease expires on the database's clock
    const takeover = await other.transact((tx) => tx.grantLease(R, { holder: 'node-other', taskId: 't1', ttlMs: 60_000 }));
    expect(takeover).toMatchObject({ granted: true, epoch: 2 });
    // Granted while the stopped one still waited: the server ended its transaction, not its commit.
    expect(resumed).toBe(false);
    await expect(stopped).rejects.toMatchObject({ code: 'store_unavailable' });
    expect(await other.get('tasks', 't1')).toBeUndefined();
  }, 30_000);
});

/**
 * An earlier version's PostgreSQL store with history (updates, deletes, archives, audit), as that
 * version's engine wrote it (test/fixtures/earlier-postgres/README.md); what that engine read of it.
 */
async function earlierStoreWithHistory(url: string): Promise<{ digest: string; audit: number }> {
  await sql(url, await readFile(join(EARLIER_FIXTURE, 'history.sql'), 'utf8'));
  const expected = JSON.parse(await readFile(join(EARLIER_FIXTURE, 'history.expected.json'), 'utf8')) as { digest: string; auditEvents: number };
  return { digest: expected.digest, audit: expected.auditEvents };
}

describe('an earlier version’s PostgreSQL store', () => {
  it('is refused at open in one line naming migrate-store; the command moves it in place in one transaction (history, archives, audit), refusing while an earlier node runs', async () => {
    const url = await database();
    const before = await earlierStoreWithHistory(url);

    const refused = await createPostgresSqlStore({ url }).open().catch((e: unknown) => e);
    expect(refused).toMatchObject({ code: 'store_needs_migration' });
    expect((refused as Error).message).toMatch(/holds the store of an earlier ccweb-gitea \(its ccweb_records table\), which `ccweb-gitea migrate-store` moves into this version's tables$/);
    const line = formatOperatorError(storeOpenError(refused, '/data') as OperatorError);
    expect(line).toMatch(/\[CCWEB_DATABASE_URL\]: stop every node, run `ccweb-gitea migrate-store` once, then start them again \(exit 78\)$/);
    // Refusing changed nothing: no table of this version was made.
    expect(await sql(url, `SELECT to_regclass('tasks')::text AS t`)).toEqual([{ t: null }]);

    const dataDir = await tempDir();
    // The data directory still holds an embedded store (copied into PostgreSQL long ago): the earlier
    // store in the database is what the nodes refuse, so it is what the command moves.
    const leftover = createSqliteStore({ dir: join(dataDir, 'store') });
    await leftover.open();
    await leftover.close();
    const { io, lines } = commandIo(dataDir, { CCWEB_DATABASE_URL: url });
    // An earlier node still running on the database: the move waits for it to stop.
    // (its row in the earlier node table, heartbeating as that version's nodes did)
    await sql(url, `UPDATE ccweb_nodes SET role = 'writer', heartbeat_at = now() WHERE node_id = 'old-node'`);
    expect(await migrateStore(io)).toBe(1);
    expect(lines.at(-1)).toMatch(/^ERR migrate-store: postgres:\/\/127\.0\.0\.1:\d+\/q\d+_\d+: nodes still write the earlier store: old-node: stop every node first$/);
    await sql(url, `UPDATE ccweb_nodes SET role = 'stopped' WHERE node_id = 'old-node'`);
    // A move that fails at its last step (the schema it keeps the earlier tables in is taken) leaves
    // everything as it was: one transaction.
    await sql(url, `CREATE SCHEMA ${EARLIER_SCHEMA}`);
    expect(await migrateStore(io)).toBe(1);
    expect(lines.at(-1)).toMatch(/schema "ccweb_before_sql" already exists/);
    expect(await sql(url, `SELECT to_regclass('tasks')::text AS t, to_regclass('public.ccweb_records')::text AS r`)).toEqual([{ t: null, r: 'ccweb_records' }]);
    await sql(url, `DROP SCHEMA ${EARLIER_SCHEMA}`);

    expect(await migrateStore(io)).toBe(0);
    expect(lines.join('\n')).toMatch(/tasks: 60 record\(s\), 60 archived/);
    expect(lines.join('\n')).toMatch(new RegExp(`done: ${before.audit} audit event\\(s\\) and every record moved, read back and compared`));
    expect(lines.at(-1)).toMatch(/kept in the schema ccweb_before_sql: drop it/);
    expect(lines.join('\n')).not.toMatch(/postgres:\/\/postgres@/);

    const store = createPostgresSqlStore({ url, indexes: { tasks: ['state'] } });
    cleanups.push(() => store.close());
    await store.open();
    expect(await storeDigest(store)).toBe(before.digest);
    expect(await store.get('tasks', 't0')).toEqual({ state: 'queued', stateVersion: 1, n: 0, nested: { z: 1, a: [0, 'x'] } });
    expect(await store.get('tasks', 't1')).toEqual({ state: 'failed', stateVersion: 2, n: 1 });
    expect(await store.get('webhook_deliveries', 'default:d-5')).toBeUndefined();
    expect(await store.archivedCount('tasks')).toBe(60);
    expect((await store.byIndex('tasks', 'state', 'failed')).length).toBe(1);
    expect((await store.audit({ level: 'alert' })).map((e) => e.taskId)).toEqual(Array.from({ length: 12 }, (_, i) => `t${i * 10}`));
    // It goes on from there: dedupe keys are there, the next audit seq follows the moved ones.
    await expect(store.transact((tx) => tx.insert('webhook_deliveries', 'default:d-7', {}))).rejects.toMatchObject({ code: 'unique_violation' });
    expect((await store.transact((tx) => tx.appendAudit({ action: 'after', actor: 'test' }))).seq).toBe(before.audit + 1);
    // The earlier tables are kept aside, out of the way of the check at open.
    expect(await sql(url, `SELECT count(*)::int AS n FROM ${EARLIER_SCHEMA}.ccweb_records`)).toEqual([{ n: 240 - 1 }]);
  });
});

describe('migrate-store: the embedded store into PostgreSQL', () => {
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
    const summary = await copyEmbeddedStore(sqlStoreContents(source), { url, indexes: { tasks: ['state'] } });
    expect(summary.records['tasks']).toEqual({ hot: 150, archived: 150 });
    expect(summary.auditEvents).toBe(300);

    const store = createPostgresSqlStore({ url, indexes: { tasks: ['state'] } });
    cleanups.push(() => store.close());
    await store.open();
    expect(await storeDigest(store)).toBe(await storeDigest(source));
    expect(await store.get('tasks', 't0')).toEqual({ state: 'queued', stateVersion: 1, n: 0 });
    expect((await store.audit({ deliveryId: 'd-42' })).map((e) => e.seq)).toEqual((await source.audit({ deliveryId: 'd-42' })).map((e) => e.seq));
    await expect(store.transact((tx) => tx.insert('webhook_deliveries', 'default:d-7', {}))).rejects.toMatchObject({ code: 'unique_violation' });
    expect((await store.transact((tx) => tx.appendAudit({ action: 'after', actor: 'test' }))).seq).toBe(301);
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
    expect(lines.at(-2)).toMatch(/done: 300 audit event\(s\) and every record copied, read back and compared/);
    expect(await migrateStore(io)).toBe(1);
    expect(lines.at(-1)).toMatch(/already holds a store: migrate into an empty database/);
    expect(lines.join('\n')).not.toMatch(/postgres:\/\/postgres@/); // the URL is only ever described
  });
  // Each journal store an earlier version left (test/fixtures/journal-stores/; `history` holds a record
  // whose text has a NUL, U+0000, which a comment's text can), copied as that version read it.
  it.each(JOURNAL_FIXTURES)('the command copies the journal store an earlier version left (%s) as that version read it, and leaves it in place', async (name) => {
    const { parent: dataDir, dir } = copyFixture(name);
    cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
    const before = (await readdir(dir)).sort();
    const url = await database();
    const { io, lines } = commandIo(dataDir, { CCWEB_DATABASE_URL: url });
    expect(await migrateStore(io), lines.join('\n')).toBe(0);
    // Nothing of the journal store was changed or added (no SQLite store in its place either).
    expect((await readdir(dir)).sort()).toEqual(before);
    const store = createPostgresSqlStore({ url });
    cleanups.push(() => store.close());
    await store.open();
    await expectStoreHolds(store, expectedDump(name));
  });
  it('a data directory without any store and a database without an earlier one: refused naming CCWEB_DATA_DIR, nothing created', async () => {
    const dataDir = await tempDir();
    const url = await database();
    const { io, lines } = commandIo(dataDir, { CCWEB_DATABASE_URL: url });
    expect(await migrateStore(io)).toBe(1);
    expect(lines).toEqual([`ERR migrate-store: ${join(dataDir, 'store')} holds no store (neither store.db nor an earlier version's journal): nothing to migrate; check CCWEB_DATA_DIR (${dataDir})`]);
    expect(await readdir(dataDir)).toEqual([]);
  });
});
