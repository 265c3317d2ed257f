// What one stopped node costs the others, in one run: three real intake processes
// (bench/webhook-harness.ts, `real-postgres`: the durable store, actor runtime and intake a node
// runs) on one throwaway PostgreSQL, unique signed deliveries at a steady rate sent round-robin to
// all three, as a load balancer in front of nodes does (BENCH_PAUSE_RATE, default 60 a second: what
// three processes and PostgreSQL on a 2-core machine carry well below saturation; at saturation the
// before-pause tail is queueing, and the ratio says nothing). After BEFORE_S seconds one node is stopped
// with SIGSTOP for PAUSE_S seconds, mid-stream (whatever transactions it has open stay open), then
// woken. Prints the other nodes' acknowledgement p50/p99 before the pause and during it, and the
// ratio of the p99s (target ≤ 2×). A sender gives up on a delivery after Gitea's DELIVER_TIMEOUT (5 s);
// the deliveries sent to the stopped node are counted, not timed.
// Run: npm run bench:pause (also part of npm run bench:cluster)
import { Agent, request } from 'node:http';
import { cpus, loadavg } from 'node:os';
import { pathToFileURL } from 'node:url';
import { startThrowawayPostgres, type ThrowawayPostgres } from '../src/cli/throwaway-postgres.js';
import { deliveryFactory, spawnServer, type Child } from './webhook-harness.js';

const RATE = Number(process.env['BENCH_PAUSE_RATE'] ?? 60);
const BEFORE_S = Number(process.env['BENCH_PAUSE_BEFORE_S'] ?? 10);
const PAUSE_S = Number(process.env['BENCH_PAUSE_S'] ?? 30);
const WARMUP_S = 10;
/** Gitea's DELIVER_TIMEOUT: a delivery not answered by then is marked failed and not sent again. */
const GIVE_UP_MS = 5_000;
const NODES = 3;
const TARGET_RATIO = 2;

interface Ack {
  node: number;
  /** performance.now() when the delivery was sent. */
  at: number;
  /** Until the whole answer, or null: no answer within GIVE_UP_MS, or the connection failed. */
  ms: number | null;
  status: number | null;
}

const nextDelivery = deliveryFactory();

function send(port: number, agent: Agent): Promise<{ ms: number | null; status: number | null }> {
  const { body, headers } = nextDelivery();
  const t0 = performance.now();
  return new Promise((resolve) => {
    let settled = false;
    const settle = (r: { ms: number | null; status: number | null }) => {
      if (settled) return;
      settled = true;
      clearTimeout(giveUp);
      resolve(r);
    };
    const req = request({ host: '127.0.0.1', port, path: '/api/gitea/webhook', method: 'POST', agent, headers: { ...headers, 'content-length': body.length } }, (res) => {
      res.resume();
      res.on('end', () => settle({ ms: performance.now() - t0, status: res.statusCode ?? null }));
      // A response cut off before its end (its socket destroyed) counts as unanswered.
      res.on('close', () => settle({ ms: null, status: null }));
    });
    // As Gitea: the whole delivery within DELIVER_TIMEOUT, or it is given up.
    const giveUp = setTimeout(() => {
      req.destroy();
      settle({ ms: null, status: null });
    }, GIVE_UP_MS);
    req.on('error', () => settle({ ms: null, status: null }));
    req.end(body);
  });
}

/** `RATE` deliveries a second, round-robin over `ports`, for `seconds`; `onSecond(s)` at each whole second. */
async function stream(ports: number[], agents: Agent[], seconds: number, acks: Ack[], onSecond: (s: number) => void = () => undefined): Promise<void> {
  const start = performance.now();
  const total = Math.round(RATE * seconds);
  const pending: Array<Promise<void>> = [];
  let sent = 0;
  let second = 0;
  while (sent < total) {
    const elapsed = performance.now() - start;
    while (second <= Math.floor(elapsed / 1000)) onSecond(second++);
    const due = Math.min(total, Math.floor((elapsed * RATE) / 1000) + 1);
    for (; sent < due; sent++) {
      const node = sent % ports.length;
      const at = performance.now();
      pending.push(send(ports[node]!, agents[node]!).then((r) => void acks.push({ node, at, ...r })));
    }
    await new Promise((r) => setTimeout(r, 1));
  }
  await Promise.all(pending);
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]! : Number.NaN;
};

export interface PauseFigures {
  beforeP50: number;
  beforeP99: number;
  duringP50: number;
  duringP99: number;
  ratio: number;
}

export async function measurePause(postgres: ThrowawayPostgres): Promise<PauseFigures> {
  console.log(`\none node stopped (SIGSTOP) ${PAUSE_S} s under ${RATE} deliveries/s sent round-robin to ${NODES} intake processes on one PostgreSQL`);
  const url = await postgres.createDatabase('bench_pause');
  const nodes: Child[] = [];
  // One after the other: the first creates the schema.
  for (let i = 0; i < NODES; i++) nodes.push(await spawnServer('real-postgres', [], { ...process.env, BENCH_DATABASE_URL: url }));
  const ports = nodes.map((n) => n.port);
  const agents = nodes.map(() => new Agent({ keepAlive: true, maxSockets: 64 }));
  const paused = NODES - 1;
  try {
    await stream(ports, agents, WARMUP_S, []);
    const acks: Ack[] = [];
    const start = performance.now();
    let pausedAt = Number.POSITIVE_INFINITY;
    let wokeAt = Number.POSITIVE_INFINITY;
    await stream(ports, agents, BEFORE_S + PAUSE_S, acks, (s) => {
      if (s === BEFORE_S) {
        process.kill(nodes[paused]!.proc.pid!, 'SIGSTOP');
        pausedAt = performance.now();
      }
    });
    process.kill(nodes[paused]!.proc.pid!, 'SIGCONT');
    wokeAt = performance.now();
    const others = acks.filter((a) => a.node !== paused);
    const timed = (from: number, to: number) => others.filter((a) => a.at >= from && a.at < to);
    const before = timed(start, pausedAt);
    const during = timed(pausedAt, wokeAt);
    const ms = (list: Ack[]) => list.filter((a) => a.ms !== null && a.status !== null && a.status < 300).map((a) => a.ms!);
    const failed = (list: Ack[]) => list.filter((a) => a.ms === null || a.status === null || a.status >= 300).length;
    const toPaused = acks.filter((a) => a.node === paused && a.at >= pausedAt);
    const figures: PauseFigures = {
      beforeP50: pct(ms(before), 50),
      beforeP99: pct(ms(before), 99),
      duringP50: pct(ms(during), 50),
      duringP99: pct(ms(during), 99),
      ratio: pct(ms(during), 99) / pct(ms(before), 99),
    };
    const line = (label: string, list: Ack[], p50: number, p99: number) =>
      `  ${label.padEnd(28)}${String(list.length).padStart(6)} deliveries   p50 ${p50.toFixed(2).padStart(7)} ms   p99 ${p99.toFixed(2).padStart(7)} ms   max ${Math.max(...ms(list)).toFixed(0)} ms   unanswered within 5 s or not 2xx: ${failed(list)}`;
    console.log(line(`others, ${BEFORE_S} s before`, before, figures.beforeP50, figures.beforeP99));
    console.log(line(`others, ${PAUSE_S} s during`, during, figures.duringP50, figures.duringP99));
    console.log(`  sent to the stopped node while stopped: ${toPaused.length}, given up after 5 s (Gitea marks these failed): ${toPaused.filter((a) => a.ms === null).length}`);
    const tasks = await Promise.all(nodes.map(async (n) => (await n.ask({ cmd: 'tasks' })).tasks as number));
    const accepted = acks.filter((a) => a.status === 202).length;
    console.log(`  tasks in the database ${tasks[0]} (incl. warm-up); ${accepted} deliveries of the measured stream answered 202 (a delivery given up on may still be accepted once its node wakes)`);
    console.log(`  other nodes' ack p99 during the pause / before it: ${figures.ratio.toFixed(2)}× (target ≤ ${TARGET_RATIO}×)  ${figures.ratio <= TARGET_RATIO ? 'PASS' : 'MISS'}`);
    return figures;
  } finally {
    for (const a of agents) a.destroy();
    for (const n of nodes) {
      try {
        process.kill(n.proc.pid!, 'SIGCONT');
      } catch {
        // already gone
      }
      n.proc.send({ cmd: 'exit' });
    }
    await Promise.all(nodes.map((n) => new Promise<void>((r) => (n.proc.exitCode !== null ? r() : n.proc.once('exit', () => r())))));
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  console.log(`node ${process.version}, ${cpus().length} cpus, load average ${loadavg().map((l) => l.toFixed(1)).join(' ')}`);
  const postgres = await startThrowawayPostgres();
  try {
    await measurePause(postgres);
  } finally {
    await postgres.stop();
  }
}
