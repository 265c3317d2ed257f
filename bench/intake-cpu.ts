// CPU per accepted comment of intake alone: intake.handle() called in-process (no HTTP, no Koa),
// 32 at a time, on the real durable store (fsync on) and actor runtime, with unique signed
// deliveries prepared beforehand. process.cpuUsage covers every thread (SQLite's commits and
// checkpoints included). Less noisy than req/s on a shared machine; each run prints its figure and
// the best of RUNS is the one to compare. Run: npm run bench:intake-cpu  (INTAKE_REQUESTS, INTAKE_RUNS)
import { spawnSync } from 'node:child_process';
import { createHmac, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { STORE_INDEXES } from '../src/domain/records.js';
import { createCommentRegistry } from '../test/support/comment-registry.js';
import { createIntake, type IntakeRequest } from '../src/intake/intake.js';
import { ActorRuntime } from '../src/runtime/actor-runtime.js';
import { createStore } from '../src/store/index.js';
import { taskKind } from '../src/tasks/task-actor.js';

const REQUESTS = Number(process.env['INTAKE_REQUESTS'] ?? 15_000);
const RUNS = Number(process.env['INTAKE_RUNS'] ?? 3);
const WARMUP = 3_000;
const CONCURRENCY = 32;
const SECRET = 'bench-secret';
const FIXTURES = fileURLToPath(new URL('../test/fixtures/gitea/webhooks/', import.meta.url));

async function once(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'ccweb-bench-intake-'));
  const store = createStore({ dir, indexes: STORE_INDEXES });
  await store.open();
  const runtime = new ActorRuntime({ store, kinds: [taskKind()] });
  const benchComments = createCommentRegistry();
  const intake = createIntake({ store, runtime, botLogin: 'ccweb-bot', secrets: [SECRET], fetchPermission: async () => 'write',
    // Gitea holds each comment posted (the lookup's own cost is not measured here).
    commentOnGitea: benchComments.lookup, workspaceRoot: join(dir, 'ws') });
  const fixtureHeaders = JSON.parse(readFileSync(join(FIXTURES, 'issue_comment_created_on_issue.headers.json'), 'utf8')).headers as Record<string, string>;
  const headers = Object.fromEntries(Object.entries(fixtureHeaders).map(([k, v]) => [k.toLowerCase(), v]));
  const fixture = JSON.parse(readFileSync(join(FIXTURES, 'issue_comment_created_on_issue.json'), 'utf8'));
  const request = (n: number): IntakeRequest => {
    fixture.comment.id = 100_000 + n;
    fixture.issue.number = (n % 2000) + 1;
    fixture.comment.body = `@ccweb-bot please fix the failing build, request ${n}`;
    const rawBody = Buffer.from(JSON.stringify(fixture, null, 2));
    const sig = createHmac('sha256', SECRET).update(rawBody).digest('hex');
    const r: IntakeRequest = { rawBody, headers: { ...headers, 'x-gitea-delivery': randomUUID(), 'x-gitea-signature': sig } };
    // Gitea holds the comment (learnt while the requests are built, outside the measured part).
    benchComments.learn(r);
    return r;
  };
  const drive = async (requests: IntakeRequest[]) => {
    let i = 0;
    const worker = async () => {
      while (i < requests.length) {
        const r = await intake.handle(requests[i++]!);
        if (r.status !== 202) throw new Error(`expected 202, got ${r.status} ${JSON.stringify(r.body)}`);
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  };
  await drive(Array.from({ length: WARMUP }, (_, n) => request(n)));
  const measured = Array.from({ length: REQUESTS }, (_, n) => request(WARMUP + n));
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await drive(measured);
  const cpu = process.cpuUsage(cpu0);
  const ms = performance.now() - t0;
  console.log(
    `${REQUESTS} accepted comments: CPU ${((cpu.user + cpu.system) / REQUESTS).toFixed(0)} µs each ` +
      `(user ${(cpu.user / REQUESTS).toFixed(0)}, system ${(cpu.system / REQUESTS).toFixed(0)}), ${((REQUESTS / ms) * 1000).toFixed(0)}/s`,
  );
  await runtime.settled();
  runtime.stopAll();
  await intake.close();
  await store.close();
  await rm(dir, { recursive: true, force: true });
}

if (process.argv[2] === '--once') {
  await once();
} else {
  // Each run in a fresh process, so one run's heap and JIT state do not carry into the next.
  const { loadavg } = await import('node:os');
  console.log(`intake CPU per accepted comment — ${RUNS} runs, node ${process.version}, load average ${loadavg().map((l) => l.toFixed(1)).join(' ')}`);
  const figures: number[] = [];
  for (let r = 0; r < RUNS; r++) {
    const out = spawnSync(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), '--once'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
    if (out.status !== 0) throw new Error(`run ${r + 1} failed (${out.status})`);
    process.stdout.write(`  ${out.stdout}`);
    const m = /CPU (\d+) µs/.exec(out.stdout);
    if (m) figures.push(Number(m[1]));
  }
  console.log(`best: ${Math.min(...figures)} µs CPU per accepted comment`);
}
