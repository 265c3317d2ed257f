// Webhook intake benchmark: the real server (durable store with fsync, actor runtime, intake; no
// scheduler or receipts) against a baseline Koa app that only verifies the HMAC and answers 202.
// Every request is a unique, signed delivery (new delivery UUID, new comment id).
// Servers run in child processes (one core each side on a 2-core box); autocannon drives them from
// this process over loopback. Run: npm run bench:webhook
import { fork, type ChildProcess } from 'node:child_process';
import { createHmac, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Koa from 'koa';
import { STORE_INDEXES, type TaskRecord } from '../src/domain/records.js';
import { createApp } from '../src/http/create-app.js';
import { createIntake } from '../src/intake/accept-comment.js';
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
import { createStore, type DurableStore } from '../src/store/index.js';
import { TASK_KIND, taskActorId, taskKind } from '../src/tasks/task-actor.js';
import { commentTriggerKey, normalizeComment, taskIdFor } from '../src/webhook/normalize-comment.js';
import { createWebhookRouter } from '../src/webhook/route.js';
import { verifySignature } from '../src/webhook/verify-signature.js';

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

const SECRET = 'bench-secret';
const BOT = 'ccweb-bot';
const FIXTURES = process.env['CCWEB_GITEA_FIXTURES'] ?? fileURLToPath(new URL('../test/fixtures/gitea/webhooks/', import.meta.url));
const CONNECTIONS = 32;
const ROUNDS = 3;
const SLICE_S = 5;
const RATE_S = 10;
const LATENCY_S = 8;
const WARMUP_S = 3;
const LATENCY_RATE = 200;
const TARGET_RATIO = 0.6;
const TARGET_P99_MS = 25;
const TARGET_GROWTH = 1.5;

// ---------------------------------------------------------------------------------------------
// Servers (child processes)

type Command = { cmd: 'prefill'; total: number } | { cmd: 'tasks' } | { cmd: 'reopen' } | { cmd: 'exit' };

async function serveReal(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'ccweb-bench-webhook-'));
  let store: DurableStore = createStore({ dir, indexes: STORE_INDEXES });
  await store.open();
  const runtime = new ActorRuntime({ store, kinds: [taskKind()] });
  const intake = createIntake({
    store,
    runtime,
    botLogin: BOT,
    secrets: [SECRET],
    fetchPermission: async () => 'write',
    workspaceRoot: join(dir, 'workspaces'),
  });
  const app = createApp({ routers: [createWebhookRouter({ intake })] });
  const server = createServer(app.callback());
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));

  process.on('message', (msg: Command) => {
    void (async () => {
      if (msg.cmd === 'prefill') {
        const t0 = performance.now();
        await prefill(store, runtime, msg.total);
        await store.compact();
        await store.compactionIdle();
        process.send!({ ok: true, tasks: store.count('tasks'), ms: performance.now() - t0 });
      } else if (msg.cmd === 'tasks') {
        await store.sync();
        process.send!({ ok: true, tasks: store.count('tasks'), stats: store.stats() });
      } else if (msg.cmd === 'reopen') {
        // Durability check: what a fresh process would find on disk.
        server.close();
        await runtime.settled();
        runtime.stopAll();
        await store.close();
        store = createStore({ dir, indexes: STORE_INDEXES });
        await store.open();
        process.send!({ ok: true, tasks: store.count('tasks') });
      } else {
        await store.close().catch(() => undefined);
        await rm(dir, { recursive: true, force: true });
        process.exit(0);
      }
    })().catch((error: unknown) => process.send!({ ok: false, error: String(error) }));
  });
  process.send!({ port: (server.address() as AddressInfo).port });
}

async function serveBaseline(): Promise<void> {
  const app = new Koa();
  app.use(async (ctx) => {
    const chunks: Buffer[] = [];
    for await (const chunk of ctx.req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    if (!verifySignature(body, ctx.req.headers, [SECRET])) {
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
  process.on('message', () => process.exit(0));
  process.send!({ port: (server.address() as AddressInfo).port });
}

/**
 * `total` tasks as intake would have stored them (delivery, trigger, task, actor, receipt; a
 * session per resource), written 1,000 per transaction. The actor record is a real one, made once
 * by the runtime and copied.
 */
async function prefill(store: DurableStore, runtime: ActorRuntime, total: number): Promise<void> {
  const fixture = readFileSync(join(FIXTURES, 'issue_comment_created_on_issue.json'));
  const headers = JSON.parse(readFileSync(join(FIXTURES, 'issue_comment_created_on_issue.headers.json'), 'utf8')).headers;
  const base = normalizeComment(headers, fixture, { botLogin: BOT });
  if (!base.ok) throw new Error(base.issues);
  const now = new Date();
  let template: ActorRecord | undefined;
  let i = store.count('tasks');
  while (i < total) {
    const end = Math.min(total, i + 1000);
    await store.transact((tx) => {
      for (; i < end; i++) {
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
        tx.insert('webhook_deliveries', deliveryKey, deliveryRecord({
          deliveryKey, deliveryId, eventType: c.eventType, receivedAt: now, retentionMs: 30 * 86_400_000,
          normalized: true, taskId, status: 'accepted', reason: null, payloadHash: payloadHash(fixture), response,
        }));
        const triggerKey = commentTriggerKey(c);
        tx.insert('comment_triggers', triggerKey, triggerRecord(triggerKey, deliveryKey, taskId, now));
        tx.insert('sessions', c.resourceKey, sessionRecord(taskRecord(c, taskId, i, now), 'default', now));
        const actorId = taskActorId(taskId);
        if (template === undefined) {
          tx.insert('tasks', taskId, taskRecord(c, taskId, i, now));
          runtime.createInTx(tx, TASK_KIND, actorId, { taskId }, { events: [{ type: 'ACCEPT' }], by: 'gitea:user:bob', taskId });
          template = tx.get<ActorRecord>('actors', actorId)!;
        } else {
          tx.insert('tasks', taskId, { ...taskRecord(c, taskId, i, now), state: 'queued', stateVersion: 2 } satisfies TaskRecord);
          const snapshot = template.snapshot as { context: Record<string, unknown> };
          tx.insert('actors', actorId, {
            ...template,
            actorId,
            taskId,
            snapshot: { ...snapshot, context: { ...snapshot.context, taskId } },
          });
        }
        const receipt = pendingReceiptRecord({ taskId, resourceKey: c.resourceKey }, 'received', now);
        tx.insert('comments', receipt.commentKey, receipt);
      }
    });
  }
}

// ---------------------------------------------------------------------------------------------
// Driver (this process)

interface Child {
  proc: ChildProcess;
  port: number;
  ask(msg: Command): Promise<any>;
}

async function spawnServer(kind: 'real' | 'baseline'): Promise<Child> {
  const proc = fork(fileURLToPath(import.meta.url), ['--serve', kind], {
    execArgv: [...process.execArgv, '--max-old-space-size=6144'],
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
function deliveryFactory() {
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

interface Run {
  rps: number;
  p50: number;
  p99: number;
  ok: number;
  bad: number;
  errors: number;
}

async function load(port: number, seconds: number, opts: { connections?: number; overallRate?: number } = {}): Promise<Run> {
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
function median(runs: Run[]): Run {
  return [...runs].sort((a, b) => a.rps - b.rps)[Math.floor(runs.length / 2)]!;
}

const fmt = (r: Run) =>
  `${r.rps.toFixed(0).padStart(6)} req/s   p50 ${r.p50.toFixed(2).padStart(6)} ms   p99 ${r.p99.toFixed(2).padStart(6)} ms   (2xx ${r.ok}, non-2xx ${r.bad}, errors ${r.errors})`;
const verdict = (pass: boolean) => (pass ? 'PASS' : 'MISS');

async function main(): Promise<void> {
  const started = performance.now();
  console.log(`webhook intake benchmark — unique signed deliveries, ${CONNECTIONS} connections, loopback`);
  console.log(`node ${process.version}, ${(await import('node:os')).cpus().length} cpus\n`);

  // (a) saturation: baseline vs the real server, interleaved in slices so that load from anything
  // else on the machine hits both alike; the median slice of each counts.
  const baseline = await spawnServer('baseline');
  const real = await spawnServer('real');
  await load(baseline.port, WARMUP_S);
  await load(real.port, WARMUP_S);
  const before = (await real.ask({ cmd: 'tasks' })).tasks as number;
  const baseRuns: Run[] = [];
  const satRuns: Run[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    baseRuns.push(await load(baseline.port, SLICE_S));
    satRuns.push(await load(real.port, SLICE_S));
  }
  baseline.proc.send({ cmd: 'exit' });
  const base = median(baseRuns);
  const sat = median(satRuns);
  console.log(`baseline (HMAC + 202)      ${fmt(base)}   slices: ${baseRuns.map((r) => r.rps.toFixed(0)).join(', ')}`);
  console.log(`real (durable intake)      ${fmt(sat)}   slices: ${satRuns.map((r) => r.rps.toFixed(0)).join(', ')}`);
  const ratio = sat.rps / base.rps;

  const satTasks = (await real.ask({ cmd: 'tasks' })) as { tasks: number; stats: { compactions: number } };
  const satDurable = (await real.ask({ cmd: 'reopen' })).tasks as number;
  real.proc.send({ cmd: 'exit' });

  // (b) p99 at 80 % of our saturation rate, on a fresh server so the store starts as small as the
  // saturation runs' did (it grows by every request).
  const rate = Math.round(sat.rps * 0.8);
  const paced = await spawnServer('real');
  await load(paced.port, WARMUP_S, { overallRate: rate });
  const pacedBefore = (await paced.ask({ cmd: 'tasks' })).tasks as number;
  const at80 = await load(paced.port, RATE_S, { overallRate: rate });
  console.log(`real @ ${String(rate).padStart(5)} req/s (80 %) ${fmt(at80)}`);
  const pacedTasks = (await paced.ask({ cmd: 'tasks' })) as { tasks: number; stats: { compactions: number } };
  const pacedDurable = (await paced.ask({ cmd: 'reopen' })).tasks as number;
  paced.proc.send({ cmd: 'exit' });

  const answered = satRuns.reduce((a, r) => a + r.ok, 0) + at80.ok;
  const created = satTasks.tasks - before + (pacedTasks.tasks - pacedBefore);
  const failed = satRuns.reduce((a, r) => a + r.bad + r.errors, 0) + at80.bad + at80.errors;
  const allDurable = satDurable === satTasks.tasks && pacedDurable === pacedTasks.tasks && created >= answered && failed === 0;
  console.log(
    `durability: ${answered} answered 202 in the measured runs, ${created} tasks created; after reopening the stores ` +
      `${satDurable}/${satTasks.tasks} and ${pacedDurable}/${pacedTasks.tasks} tasks present ` +
      `(compactions: ${satTasks.stats.compactions}, ${pacedTasks.stats.compactions})`,
  );

  // (c) p50 with 1,000 vs 100,000 tasks already stored, at a fixed moderate rate.
  const grow = await spawnServer('real');
  const p1k = await grow.ask({ cmd: 'prefill', total: 1_000 });
  await load(grow.port, WARMUP_S, { overallRate: LATENCY_RATE, connections: 8 });
  const small = await load(grow.port, LATENCY_S, { overallRate: LATENCY_RATE, connections: 8 });
  console.log(`\n@${p1k.tasks} tasks stored     ${fmt(small)}`);
  const p100k = await grow.ask({ cmd: 'prefill', total: 100_000 });
  console.log(`(prefilled to ${p100k.tasks} tasks in ${(p100k.ms / 1000).toFixed(1)} s, compacted)`);
  await load(grow.port, WARMUP_S, { overallRate: LATENCY_RATE, connections: 8 });
  const big = await load(grow.port, LATENCY_S, { overallRate: LATENCY_RATE, connections: 8 });
  console.log(`@${p100k.tasks} tasks stored  ${fmt(big)}`);
  grow.proc.send({ cmd: 'exit' });
  const growth = big.p50 / small.p50;

  console.log('\nresults');
  console.log(`  throughput ratio real/baseline  ${ratio.toFixed(2)}  (target >= ${TARGET_RATIO}, every 202 durable: ${allDurable ? 'yes' : 'NO'})  ${verdict(ratio >= TARGET_RATIO && allDurable)}`);
  console.log(`  p99 at 80 % of saturation       ${at80.p99.toFixed(2)} ms  (target <= ${TARGET_P99_MS} ms)  ${verdict(at80.p99 <= TARGET_P99_MS)}`);
  console.log(`  p50 @100k / p50 @1k             ${growth.toFixed(2)}  (${big.p50.toFixed(2)} / ${small.p50.toFixed(2)} ms, target <= ${TARGET_GROWTH})  ${verdict(growth <= TARGET_GROWTH)}`);
  console.log(`  total time ${((performance.now() - started) / 1000).toFixed(0)} s`);
}

if (process.argv[2] === '--serve') {
  await (process.argv[3] === 'baseline' ? serveBaseline() : serveReal());
} else {
  await main();
}
