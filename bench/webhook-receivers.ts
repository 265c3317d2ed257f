// Webhook intake benchmark: the real server (durable store with fsync, actor runtime, intake; no
// scheduler or receipts) against a baseline Koa app that only verifies the HMAC and answers 202.
// Every request is a unique, signed delivery (new delivery UUID, new comment id).
// Servers run in child processes (one core each side on a 2-core box); autocannon drives them from
// this process over loopback (bench/webhook-harness.ts). Run: npm run bench:webhook-receivers
import { loadavg } from 'node:os';
import { CONNECTIONS, fmt, load, median, spawnServer, verdict, type Child, type Run } from './webhook-harness.js';

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
  console.log(`node ${process.version}, ${(await import('node:os')).cpus().length} cpus, load average ${loadavg().map((l) => l.toFixed(1)).join(' ')} (other work on the machine shows here)\n`);

  // (a) saturation: baseline, @octokit/webhooks and the real server, interleaved in slices so that
  // load from anything else on the machine hits all alike; the median slice of each counts. Each
  // server's CPU time over its slices, per answered request, is printed too: unlike req/s it hardly
  // depends on what else runs on the machine.
  const baseline = await spawnServer('baseline');
  const octokit = await spawnServer('octokit');
  const floor = await spawnServer('floor');
  const real = await spawnServer('real');
  for (const s of [baseline, octokit, floor, real]) await load(s.port, WARMUP_S);
  const before = (await real.ask({ cmd: 'tasks' })).tasks as number;
  const slices = new Map<Child, { runs: Run[]; cpu: number }>([baseline, octokit, floor, real].map((s) => [s, { runs: [], cpu: 0 }]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const [server, acc] of slices) {
      const cpu0 = ((await server.ask({ cmd: 'cpu' })) as { cpu: number }).cpu;
      acc.runs.push(await load(server.port, SLICE_S));
      acc.cpu += ((await server.ask({ cmd: 'cpu' })) as { cpu: number }).cpu - cpu0;
    }
  }
  baseline.proc.send({ cmd: 'exit' });
  octokit.proc.send({ cmd: 'exit' });
  floor.proc.send({ cmd: 'exit' });
  const line = (label: string, server: Child) => {
    const { runs, cpu } = slices.get(server)!;
    const ok = runs.reduce((a, r) => a + r.ok, 0);
    console.log(`${label.padEnd(33)}${fmt(median(runs))}   slices: ${runs.map((r) => r.rps.toFixed(0)).join(', ')}   CPU ${(cpu / ok).toFixed(0)} µs/req`);
    return { run: median(runs), cpuPerRequest: cpu / ok };
  };
  const base = line('baseline (Koa, HMAC, 202)', baseline);
  const okit = line('@octokit/webhooks verify+receive', octokit);
  const flo = line('floor (HMAC, dedupe, fsync, 202)', floor);
  const satLine = line('real (durable intake)', real);
  const sat = satLine.run;
  const satRuns = slices.get(real)!.runs;
  const ratio = sat.rps / base.run.rps;

  const satTasks = (await real.ask({ cmd: 'tasks' })) as { tasks: number; stats: { batches: number } };
  const satDurable = (await real.ask({ cmd: 'reopen' })).tasks as number;
  real.proc.send({ cmd: 'exit' });

  // (b) p99 at 80 % of our saturation rate, on a fresh server so the store starts as small as the
  // saturation runs' did (it grows by every request).
  const rate = Math.round(sat.rps * 0.8);
  const paced = await spawnServer('real');
  await load(paced.port, WARMUP_S, { overallRate: rate });
  const pacedBefore = (await paced.ask({ cmd: 'tasks' })).tasks as number;
  const at80 = await load(paced.port, RATE_S, { overallRate: rate });
  console.log(`${`real @ ${rate} req/s (80 %)`.padEnd(33)}${fmt(at80)}`);
  const pacedTasks = (await paced.ask({ cmd: 'tasks' })) as { tasks: number; stats: { batches: number } };
  const pacedDurable = (await paced.ask({ cmd: 'reopen' })).tasks as number;
  paced.proc.send({ cmd: 'exit' });

  const answered = satRuns.reduce((a, r) => a + r.ok, 0) + at80.ok;
  const created = satTasks.tasks - before + (pacedTasks.tasks - pacedBefore);
  const failed = satRuns.reduce((a, r) => a + r.bad + r.errors, 0) + at80.bad + at80.errors;
  const allDurable = satDurable === satTasks.tasks && pacedDurable === pacedTasks.tasks && created >= answered && failed === 0;
  console.log(
    `durability: ${answered} answered 202 in the measured runs, ${created} tasks created; after reopening the stores ` +
      `${satDurable}/${satTasks.tasks} and ${pacedDurable}/${pacedTasks.tasks} tasks present ` +
      `(group commits: ${satTasks.stats.batches}, ${pacedTasks.stats.batches})`,
  );

  // (c) p50 with 1,000 vs 100,000 tasks already stored, at a fixed moderate rate.
  const grow = await spawnServer('real');
  const p1k = await grow.ask({ cmd: 'prefill', total: 1_000 });
  await load(grow.port, WARMUP_S, { overallRate: LATENCY_RATE, connections: 8 });
  const small = await load(grow.port, LATENCY_S, { overallRate: LATENCY_RATE, connections: 8 });
  console.log(`\n@${p1k.tasks} tasks stored     ${fmt(small)}`);
  const p100k = await grow.ask({ cmd: 'prefill', total: 100_000 });
  console.log(`(prefilled to ${p100k.tasks} tasks in ${(p100k.ms / 1000).toFixed(1)} s)`);
  await load(grow.port, WARMUP_S, { overallRate: LATENCY_RATE, connections: 8 });
  const big = await load(grow.port, LATENCY_S, { overallRate: LATENCY_RATE, connections: 8 });
  console.log(`@${p100k.tasks} tasks stored  ${fmt(big)}`);
  grow.proc.send({ cmd: 'exit' });
  const growth = big.p50 / small.p50;

  console.log('\nresults');
  console.log(`  throughput ratio real/baseline  ${ratio.toFixed(2)}  (target >= ${TARGET_RATIO}, every 202 durable: ${allDurable ? 'yes' : 'NO'})  ${verdict(ratio >= TARGET_RATIO && allDurable)}`);
  console.log(`  throughput ratio real/octokit   ${(sat.rps / okit.run.rps).toFixed(2)}  (octokit/baseline ${(okit.run.rps / base.run.rps).toFixed(2)})`);
  console.log(`  throughput ratio floor/baseline ${(flo.run.rps / base.run.rps).toFixed(2)}  (the least a durable receiver keeping the guarantees does: bench/floor-receiver.ts; real/floor ${(sat.rps / flo.run.rps).toFixed(2)})`);
  console.log(`  CPU per request real/baseline   ${(satLine.cpuPerRequest / base.cpuPerRequest).toFixed(1)}x  (${satLine.cpuPerRequest.toFixed(0)} / ${base.cpuPerRequest.toFixed(0)} µs; baseline/real = ${(base.cpuPerRequest / satLine.cpuPerRequest).toFixed(2)}, the ratio a CPU-bound run would show)`);
  console.log(`  p99 at 80 % of saturation       ${at80.p99.toFixed(2)} ms  (target <= ${TARGET_P99_MS} ms)  ${verdict(at80.p99 <= TARGET_P99_MS)}`);
  console.log(`  p50 @100k / p50 @1k             ${growth.toFixed(2)}  (${big.p50.toFixed(2)} / ${small.p50.toFixed(2)} ms, target <= ${TARGET_GROWTH})  ${verdict(growth <= TARGET_GROWTH)}`);
  console.log(`  total time ${((performance.now() - started) / 1000).toFixed(0)} s, load average at the end ${loadavg().map((l) => l.toFixed(1)).join(' ')}`);
}

await main();
