// Webhook intake benchmark: the real server (durable store with fsync, actor runtime, intake; no
// scheduler or receipts) against a baseline Koa app that only verifies the HMAC and answers 202.
// Every request is a unique, signed delivery (new delivery UUID, new comment id).
// Servers run in child processes (one core each side on a 2-core box); autocannon drives them from
// this process over loopback (bench/webhook-harness.ts). Run: npm run bench:webhook
import { CONNECTIONS, fmt, load, median, spawnServer, verdict, type Run } from './webhook-harness.js';

const ROUNDS = 3;
const SLICE_S = 5;
const RATE_S = 10;
const LATENCY_S = 8;
const WARMUP_S = 3;
const LATENCY_RATE = 200;
const TARGET_RATIO = 0.6;
const TARGET_P99_MS = 25;
const TARGET_GROWTH = 1.5;

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

await main();
