// The store on PostgreSQL beside the embedded store, in one run: the real webhook intake
// (durable store, actor runtime, intake; bench/webhook-harness.ts) on each engine, the same unique
// signed deliveries over loopback. Prints saturation throughput and the acknowledgement's p50/p99 at
// one fixed rate both can carry, as ratios PostgreSQL / embedded. The PostgreSQL server is a throwaway
// one on this machine (src/cli/throwaway-postgres.ts): fsync and synchronous_commit on, like the
// embedded store's fdatasync; a database across a network adds its round trip to every batch.
// Then commits per second with 1, 2 and 3 nodes committing on one database (bench/cluster-commits.ts),
// completed tasks per minute with 1, 2 and 3 nodes (bench/cluster-tasks.ts; skip it with
// BENCH_CLUSTER_SKIP_TASKS=1), and the other nodes' ack p99 while one node is stopped against before
// (bench/pause.ts).
// Run: npm run bench:cluster
import { cpus, loadavg } from 'node:os';
import { startThrowawayPostgres } from '../src/cli/throwaway-postgres.js';
import { measureClusterCommits } from './cluster-commits.js';
import { measureClusterTasks } from './cluster-tasks.js';
import { measurePause } from './pause.js';
import { CONNECTIONS, fmt, load, median, spawnServer, type Child, type Run } from './webhook-harness.js';

const ROUNDS = 3;
const SLICE_S = 5;
const WARMUP_S = 3;
const PACED_S = 8;

async function main(): Promise<void> {
  console.log(`store engines — the real intake on the embedded store and on PostgreSQL, ${CONNECTIONS} connections, loopback`);
  console.log(`node ${process.version}, ${cpus().length} cpus, load average ${loadavg().map((l) => l.toFixed(1)).join(' ')}\n`);
  const postgres = await startThrowawayPostgres();
  try {
    const url = await postgres.createDatabase('bench_intake');
    const paced = await postgres.createDatabase('bench_paced');
    const embedded = await spawnServer('real');
    const onPostgres = await spawnServer('real-postgres', [], { ...process.env, BENCH_DATABASE_URL: url });
    for (const s of [embedded, onPostgres]) await load(s.port, WARMUP_S);
    // Interleaved slices: load from anything else on the machine hits both alike.
    const runs = new Map<Child, Run[]>([[embedded, []], [onPostgres, []]]);
    for (let round = 0; round < ROUNDS; round++) for (const [server, list] of runs) list.push(await load(server.port, SLICE_S));
    const satE = median(runs.get(embedded)!);
    const satP = median(runs.get(onPostgres)!);
    console.log(`${'embedded: saturation'.padEnd(34)}${fmt(satE)}   slices: ${runs.get(embedded)!.map((r) => r.rps.toFixed(0)).join(', ')}`);
    console.log(`${'postgres: saturation'.padEnd(34)}${fmt(satP)}   slices: ${runs.get(onPostgres)!.map((r) => r.rps.toFixed(0)).join(', ')}`);
    const durableE = (await embedded.ask({ cmd: 'tasks' })).tasks as number;
    const durableP = (await onPostgres.ask({ cmd: 'tasks' })).tasks as number;
    const reopenedP = (await onPostgres.ask({ cmd: 'reopen' })).tasks as number;
    embedded.proc.send({ cmd: 'exit' });
    onPostgres.proc.send({ cmd: 'exit' });

    // p99 at one rate both carry (80 % of the slower one's saturation), on fresh servers.
    const rate = Math.round(Math.min(satE.rps, satP.rps) * 0.8);
    const e2 = await spawnServer('real');
    const p2 = await spawnServer('real-postgres', [], { ...process.env, BENCH_DATABASE_URL: paced });
    for (const s of [e2, p2]) await load(s.port, WARMUP_S, { overallRate: rate });
    const pacedE = await load(e2.port, PACED_S, { overallRate: rate });
    const pacedP = await load(p2.port, PACED_S, { overallRate: rate });
    console.log(`${`embedded @ ${rate} req/s`.padEnd(34)}${fmt(pacedE)}`);
    console.log(`${`postgres @ ${rate} req/s`.padEnd(34)}${fmt(pacedP)}`);
    e2.proc.send({ cmd: 'exit' });
    p2.proc.send({ cmd: 'exit' });

    console.log('\nresults (PostgreSQL / embedded, same run)');
    console.log(`  saturation throughput          ${(satP.rps / satE.rps).toFixed(2)}`);
    console.log(`  ack p50 at ${rate} req/s         ${(pacedP.p50 / pacedE.p50).toFixed(2)}  (${pacedE.p50.toFixed(2)} → ${pacedP.p50.toFixed(2)} ms)`);
    console.log(`  ack p99 at ${rate} req/s         ${(pacedP.p99 / pacedE.p99).toFixed(2)}  (${pacedE.p99.toFixed(2)} → ${pacedP.p99.toFixed(2)} ms)`);
    console.log(`  durable: embedded ${durableE} tasks; postgres ${durableP} tasks, ${reopenedP} after reopening from the database`);

    await measureClusterCommits(postgres);
    await measurePause(postgres);
    if (process.env['BENCH_CLUSTER_SKIP_TASKS'] !== '1') await measureClusterTasks(postgres);
  } finally {
    await postgres.stop();
  }
}

await main();
