// What makes the webhook's latency tail: the real server of bench/webhook-receivers.ts driven at a fixed rate
// (default 80 % of its saturation, measured first, as bench:webhook-receivers does), in windows; for each
// window autocannon's p50/p99 next to the server's own event-loop delay (p99, max), garbage-collection
// pauses and the store's group commits. A latency p99 far above the event loop's max is CPU contention (another
// thread or process had the core); a loop max near the latency p99 is a stall on the main thread.
// Run: npm run profile:webhook-tail   (TAIL_RATE=<req/s>, TAIL_WINDOWS=3, TAIL_SECONDS=8,
// TAIL_NODE_FLAGS='--max-semi-space-size=64' to try Node/V8 flags on the server)
import { loadavg } from 'node:os';
import { fmt, load, spawnServer } from './webhook-harness.js';

const WINDOWS = Number(process.env['TAIL_WINDOWS'] ?? 3);
const SECONDS = Number(process.env['TAIL_SECONDS'] ?? 8);

console.log(`# webhook latency tail — node ${process.version}, load average ${loadavg().map((l) => l.toFixed(1)).join(' ')}`);
let rate = Number(process.env['TAIL_RATE'] ?? 0);
if (!rate) {
  const probe = await spawnServer('real');
  await load(probe.port, 3);
  const sat = await load(probe.port, 5);
  probe.proc.send({ cmd: 'exit' });
  rate = Math.round(sat.rps * 0.8);
  console.log(`saturation ${sat.rps.toFixed(0)} req/s → rate ${rate} req/s (80 %)`);
}
const real = await spawnServer('real', (process.env['TAIL_NODE_FLAGS'] ?? '').split(' ').filter(Boolean));
await load(real.port, 3, { overallRate: rate });
await real.ask({ cmd: 'diag' });
console.log('\n| window | req/s | p50 ms | p99 ms | loop delay p99 / max ms | GC pauses (count, total ms, max ms) | group commits so far |');
console.log('|---:|---:|---:|---:|---:|---:|---:|');
for (let w = 1; w <= WINDOWS; w++) {
  const r = await load(real.port, SECONDS, { overallRate: rate });
  const d = await real.ask({ cmd: 'diag' });
  console.log(
    `| ${w} | ${r.rps.toFixed(0)} | ${r.p50} | ${r.p99} | ${d.eventLoopDelay.p99} / ${d.eventLoopDelay.max} | ${d.gc.count}, ${d.gc.totalMs}, ${d.gc.maxMs} | ${d.store.batches} |`,
  );
  if (r.bad + r.errors > 0) console.log(`  window ${w}: ${fmt(r)}`);
}
real.proc.send({ cmd: 'exit' });
