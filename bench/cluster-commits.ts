// Commits per second on one database when every node commits (PostgresStore `writers: 'many'`,
// docs/DESIGN-nodes-at-once.md step 2) with 1, 2 and 3 nodes, against one node writing alone (the
// default), in one run on the same throwaway PostgreSQL. Each node is the service's own store in this
// process, with CLIENTS callers each committing one transaction at a time (an insert and an audit
// event, like a small intake step). The many-writers figure pays one round trip more per batch (the
// commit lock) and waits for the other nodes' batches: it shows what sharing the writes costs, not
// task throughput.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ThrowawayPostgres } from '../src/cli/throwaway-postgres.js';
import { PostgresStore } from '../src/store/index.js';

const COMMITS = Number(process.env['BENCH_CLUSTER_COMMITS'] ?? 6000);
const CLIENTS = 16;

async function commitsPerSecond(postgres: ThrowawayPostgres, name: string, writers: 'one' | 'many', nodes: number): Promise<number> {
  const url = await postgres.createDatabase(name);
  const root = mkdtempSync(join(tmpdir(), 'ccweb-bench-commits-'));
  const stores: PostgresStore[] = [];
  try {
    for (let i = 0; i < nodes; i++) {
      const store = new PostgresStore({ dir: join(root, `node-${i}`), url, nodeId: `node-${i}`, version: 'bench', writers });
      await store.open();
      stores.push(store);
    }
    const each = Math.ceil(COMMITS / nodes / CLIENTS);
    const started = performance.now();
    await Promise.all(
      stores.flatMap((store, i) =>
        Array.from({ length: CLIENTS }, async (_, c) => {
          for (let k = 0; k < each; k++) {
            await store.transact(async (tx) => {
              await tx.insert('tasks', `${i}-${c}-${k}`, { state: 'queued', stateVersion: 1 });
              await tx.appendAudit({ action: 'bench.commit', actor: 'bench' });
            });
          }
        }),
      ),
    );
    return (each * CLIENTS * nodes) / ((performance.now() - started) / 1000);
  } finally {
    for (const store of stores) await store.close().catch(() => undefined);
    rmSync(root, { recursive: true, force: true });
  }
}

export async function measureClusterCommits(postgres: ThrowawayPostgres): Promise<void> {
  console.log(`\ncommits per second, ${CLIENTS} callers per node, ${COMMITS} commits per round`);
  const alone = await commitsPerSecond(postgres, 'bench_commits_one', 'one', 1);
  console.log(`  one node writing alone          ${alone.toFixed(0)}/s`);
  for (const nodes of [1, 2, 3]) {
    const shared = await commitsPerSecond(postgres, `bench_commits_many_${nodes}`, 'many', nodes);
    console.log(`  ${nodes} node(s) sharing the writes   ${shared.toFixed(0)}/s   ${(shared / alone).toFixed(2)}× one node alone`);
  }
}
