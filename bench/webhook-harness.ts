// The servers and the load driver shared by `npm run bench:webhook` (bench/webhook.ts, the store
// engines), `npm run bench:webhook-receivers` (bench/webhook-receivers.ts) and `npm run
// profile:webhook` (bench/profile-webhook.ts). Servers run in child processes forked from
// this file (`--serve real|baseline`); autocannon drives them from the parent over loopback with
// unique, signed deliveries (new delivery UUID, new comment id per request).
import { fork, type ChildProcess } from 'node:child_process';
import { createHmac, randomUUID } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Koa from 'koa';
import { STORE_INDEXES, type TaskRecord } from '../src/domain/records.js';
import { createApp } from '../src/http/create-app.js';
import { createCommentRegistry, learningIntake } from '../test/support/comment-registry.js';
import { createIntake } from '../src/intake/intake.js';
import {
  deliveryRecord,
  payloadHash,
  sessionRecord,
  taskRecord,
  triggerRecord,
} from '../src/intake/intake-records.js';
import { pendingReceiptRecord } from '../src/receipts/receipt-record.js';
import { accepted } from '../src/intake/intake-response.js';
import { ActorRuntime, type ActorRecord } from '../src/runtime/actor-runtime.js';
import { createStore, describeDatabase, SqlStore, type Store } from '../src/store/index.js';
import { PostgresConnection } from '../src/store/sql/postgres-connection.js';
import { TASK_KIND, taskActorId, taskKind } from '../src/tasks/task-actor.js';
import { commentTriggerKey, normalizeComment, taskIdFor } from '../src/webhook/normalize-comment.js';
import { createWebhookRouter } from '../src/intake/webhook-route.js';
import { verifySignature } from '../src/webhook/verify-signature.js';
import { floorAccept } from './floor-receiver.js';

// autocannon ships no types; the part used here.
interface AutocannonResult {
  requests: { average: number };
  latency: { p50: number; p99: number };
  '2xx': number;
  non2xx: number;
  errors: number;
  timeouts: number;
}
const autocannon = createRequire(import.meta.url)('autocannon') as (opts: Record<string, unknown>) => Promise<AutocannonResult>;

export const SECRET = 'bench-secret';
export const BOT = 'ccweb-bot';
export const FIXTURES = process.env['CCWEB_GITEA_FIXTURES'] ?? fileURLToPath(new URL('../test/fixtures/gitea/webhooks/', import.meta.url));
export const CONNECTIONS = 32;

// ---------------------------------------------------------------------------------------------
// Servers (child processes)

export type Command = { cmd: 'prefill'; total: number } | { cmd: 'tasks' } | { cmd: 'reopen' } | { cmd: 'cpu' } | { cmd: 'diag' } | { cmd: 'exit' };

/** CPU time this process has used (user + system), in microseconds: the per-request cost, whatever else runs on the machine. */
function cpuMicros(): number {
  const { user, system } = process.cpuUsage();
  return user + system;
}

/**
 * The store the real server runs on: the embedded one (SQLite);
 * `real-sql-postgres` (BENCH_DATABASE_URL naming an empty database), the SQL store on PostgreSQL;
 * `real-postgres` (the same variable), PostgreSQL as `createStore` opens it (the same SQL store).
 */
function benchStore(dir: string): Store {
  const kind = process.argv[3] as ServerKind;
  const url = process.env['BENCH_DATABASE_URL'];
  if (kind === 'real-postgres' || kind === 'real-sql-postgres') {
    if (!url) throw new Error(`${kind}: set BENCH_DATABASE_URL`);
    if (kind === 'real-sql-postgres') return new SqlStore({ dir: describeDatabase(url), indexes: STORE_INDEXES, connect: () => new PostgresConnection({ url, applicationName: 'ccweb-bench' }) });
    return createStore({ url, indexes: STORE_INDEXES });
  }
  return createStore({ dir, indexes: STORE_INDEXES });
}

export async function serveReal(): Promise<void> {
  const diag = stallDiagnostics();
  const dir = await mkdtemp(join(tmpdir(), 'ccweb-bench-webhook-'));
  let store: Store = benchStore(dir);
  await store.open();
  const runtime = new ActorRuntime({ store, kinds: [taskKind()] });
  const benchComments = createCommentRegistry();
  const intake = createIntake({
    store,
    runtime,
    botLogin: BOT,
    secrets: [SECRET],
    fetchPermission: async () => 'write',
    // Gitea holds each comment posted (the lookup's own cost is not measured here).
    commentOnGitea: benchComments.lookup,
    workspaceRoot: join(dir, 'workspaces'),
  });
  const app = createApp({ routers: [createWebhookRouter({ intake: learningIntake(intake, benchComments) })] });
  const server = createServer(app.callback());
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));

  process.on('message', (msg: Command) => {
    void (async () => {
      if (msg.cmd === 'prefill') {
        const t0 = performance.now();
        await prefill(store, runtime, msg.total);
        process.send!({ ok: true, tasks: await store.count('tasks'), ms: performance.now() - t0 });
      } else if (msg.cmd === 'cpu') {
        process.send!({ ok: true, cpu: cpuMicros(), mono: Number(process.hrtime.bigint() / 1000n) });
      } else if (msg.cmd === 'diag') {
        process.send!({ ok: true, ...diag.take(), store: store.stats() });
      } else if (msg.cmd === 'tasks') {
        await store.sync();
        process.send!({ ok: true, tasks: await store.count('tasks'), stats: store.stats() });
      } else if (msg.cmd === 'reopen') {
        // Durability check: what a fresh process would find on disk.
        server.close();
        await runtime.settled();
        runtime.stopAll();
        await store.close();
        store = benchStore(dir);
        await store.open();
        process.send!({ ok: true, tasks: await store.count('tasks') });
      } else {
        await store.close().catch(() => undefined);
        await rm(dir, { recursive: true, force: true });
        process.exit(0);
      }
    })().catch((error: unknown) => process.send!({ ok: false, error: String(error) }));
  });
  process.send!({ port: (server.address() as AddressInfo).port });
}

/**
 * What makes the real server's latency tail (`profile:webhook-tail`): the event loop's delay histogram,
 * garbage-collection pauses, and (per `take()`) the store's counters. `take()` resets the window.
 */
function stallDiagnostics() {
  const eld = monitorEventLoopDelay({ resolution: 1 });
  eld.enable();
  let gc: number[] = [];
  const kinds: Record<number, string> = { 1: 'minor', 2: 'major', 4: 'incremental', 8: 'weakcb' };
  const gcKinds: Record<string, { n: number; ms: number }> = {};
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      gc.push(e.duration);
      const kind = kinds[(e as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind ?? 0] ?? 'other';
      const k = (gcKinds[kind] ??= { n: 0, ms: 0 });
      k.n += 1;
      k.ms += e.duration;
    }
  }).observe({ entryTypes: ['gc'] });
  return {
    take() {
      const ms = (ns: number) => Math.round(ns / 1e4) / 100;
      const out = {
        eventLoopDelay: { p50: ms(eld.percentile(50)), p99: ms(eld.percentile(99)), max: ms(eld.max) },
        gc: { count: gc.length, totalMs: Math.round(gc.reduce((a, b) => a + b, 0)), maxMs: Math.round(Math.max(0, ...gc) * 10) / 10, over10ms: gc.filter((d) => d > 10).length, kinds: { ...gcKinds } },
      };
      eld.reset();
      gc = [];
      for (const k of Object.keys(gcKinds)) delete gcKinds[k];
      return out;
    },
  };
}

/** A bare Koa app on its own port, answering 202 after `accept` resolves true for the raw body (401 otherwise). */
async function serveKoa(accept: (body: Buffer, headers: IncomingHttpHeaders) => boolean | Promise<boolean>): Promise<void> {
  const app = new Koa();
  app.use(async (ctx) => {
    const chunks: Buffer[] = [];
    for await (const chunk of ctx.req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    if (!(await accept(body, ctx.req.headers))) {
      ctx.status = 401;
      ctx.body = { error: 'unauthorized' };
      return;
    }
    ctx.status = 202;
    ctx.body = { deliveryId: ctx.get('x-gitea-delivery'), taskId: 'x', state: 'queued' };
  });
  const server = createServer(app.callback());
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  process.on('message', (msg: Command) => {
    if (msg.cmd === 'cpu') process.send!({ ok: true, cpu: cpuMicros(), mono: Number(process.hrtime.bigint() / 1000n) });
    else process.exit(0);
  });
  process.send!({ port: (server.address() as AddressInfo).port });
}

/** The baseline: HMAC over the raw bytes (our verifySignature), then 202. Nothing stored. */
export function serveBaseline(): Promise<void> {
  return serveKoa((body, headers) => verifySignature(body, headers, [SECRET]));
}

/** The least a durable receiver keeping the guarantees does (bench/floor-receiver.ts), in the same bare Koa app. */
export async function serveFloor(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'ccweb-bench-floor-'));
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  return serveKoa(await floorAccept(dir, SECRET));
}

/**
 * What a Node developer would otherwise pick: @octokit/webhooks' verifyAndReceive (signature check
 * of X-Hub-Signature-256, which Gitea also sends, JSON.parse, dispatch to an `issue_comment`
 * handler), in the same bare Koa app. Nothing stored.
 */
export async function serveOctokit(): Promise<void> {
  const { Webhooks } = await import('@octokit/webhooks');
  const webhooks = new Webhooks({ secret: SECRET });
  let received = 0;
  webhooks.on('issue_comment', () => {
    received += 1;
  });
  return serveKoa(async (body, headers) => {
    const header = (name: string) => {
      const v = headers[name];
      return typeof v === 'string' ? v : '';
    };
    try {
      await webhooks.verifyAndReceive({
        id: header('x-gitea-delivery'),
        name: header('x-github-event') as 'issue_comment',
        payload: body.toString('utf8'),
        signature: header('x-hub-signature-256'),
      });
      return received > 0;
    } catch {
      return false;
    }
  });
}

/**
 * `total` tasks as intake would have stored them (delivery, trigger, task, actor, receipt; a
 * session per resource), written 1,000 per transaction. The actor record is a real one, made once
 * by the runtime and copied.
 */
async function prefill(store: Store, runtime: ActorRuntime, total: number): Promise<void> {
  const fixture = readFileSync(join(FIXTURES, 'issue_comment_created_on_issue.json'));
  const headers = JSON.parse(readFileSync(join(FIXTURES, 'issue_comment_created_on_issue.headers.json'), 'utf8')).headers;
  const base = normalizeComment(headers, fixture, { botLogin: BOT });
  if (!base.ok) throw new Error(base.issues);
  const now = new Date();
  let template: ActorRecord | undefined;
  let done = await store.count('tasks');
  while (done < total) {
    const start = done;
    const end = Math.min(total, done + 1000);
    // The body may run again: it changes nothing outside it (the template is kept once it committed).
    template = await store.transact(async (tx) => {
      let made = template;
      for (let i = start; i < end; i++) {
        const deliveryId = `prefill-${i}`;
        const deliveryKey = `default:${deliveryId}`;
        const taskId = taskIdFor(deliveryKey);
        const number = 100_000 + i;
        const c = {
          ...base.value,
          deliveryId,
          deliveryKey,
          resource: { ...base.value.resource, number },
          resourceKey: `${base.value.repoKey}:issue:${number}`,
          comment: { ...base.value.comment, id: 50_000_000 + i },
        };
        const response = accepted(deliveryId, taskId);
        await tx.insert('webhook_deliveries', deliveryKey, deliveryRecord({
          deliveryKey, deliveryId, eventType: c.eventType, receivedAt: now, retentionMs: 30 * 86_400_000,
          normalized: true, taskId, status: 'accepted', reason: null, payloadHash: payloadHash(fixture), response,
        }));
        const triggerKey = commentTriggerKey(c);
        await tx.insert('comment_triggers', triggerKey, triggerRecord(triggerKey, deliveryKey, taskId, now));
        await tx.insert('sessions', c.resourceKey, sessionRecord(taskRecord(c, taskId, i, now), 'default', now));
        const actorId = taskActorId(taskId);
        if (made === undefined) {
          await tx.insert('tasks', taskId, taskRecord(c, taskId, i, now));
          await runtime.createInTx(tx, TASK_KIND, actorId, { taskId }, { events: [{ type: 'ACCEPT' }], by: 'gitea:user:bob', taskId });
          made = (await tx.get<ActorRecord>('actors', actorId))!;
        } else {
          await tx.insert('tasks', taskId, { ...taskRecord(c, taskId, i, now), state: 'queued', stateVersion: 2 } satisfies TaskRecord);
          const snapshot = made.snapshot as { context: Record<string, unknown> };
          await tx.insert('actors', actorId, {
            ...made,
            actorId,
            taskId,
            snapshot: { ...snapshot, context: { ...snapshot.context, taskId } },
          });
        }
        const receipt = pendingReceiptRecord({ taskId, resourceKey: c.resourceKey }, 'received', now);
        await tx.insert('comments', receipt.commentKey, receipt);
      }
      return made;
    });
    done = end;
  }
}

// ---------------------------------------------------------------------------------------------
// Driver (this process)

export type ServerKind = 'real' | 'real-sql-postgres' | 'real-postgres' | 'baseline' | 'octokit' | 'floor';

export interface Child {
  proc: ChildProcess;
  port: number;
  ask(msg: Command): Promise<any>;
}

/**
 * A server in a child process of its own; `execArgv` adds Node flags (e.g. `--cpu-prof`). `harness`:
 * another tree's copy of this file (bench/baseline-commit.ts), whose servers speak the same messages.
 */
export async function spawnServer(kind: ServerKind, execArgv: readonly string[] = [], env: NodeJS.ProcessEnv = process.env, harness = fileURLToPath(import.meta.url)): Promise<Child> {
  const proc = fork(harness, ['--serve', kind], {
    env,
    execArgv: [...process.execArgv, '--max-old-space-size=6144', ...execArgv],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    proc.once('message', (m: { port: number }) => resolve(m.port));
    proc.once('exit', (code) => reject(new Error(`${kind} server exited with ${code}`)));
  });
  const ask = (msg: Command) =>
    new Promise<any>((resolve, reject) => {
      proc.once('message', (m: { ok: boolean; error?: string }) => (m.ok ? resolve(m) : reject(new Error(m.error))));
      proc.send(msg);
    });
  return { proc, port, ask };
}

/** Unique signed deliveries from the issue-comment fixture: new delivery UUID and comment id per request. */
export function deliveryFactory() {
  const fixture = JSON.parse(readFileSync(join(FIXTURES, 'issue_comment_created_on_issue.json'), 'utf8'));
  const baseHeaders: Record<string, string> = JSON.parse(
    readFileSync(join(FIXTURES, 'issue_comment_created_on_issue.headers.json'), 'utf8'),
  ).headers;
  delete baseHeaders['Content-Length'];
  fixture.comment.id = 987_654_321;
  fixture.issue.number = 987_654_322;
  fixture.comment.body = '@ccweb-bot please fix the failing build, request 987654323';
  // Split at the markers, remembering which field each gap is (JSON order is issue, then comment).
  const pieces = JSON.stringify(fixture, null, 2).split(/(987654321|987654322|987654323)/);
  if (pieces.length !== 7) throw new Error('template markers not found');
  let n = 1_000_000_000 + Math.floor(Math.random() * 1_000_000) * 1_000;
  return () => {
    n += 1;
    const id = randomUUID();
    const values: Record<string, string> = { '987654321': String(n), '987654322': String((n % 2000) + 1), '987654323': String(n) };
    const body = Buffer.from(pieces.map((p, i) => (i % 2 === 1 ? values[p]! : p)).join(''));
    const sig = createHmac('sha256', SECRET).update(body).digest('hex');
    return {
      body,
      headers: { ...baseHeaders, 'X-Gitea-Delivery': id, 'X-Gitea-Signature': sig, 'X-Hub-Signature-256': `sha256=${sig}` },
    };
  };
}

const next = deliveryFactory();

export interface Run {
  rps: number;
  p50: number;
  p99: number;
  ok: number;
  bad: number;
  errors: number;
}

export async function load(port: number, seconds: number, opts: { connections?: number; overallRate?: number } = {}): Promise<Run> {
  const result = await autocannon({
    url: `http://127.0.0.1:${port}/api/gitea/webhook`,
    connections: opts.connections ?? CONNECTIONS,
    duration: seconds,
    ...(opts.overallRate ? { overallRate: opts.overallRate } : {}),
    requests: [
      {
        method: 'POST',
        setupRequest: (req: any) => {
          const d = next();
          req.body = d.body;
          req.headers = d.headers;
          return req;
        },
      },
    ],
  });
  return {
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    ok: result['2xx'],
    bad: result.non2xx,
    errors: result.errors + result.timeouts,
  };
}

/** The run with the median throughput. */
export function median(runs: Run[]): Run {
  return [...runs].sort((a, b) => a.rps - b.rps)[Math.floor(runs.length / 2)]!;
}

export const fmt = (r: Run) =>
  `${r.rps.toFixed(0).padStart(6)} req/s   p50 ${r.p50.toFixed(2).padStart(6)} ms   p99 ${r.p99.toFixed(2).padStart(6)} ms   (2xx ${r.ok}, non-2xx ${r.bad}, errors ${r.errors})`;
export const verdict = (pass: boolean) => (pass ? 'PASS' : 'MISS');


if (process.argv[2] === '--serve') {
  const kind = process.argv[3] as ServerKind;
  await (kind === 'baseline' ? serveBaseline() : kind === 'octokit' ? serveOctokit() : kind === 'floor' ? serveFloor() : serveReal());
}
