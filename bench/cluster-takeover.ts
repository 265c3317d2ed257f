// How long a standby takes to write once the writer stops, after the writer committed COMMITS
// transactions while it waited: with the standby applying the writer's log lines to its
// replica as they come (the default, every second) and without (tailMs 0: everything is replayed
// at the takeover, as before), in one run, on the same throwaway PostgreSQL. The stores are the
// service's own (PostgresStore), in this process; the lock is polled every 100 ms in both, so the
// figure is the replay, not the poll interval.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ThrowawayPostgres } from '../src/cli/throwaway-postgres.js';
import { PostgresStore } from '../src/store/index.js';

const COMMITS = Number(process.env['BENCH_TAKEOVER_COMMITS'] ?? 50_000);
const IN_FLIGHT = 64;

const until = async (what: string, f: () => boolean, ms: number) => {
  const deadline = Date.now() + ms;
  while (!f()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
};

async function takeover(postgres: ThrowawayPostgres, name: string, tailMs: number): Promise<{ ms: number; replayed: number; tailed: number }> {
  const url = await postgres.createDatabase(name);
  const root = mkdtempSync(join(tmpdir(), 'ccweb-bench-takeover-'));
  const options = { url, version: 'bench', indexes: { tasks: ['state'] } };
  const a = new PostgresStore({ ...options, dir: join(root, 'a'), nodeId: 'node-a' });
  await a.open();
  let waiting = false;
  const b = new PostgresStore({ ...options, dir: join(root, 'b'), nodeId: 'node-b', tailMs, standby: { onWaiting: () => (waiting = true), pollMs: 100 } });
  try {
    const opening = b.open();
    await until('the standby to wait', () => waiting, 30_000);
    for (let i = 0; i < COMMITS; i += IN_FLIGHT) {
      await Promise.all(
        Array.from({ length: Math.min(IN_FLIGHT, COMMITS - i) }, (_, j) =>
          a.transact(async (tx) => {
            await tx.insert('tasks', `t${i + j}`, { taskId: `t${i + j}`, state: 'queued', instruction: 'x'.repeat(200) });
            await tx.appendAudit({ action: 'task.created', actor: 'bench', taskId: `t${i + j}` });
          }),
        ),
      );
    }
    // A standby that tails is level with the writer before it stops (its steady state).
    if (tailMs !== 0) await until('the standby to apply every commit', () => b.stats().tailedWhileWaiting === COMMITS, 120_000);
    const started = performance.now();
    await a.close();
    await opening;
    const ms = performance.now() - started;
    const taken = await b.count('tasks');
    if (taken !== COMMITS) throw new Error(`the standby took over with ${taken} of ${COMMITS} tasks`);
    const stats = b.stats();
    return { ms, replayed: stats.replayedAtOpen, tailed: stats.tailedWhileWaiting };
  } finally {
    await b.close().catch(() => undefined);
    await a.close().catch(() => undefined);
    rmSync(root, { recursive: true, force: true });
  }
}

export async function measureTakeover(postgres: ThrowawayPostgres): Promise<void> {
  console.log(`\ntakeover — the writer stops after ${COMMITS} commits made while a standby waited (lock polled every 100 ms)`);
  const cold = await takeover(postgres, 'bench_takeover_cold', 0);
  const warm = await takeover(postgres, 'bench_takeover_warm', 1000);
  console.log(`${'replays at takeover (tailMs 0)'.padEnd(34)}${cold.ms.toFixed(0).padStart(6)} ms   ${cold.replayed} lines replayed then`);
  console.log(`${'applies while waiting (default)'.padEnd(34)}${warm.ms.toFixed(0).padStart(6)} ms   ${warm.replayed} lines replayed then, ${warm.tailed} while waiting`);
  console.log(`  takeover time, tailing / replaying    ${(warm.ms / cold.ms).toFixed(2)}`);
}
