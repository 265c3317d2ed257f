// Webhook intake on each store engine, in one run: the acknowledgement's p99 at 200 webhooks/s and
// saturation (the most 202s per second the server sustains), for the real intake server
// (bench/webhook-harness.ts: durable store, actor runtime, intake over HTTP; unique signed deliveries)
// on
//   - journal, before: the commit before the store moved to SQLite, its own code and its embedded
//     journal engine (bench/baseline-commit.ts) — the baseline;
//   - SQLite: today's embedded store;
//   - PostgreSQL: today's SQL store on a throwaway PostgreSQL on this machine (fsync and
//     synchronous_commit on), constructed directly (SqlStore over PostgresConnection) —
//     BENCH_POSTGRES=0 leaves it out.
// Every engine's server runs at once in its own process; each measurement goes round the engines, so
// load from anything else on the machine hits all alike. The 200/s rounds come first, on stores holding
// little more than the warm-up's tasks; each figure is the median of three rounds. Every 202 must be durable: the
// stores are reopened and counted at the end. The older comparison against bare receivers is
// `npm run bench:webhook-receivers`. Run: npm run bench:webhook
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { startThrowawayPostgres, type ThrowawayPostgres } from '../src/cli/throwaway-postgres.js';
import { baselineTree } from './baseline-commit.js';
import { CONNECTIONS, fmt, load, median, spawnServer, verdict, type Child, type Run, type ServerKind } from './webhook-harness.js';

const RATE = 200;
const TARGET_P99_MS = 50;
const WARMUP_S = 3;
const PACED_S = 5;
const SLICES = 3;
const SLICE_S = 4;

/** The round with the median p99 (the machine is shared: one round may meet another job's burst). */
function medianP99(runs: Run[]): Run {
  return [...runs].sort((a, b) => a.p99 - b.p99)[Math.floor(runs.length / 2)]!;
}

interface Engine {
  label: string;
  server: Child;
  /** At RATE/s, and at saturation: one run per round. */
  paced: Run[];
  slices: Run[];
  tasksBefore: number;
  /** Requests not answered 202 in the measured runs: any makes that engine's figures void. */
  refused?: number;
}

async function main(): Promise<void> {
  const started = performance.now();
  console.log(`webhook intake per store engine — unique signed deliveries over loopback; p99 at ${RATE}/s (8 connections; the median of ${SLICES} rounds of ${PACED_S} s), saturation (${CONNECTIONS} connections; the median of ${SLICES} rounds of ${SLICE_S} s)`);
  console.log(`node ${process.version}, ${cpus().length} cpus, load average ${loadavg().map((l) => l.toFixed(1)).join(' ')} (other work on the machine shows here)`);
  const before = baselineTree();
  console.log(`baseline: ${before.commit.slice(0, 12)} (the journal engine's last commit as the embedded store), unpacked in ${before.root}\n`);

  let postgres: ThrowawayPostgres | undefined;
  const engines: Engine[] = [];
  const add = async (label: string, kind: ServerKind, env: NodeJS.ProcessEnv = process.env, harness?: string) => {
    const server = await spawnServer(kind, [], env, harness);
    engines.push({ label, server, paced: [], slices: [], tasksBefore: 0 });
  };
  try {
    await add('journal, before (baseline)', 'real', process.env, join(before.root, 'bench', 'webhook-harness.ts'));
    await add('SQLite (embedded default)', 'real');
    if (process.env['BENCH_POSTGRES'] !== '0') {
      try {
        postgres = await startThrowawayPostgres();
        const url = await postgres.createDatabase('bench_webhook');
        await add('PostgreSQL (SqlStore, direct)', 'real-sql-postgres', { ...process.env, BENCH_DATABASE_URL: url });
      } catch (error) {
        console.log(`PostgreSQL left out: ${(error as Error).message.split('\n')[0]}`);
      }
    }

    for (const e of engines) await load(e.server.port, WARMUP_S, { overallRate: RATE, connections: 8 });
    for (const e of engines) e.tasksBefore = (await e.server.ask({ cmd: 'tasks' })).tasks as number;
    for (let round = 0; round < SLICES; round++) for (const e of engines) e.paced.push(await load(e.server.port, PACED_S, { overallRate: RATE, connections: 8 }));
    for (let round = 0; round < SLICES; round++) for (const e of engines) e.slices.push(await load(e.server.port, SLICE_S));

    // Durability: every 202 of the measured runs is a task a fresh process finds on disk (or in the database).
    const durable: string[] = [];
    for (const e of engines) {
      const runs = [...e.paced, ...e.slices];
      const answered = runs.reduce((a, r) => a + r.ok, 0);
      const failed = runs.reduce((a, r) => a + r.bad + r.errors, 0);
      const held = (await e.server.ask({ cmd: 'tasks' })).tasks as number;
      const reopened = (await e.server.ask({ cmd: 'reopen' })).tasks as number;
      e.refused = failed;
      const ok = held - e.tasksBefore >= answered && reopened === held;
      durable.push(`${e.label}: ${answered} answered 202, ${held - e.tasksBefore} tasks created, ${reopened}/${held} after reopening  ${ok ? 'ok' : 'NOT DURABLE'}${failed > 0 ? `; ${failed} requests refused (non-2xx or errors)` : ''}`);
    }

    console.log(`at ${RATE} webhooks/s`);
    for (const e of engines) console.log(`  ${e.label.padEnd(32)}${fmt(medianP99(e.paced))}   p99 of the rounds: ${e.paced.map((r) => r.p99.toFixed(0)).join(', ')} ms`);
    console.log('saturation');
    for (const e of engines) console.log(`  ${e.label.padEnd(32)}${fmt(median(e.slices))}   slices: ${e.slices.map((r) => r.rps.toFixed(0)).join(', ')}`);
    console.log('durability');
    for (const line of durable) console.log(`  ${line}`);

    const base = engines[0]!;
    console.log(`\nresults (target: ack p99 <= ${TARGET_P99_MS} ms at ${RATE} webhooks/s on both engines; ratios against the baseline, same run)`);
    for (const e of engines) {
      const p99 = medianP99(e.paced).p99;
      const sat = median(e.slices).rps;
      const vs = e === base ? '' : `  (${(p99 / medianP99(base.paced).p99).toFixed(2)}× the baseline's p99, ${(sat / median(base.slices).rps).toFixed(2)}× its saturation)`;
      const target = e.refused ? 'VOID' : e === base ? '(baseline)' : verdict(p99 <= TARGET_P99_MS);
      const refused = e.refused ? `  — ${e.refused} requests refused (not 202): no valid figure for this engine` : '';
      console.log(`  ${e.label.padEnd(32)}p99 ${p99.toFixed(1).padStart(6)} ms at ${RATE}/s  ${target.padEnd(10)}  saturation ${sat.toFixed(0).padStart(5)}/s${vs}${refused}`);
    }
    console.log(`  total time ${((performance.now() - started) / 1000).toFixed(0)} s, load average at the end ${loadavg().map((l) => l.toFixed(1)).join(' ')}`);
  } finally {
    for (const e of engines) e.server.proc.send({ cmd: 'exit' });
    await Promise.all(engines.map((e) => new Promise((r) => (e.server.proc.exitCode !== null ? r(null) : e.server.proc.once('exit', r)))));
    await postgres?.stop();
  }
}

await main();
