// What coordinating through the database costs, in one run: completed tasks per minute of one node with
// 6 task slots against three nodes with 2 each (the same 6 slots) on one PostgreSQL. The real service
// processes (each its own data directory and Codex home) behind a round-robin relay,
// the real Gitea with REPOS repositories whose webhooks go to the relay, the real Codex app-server
// and gitea-mcp, the scripted agent answering every model request after DELAY_MS (a model that takes
// its time; the turn itself is what a node spends its task slots on). Each round starts its nodes on
// a fresh database, posts TASKS mentions (one per issue, spread over the repositories) as fast as
// Gitea takes them, and times the first post to the last task ending. Every node is alike (any node
// takes any webhook and claims any repository's task); the ratio three nodes / one node is what the
// coordination costs (1.00: nothing), and 1 × 2 slots shows what the slots themselves add.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import type { ChildProcess } from 'node:child_process';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ThrowawayPostgres } from '../src/cli/throwaway-postgres.js';
import { instanceOfOwner } from '../src/leases/lease-owner.js';
import type { AuditEvent } from '../src/store/types.js';
import { clusterApi, FINAL_STATES } from '../test/support/cluster-api.js';
import { addRepository, stopNodes } from '../test/support/cluster-nodes.js';
import { startPublishEnvironment, type PublishEnvironment } from '../test/support/publish-environment.js';
import { eventually, freePort } from '../test/support/real-gitea/index.js';
import { startRoundRobinRelay } from '../test/support/round-robin-relay.js';
import { scriptedAgent } from '../src/demo/scripted-agent.js';
import { startServiceProcess } from '../test/support/sandbox/service-process.js';
import { writeCodexHome } from '../src/demo/scripted-model.js';
import { machineCpuSeconds, treeCpuSeconds } from './process-cpu.js';

const REPOS = Number(process.env['BENCH_CLUSTER_REPOS'] ?? 8);
const TASKS = Number(process.env['BENCH_CLUSTER_TASKS'] ?? 24);
const DELAY_MS = Number(process.env['BENCH_CLUSTER_DELAY_MS'] ?? 2000);
/**
 * How many times the two rounds compared are run, alternately and in turns first (ABBA…): one round's
 * figure moves by ±10 % with whatever else the machine does, and what builds up over the run (Gitea's
 * issues, its database) weighs on both alike; the ratio printed is the median of the pairs'.
 */
const PAIRS = Number(process.env['BENCH_CLUSTER_PAIRS'] ?? 3);
/** Slots per node (CCWEB_MAX_CONCURRENT_TASKS): one node with all of them (the baseline), three sharing them; and once one node with a third. */
const BASELINE = { nodes: 1, slots: 6 };
const SHARED = { nodes: 3, slots: 2 };
const SMALL = { nodes: 1, slots: 2 };

export interface ClusterTasksRound {
  nodes: number;
  slots: number;
  tasks: number;
  succeeded: number;
  seconds: number;
  perMinute: number;
  /** Which node ran the tasks (its id, from each task's claim), with how many. */
  ranOn: Record<string, number>;
  /** CPU seconds the round used: each node's process tree (with its app-server, gate and git), PostgreSQL's, the whole machine's. */
  cpu: { nodes: number[]; postgres: number; machine: number };
}

interface TaskRow {
  taskId: string;
  state: string;
  instruction: string;
}

async function createRepositories(env: PublishEnvironment, relayUrl: string): Promise<string[]> {
  const names: string[] = [];
  for (let i = 1; i <= REPOS; i++) {
    const name = `bench-${i}`;
    await addRepository(env, name, relayUrl);
    names.push(name);
  }
  return names;
}

/** The tasks of this round (their instructions carry its nonce), as the writer lists them. */
async function roundTasks(api: ReturnType<typeof clusterApi>['api'], base: string, nonce: string): Promise<TaskRow[]> {
  const rows: TaskRow[] = [];
  for (let page = 1; ; page++) {
    const list = await api<{ items: TaskRow[]; total: number }>(base, `/tasks?pageSize=100&page=${page}`);
    rows.push(...list.items.filter((t) => t.instruction.includes(nonce)));
    if (page * 100 >= list.total) return rows;
  }
}

/**
 * Which node ran each task: the owner its repository's lease was last granted to for it (each round
 * has its own database, so its whole audit is the round's; a task claimed again counts once).
 */
async function whereTasksRan(api: ReturnType<typeof clusterApi>['api'], base: string, taskIds: Set<string>): Promise<Record<string, number>> {
  const nodeOf = new Map<string, string>();
  for (let afterSeq = 0; ; ) {
    const { events } = await api<{ events: AuditEvent[] }>(base, `/audit?afterSeq=${afterSeq}&limit=500`);
    for (const e of events) {
      const ev = (e.metadata?.['event'] ?? {}) as { type?: string; owner?: string; taskId?: string };
      if (e.action !== 'lock.transition' || ev.type !== 'ACQUIRE' || !taskIds.has(ev.taskId ?? '')) continue;
      nodeOf.set(ev.taskId!, instanceOfOwner(ev.owner ?? '') ?? 'unknown');
    }
    if (events.length < 500) break;
    afterSeq = events.at(-1)!.seq;
  }
  const ranOn: Record<string, number> = {};
  for (const node of nodeOf.values()) ranOn[node] = (ranOn[node] ?? 0) + 1;
  return ranOn;
}

async function round(env: PublishEnvironment, postgres: ThrowawayPostgres, repos: string[], nodeCount: number, slots: number, root: string, n: number): Promise<ClusterTasksRound> {
  const { api } = clusterApi(() => env);
  const databaseUrl = await postgres.createDatabase(`bench_nodes_${nodeCount}x${slots}_${n}`);
  const dir = join(root, `round-${nodeCount}x${slots}-${n}`);
  const urls: string[] = [];
  for (let i = 0; i < nodeCount; i++) urls.push(`http://127.0.0.1:${await freePort()}`);
  const relay = await startRoundRobinRelay(Number(env.env['CCWEB_PORT']), () => urls);
  const children: ChildProcess[] = [];
  const lines: string[][] = urls.map(() => []);
  try {
    const start = (i: number) => {
      const codexHome = join(dir, `codex-home-${i}`);
      writeCodexHome(codexHome, { port: env.model.port, model: 'fake-model' });
      return startServiceProcess(
        {
          ...env.env,
          CCWEB_PORT: new URL(urls[i]!).port,
          CCWEB_DATA_DIR: join(dir, `node-${i}`),
          CCWEB_DATABASE_URL: databaseUrl,
          CCWEB_NODE_ID: `node-${i}`,
          CCWEB_MAX_CONCURRENT_TASKS: String(slots),
          CODEX_HOME: codexHome,
        },
        { timeoutMs: 600_000, onLine: (l) => void lines[i]!.push(l), onSpawn: (c) => void children.push(c) },
      );
    };
    // Every node at once; the mentions start once each is ready.
    await Promise.all(urls.map((_, i) => start(i)));

    const nonce = randomUUID().slice(0, 8);
    const issues: Array<{ repo: string; index: number }> = [];
    for (let t = 0; t < TASKS; t++) {
      const repo = repos[t % repos.length]!;
      const r = await env.gitea.api<{ number: number }>('alice', 'POST', `/repos/${env.gitea.owner}/${repo}/issues`, { title: `bench task ${t + 1}`, body: '' }, 201);
      issues.push({ repo, index: r.body.number });
    }
    const cpuBefore = { nodes: treeCpuSeconds(children.map((c) => c.pid!)), postgres: treeCpuSeconds([postgres.pid])[0]!, machine: machineCpuSeconds() };
    const started = Date.now();
    for (const [t, issue] of issues.entries()) {
      await env.gitea.api('alice', 'POST', `/repos/${env.gitea.owner}/${issue.repo}/issues/${issue.index}/comments`, { body: `@ccweb-bot summarise the README [${nonce}-${t}]` }, 201);
    }
    let tasks: TaskRow[] = [];
    for (;;) {
      tasks = await roundTasks(api, urls[0]!, nonce).catch(() => tasks);
      if (tasks.length === TASKS && tasks.every((t) => FINAL_STATES.includes(t.state))) break;
      if (Date.now() - started > 20 * 60_000) throw new Error(`round with ${nodeCount} nodes: ${tasks.length} of ${TASKS} tasks, not all ended after 20 min`);
      await new Promise((r) => setTimeout(r, 250));
    }
    const seconds = (Date.now() - started) / 1000;
    const cpu = {
      nodes: treeCpuSeconds(children.map((c) => c.pid!)).map((s, i) => s - cpuBefore.nodes[i]!),
      postgres: treeCpuSeconds([postgres.pid])[0]! - cpuBefore.postgres,
      machine: machineCpuSeconds() - cpuBefore.machine,
    };
    const ranOn = await whereTasksRan(api, urls[0]!, new Set(tasks.map((t) => t.taskId)));
    return { nodes: nodeCount, slots, tasks: TASKS, succeeded: tasks.filter((t) => t.state === 'succeeded').length, seconds, perMinute: (TASKS / seconds) * 60, ranOn, cpu };
  } finally {
    await stopNodes(children);
    await relay.close();
  }
}

/** Prints the table; the PostgreSQL server is the caller's (bench/cluster.ts). */
export async function measureClusterTasks(postgres: ThrowawayPostgres): Promise<ClusterTasksRound[]> {
  const root = mkdtempSync(join(tmpdir(), 'ccweb-bench-cluster-'));
  const env = await startPublishEnvironment(root);
  try {
    const agent = scriptedAgent();
    env.model.setResponder((body) => ({ ...agent(body), delayMs: DELAY_MS }));
    const repos = await createRepositories(env, `http://127.0.0.1:${env.env['CCWEB_PORT']}`);
    console.log(`\ncompleted tasks per minute — ${TASKS} mentions on ${REPOS} repositories, the model answering after ${DELAY_MS} ms`);
    const rounds: ClusterTasksRound[] = [];
    const run = async ({ nodes: n, slots }: { nodes: number; slots: number }): Promise<ClusterTasksRound> => {
      const r = await round(env, postgres, repos, n, slots, root, rounds.length);
      rounds.push(r);
      const where = Object.entries(r.ranOn).map(([node, count]) => `${node} ${count}`).join(', ');
      const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
      console.log(`${`${n} node${n > 1 ? 's' : ''} × ${slots} slots`.padEnd(20)}${r.perMinute.toFixed(1).padStart(7)} tasks/min   ${r.succeeded}/${r.tasks} succeeded in ${r.seconds.toFixed(1)} s   ran on: ${where}   load ${loadavg()[0]!.toFixed(1)}`);
      console.log(`${''.padEnd(20)}CPU s: nodes ${sum(r.cpu.nodes).toFixed(1)} (${r.cpu.nodes.map((x) => x.toFixed(1)).join(' / ')}), PostgreSQL ${r.cpu.postgres.toFixed(1)}, the whole machine ${r.cpu.machine.toFixed(1)} of ${(r.seconds * cpus().length).toFixed(1)}`);
      return r;
    };
    const ratios: number[] = [];
    for (let pair = 0; pair < PAIRS; pair++) {
      const baselineFirst = pair % 2 === 0;
      const earlier = await run(baselineFirst ? BASELINE : SHARED);
      const later = await run(baselineFirst ? SHARED : BASELINE);
      const [one, three] = baselineFirst ? [earlier, later] : [later, earlier];
      ratios.push(three.perMinute / one.perMinute);
    }
    const small = await run(SMALL);
    const baselines = rounds.filter((r) => r.nodes === BASELINE.nodes && r.slots === BASELINE.slots);
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    console.log('\nresults (tasks per minute, same run)');
    console.log(`  coordination: 3 nodes × 2 slots / 1 node × 6 slots   ${median(ratios).toFixed(2)}  (target ≥ 0.90; median of ${PAIRS} pairs run alternately: ${ratios.map((x) => x.toFixed(2)).join(', ')})`);
    console.log(`  slots: 1 node × 6 slots / 1 node × 2 slots           ${(median(baselines.map((r) => r.perMinute)) / small.perMinute).toFixed(2)}`);
    return rounds;
  } finally {
    await env.close();
    rmSync(root, { recursive: true, force: true });
  }
}
