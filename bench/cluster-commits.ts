// Commits per second on one database with 1, 2 and 3 nodes committing at once, in one run on the same
// throwaway PostgreSQL. Each node is the service's own store (the SQL store on PostgreSQL, registered
// under its node id) in this process, with CLIENTS callers each committing one transaction at a time
// (an insert and an audit event, like a small intake step). Nodes share nothing but the database: the
// figure shows what several writers on one database cost, not task throughput.
import type { ThrowawayPostgres } from '../src/cli/throwaway-postgres.js';
import { createPostgresSqlStore, type SqlStore } from '../src/store/index.js';

const COMMITS = Number(process.env['BENCH_CLUSTER_COMMITS'] ?? 6000);
const CLIENTS = 16;

async function commitsPerSecond(postgres: ThrowawayPostgres, name: string, nodes: number): Promise<number> {
  const url = await postgres.createDatabase(name);
  const stores: SqlStore[] = [];
  try {
    for (let i = 0; i < nodes; i++) {
      const store = createPostgresSqlStore({ url, node: { nodeId: `node-${i}`, url: null, version: 'bench', heartbeatMs: 10_000 } });
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
  }
}

export async function measureClusterCommits(postgres: ThrowawayPostgres): Promise<void> {
  console.log(`\ncommits per second, ${CLIENTS} callers per node, ${COMMITS} commits per round`);
  const alone = await commitsPerSecond(postgres, 'bench_commits_1', 1);
  console.log(`  1 node                          ${alone.toFixed(0)}/s`);
  for (const nodes of [2, 3]) {
    const shared = await commitsPerSecond(postgres, `bench_commits_${nodes}`, nodes);
    console.log(`  ${nodes} nodes on one database          ${shared.toFixed(0)}/s   ${(shared / alone).toFixed(2)}× one node`);
  }
}
