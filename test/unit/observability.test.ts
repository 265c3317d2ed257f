// Logs (redaction, correlation), metrics (outcomes, transitions, timings with an injected clock)
// and the health endpoints (readyz 503 once the store is closed or the app-server is not ready).
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { STORE_INDEXES } from '../../src/domain/records.js';
import { createOpsRouter } from '../../src/health/ops-router.js';
import { createReadiness, READINESS_PROBE_KEY } from '../../src/health/readiness.js';
import { createApp } from '../../src/http/create-app.js';
import { correlationFields, createLogger } from '../../src/observability/logger.js';
import { createMetrics, queuedTasksByRepo, webhookOutcome } from '../../src/observability/metrics.js';
import type { TransitionNotice } from '../../src/runtime/actor-runtime.js';
import { createStore, type Store } from '../../src/store/index.js';

const TASK = 'gitea-task-0123456789abcdef01234567';
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function logSink(): { stream: PassThrough; lines: () => Array<Record<string, unknown>>; text: () => string } {
  const stream = new PassThrough();
  let text = '';
  stream.on('data', (d: Buffer) => (text += d.toString()));
  return { stream, text: () => text, lines: () => text.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>) };
}

async function openStore(): Promise<Store> {
  const dir = mkdtempSync(join(tmpdir(), 'ccweb-obs-'));
  const store = createStore({ dir, indexes: STORE_INDEXES });
  await store.open();
  cleanups.push(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return store;
}

describe('logger', () => {
  it('scrubs configured secrets from messages and error text, and redacts secret fields by name', () => {
    const token = 'tok_0123456789abcdef';
    const secret = 'whsec-fedcba9876543210';
    const sink = logSink();
    const logger = createLogger({ secrets: [token, secret], destination: sink.stream });
    logger.error({ err: new Error(`remote: https://bot:${token}@gitea.example.com/acme/widget.git 401`) }, 'fetch failed');
    logger.warn({ headers: { authorization: `token ${token}` }, webhookSecret: 'x', nested: { token: 'abc' } }, `secret was ${secret}`);
    logger.child({ part: 'x' }).info({ env: { GITEA_ACCESS_TOKEN: 'zzz-not-configured-zzz' } }, 'spawn');
    const text = sink.text();
    expect(text).toContain('fetch failed');
    expect(text).toContain('gitea.example.com/acme/widget.git 401');
    for (const s of [token, secret, 'zzz-not-configured-zzz']) expect(text).not.toContain(s);
    const [first, second] = sink.lines();
    expect((second!['headers'] as Record<string, string>)['authorization']).toBe('[redacted]');
    expect((second!['nested'] as Record<string, string>)['token']).toBe('[redacted]');
    expect(String(first!['err'] && (first!['err'] as { message: string }).message)).toContain('[redacted]');
  });

  it('adds taskId and deliveryId to lines that name a task only through another field', () => {
    const sink = logSink();
    const logger = createLogger({ destination: sink.stream, correlation: { deliveryIdOf: (id) => (id === TASK ? 'delivery-uuid-1' : null) } });
    logger.info({ commentKey: `${TASK}:status:queued` }, 'receipt sent');
    logger.info({ turnKey: `${TASK}:attempt-1` }, 'turn write failed');
    logger.warn({ audit: { taskId: TASK, action: 'task.rejected_event' } }, 'alert');
    logger.info({ taskId: TASK, deliveryId: 'given' }, 'explicit');
    logger.info({ repoKey: 'default:acme/widget' }, 'no task');
    const lines = sink.lines();
    for (const l of lines.slice(0, 3)) expect([l['taskId'], l['deliveryId']]).toEqual([TASK, 'delivery-uuid-1']);
    expect(lines[3]!['deliveryId']).toBe('given');
    expect(lines[4]!['taskId']).toBeUndefined();
  });

  it('leaves the delivery out when the lookup fails (store closed)', () => {
    expect(correlationFields({ actorId: `task:${TASK}` }, { deliveryIdOf: () => { throw new Error('store not open'); } })).toEqual({ taskId: TASK });
  });
});

describe('metrics', () => {
  const t = (fromState: string | null, toState: string, taskId = TASK): TransitionNotice => ({
    actorId: `task:${taskId}`,
    kind: 'task',
    taskId,
    fromState,
    toState,
    stateVersion: 1,
    context: {},
    event: null,
    by: 'test',
  });

  it('classifies webhook answers into bounded labels', () => {
    expect(webhookOutcome({ status: 202, body: { taskId: TASK } })).toEqual({ outcome: 'accepted', reason: 'none' });
    expect(webhookOutcome({ status: 200, body: { status: 'ignored', reason: 'no_mention' } })).toEqual({ outcome: 'ignored', reason: 'no_mention' });
    expect(webhookOutcome({ status: 200, body: { status: 'duplicate', taskId: TASK } })).toEqual({ outcome: 'duplicate', reason: 'none' });
    expect(webhookOutcome({ status: 401, body: { error: 'unauthorized' } })).toEqual({ outcome: 'error', reason: 'unauthorized' });
    // A label value is never taken verbatim from something an attacker shapes.
    expect(webhookOutcome({ status: 200, body: { status: 'ignored', reason: 'x"} 1\nevil' } })).toEqual({ outcome: 'ignored', reason: 'other' });
  });

  it('times lease waits and turns from durable transitions, and counts verification outcomes', async () => {
    let clock = 0;
    const m = createMetrics({ defaultMetrics: false, now: () => clock });
    m.onTransition(t(null, 'queued'));
    clock = 1500;
    m.onTransition(t('queued', 'preparing'));
    m.onTransition(t('preparing', 'running'));
    clock = 4500;
    m.onTransition(t('running', 'verifying_reply'));
    m.onTransition(t('verifying_reply', 'succeeded_with_rest_fallback'));
    m.onTransition({ ...t(null, 'held'), kind: 'repo_lock' });
    const text = await m.render();
    expect(text).toMatch(/ccweb_lease_wait_seconds_sum 1\.5\n/);
    expect(text).toMatch(/ccweb_turn_duration_seconds_sum\{outcome="verifying_reply"\} 3\n/);
    expect(text).toMatch(/ccweb_reply_verifications_total\{outcome="succeeded_with_rest_fallback"\} 1\n/);
    expect(text).toMatch(/ccweb_task_transitions_total\{from="none",to="queued"\} 1\n/);
    expect(text).not.toMatch(/to="held"/);
    expect(text).not.toMatch(/process_cpu/);
  });

  it('computes queue depth per repository at scrape time and times store commits', async () => {
    const store = await openStore();
    const m = createMetrics({ defaultMetrics: false });
    m.timeStoreCommits(store);
    m.watchQueue(() => queuedTasksByRepo(store));
    await store.transact(async (tx) => {
      await tx.insert('tasks', 'a', { taskId: 'a', repoKey: 'default:acme/one', state: 'queued' });
      await tx.insert('tasks', 'b', { taskId: 'b', repoKey: 'default:acme/one', state: 'queued' });
      await tx.insert('tasks', 'c', { taskId: 'c', repoKey: 'default:acme/two', state: 'running' });
    });
    await store.transact((tx) => tx.insert('tasks', 'd', { taskId: 'd', repoKey: 'default:acme/two', state: 'queued' }));
    const text = await m.render();
    expect(text).toMatch(/ccweb_queue_depth\{repo="default:acme\/one"\} 2\n/);
    expect(text).toMatch(/ccweb_queue_depth\{repo="default:acme\/two"\} 1\n/);
    expect(text).toMatch(/ccweb_store_commit_seconds_count\{result="ok"\} 2\n/);
    await expect(store.transact((tx) => tx.insert('tasks', 'a', { taskId: 'a' }))).rejects.toThrow();
    expect(await m.render()).toMatch(/ccweb_store_commit_seconds_count\{result="error"\} 1\n/);
  });
});

describe('/healthz and /readyz', () => {
  async function serve(store: Store, appServerState: () => string | undefined): Promise<string> {
    const metrics = createMetrics({ defaultMetrics: false });
    const app = createApp({ routers: [createOpsRouter({ metrics, webhookPath: '/hook', readiness: createReadiness({ store, appServerState }) })] });
    const server: Server = createServer(app.callback());
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    cleanups.push(() => new Promise<void>((r) => server.close(() => r())));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  it('ready with a writable store and an initialised app-server; 503 naming the store once it is closed', async () => {
    const store = await openStore();
    const url = await serve(store, () => 'ready');
    const ok = await fetch(`${url}/readyz`);
    expect(ok.status).toBe(200);
    expect(await store.get('control', READINESS_PROBE_KEY)).toBeDefined();
    await store.close();
    const down = await fetch(`${url}/readyz`);
    expect(down.status).toBe(503);
    const body = (await down.json()) as { status: string; store: { ok: boolean; detail: string }; appServer: { ok: boolean } };
    expect(body.status).toBe('not_ready');
    expect(body.store.ok).toBe(false);
    expect(body.appServer.ok).toBe(true);
    // Liveness does not depend on the store.
    const health = await fetch(`${url}/healthz`);
    expect([health.status, await health.json()]).toEqual([200, { status: 'ok' }]);
  });

  it('503 naming the app-server while it is not initialised', async () => {
    const store = await openStore();
    let state: string | undefined;
    const url = await serve(store, () => state);
    const res = await fetch(`${url}/readyz`);
    expect(res.status).toBe(503);
    expect(((await res.json()) as { appServer: { detail: string } }).appServer.detail).toBe('state not started');
    state = 'ready';
    expect((await fetch(`${url}/readyz`)).status).toBe(200);
  });

  it('writes the probe at most once per interval', async () => {
    const store = await openStore();
    const readiness = createReadiness({ store, appServerState: () => 'ready', probeIntervalMs: 5000, now: () => 1_000_000 });
    const before = store.stats().commits;
    await Promise.all([readiness.check(), readiness.check()]);
    await readiness.check();
    expect(store.stats().commits - before).toBe(1);
  });
});
