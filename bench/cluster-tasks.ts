// Completed tasks per minute with 1, 2 and 3 nodes on one PostgreSQL, in one run: the
// real service processes (each its own data directory and Codex home) behind a round-robin relay,
// the real Gitea with REPOS repositories whose webhooks go to the relay, the real Codex app-server
// and gitea-mcp, the scripted agent answering every model request after DELAY_MS (a model that takes
// its time; the turn itself is what a node spends its task slots on). Each round starts its nodes on
// a fresh database, posts TASKS mentions (one per issue, spread over the repositories) as fast as
// Gitea takes them, and times the first post to the last task ending. The ratio to one node is what
// a second and a third node add: with one writer and standbys (CCWEB_CLUSTER_MODE=standby, the
// default) and with every node at work on the repositories it owns (CCWEB_CLUSTER_MODE=active).
// BENCH_CLUSTER_MODES=standby or =active runs one kind only.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import type { ChildProcess } from 'node:child_process';
import { loadavg, tmpdir } from 'node:os';
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

const REPOS = Number(process.env['BENCH_CLUSTER_REPOS'] ?? 8);
const TASKS = Number(process.env['BENCH_CLUSTER_TASKS'] ?? 24);
const DELAY_MS = Number(process.env['BENCH_CLUSTER_DELAY_MS'] ?? 2000);
/** Per node (CCWEB_MAX_CONCURRENT_TASKS): small, so that one node's slots are the limit. */
const SLOTS = Number(process.env['BENCH_CLUSTER_SLOTS'] ?? 2);
const MODES = (process.env['BENCH_CLUSTER_MODES'] ?? 'standby,active').split(',').map((m) => m.trim()) as Array<'standby' | 'active'>;
/** One node (the baseline; the two modes are the same there), then 2 and 3 nodes in each mode. */
const ROUNDS: Array<{ nodes: number; mode: 'standby' | 'active' }> = [{ nodes: 1, mode: 'standby' }, ...MODES.flatMap((mode) => [2, 3].map((nodes) => ({ nodes, mode })))];

export interface ClusterTasksRound {
  nodes: number;
  mode: 'standby' | 'active';
  tasks: number;
  succeeded: number;
  seconds: number;
  perMinute: number;
  /** Which node ran the tasks (its id, from each task's claim), with how many. */
  ranOn: Record<string, number>;
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

async function round(env: PublishEnvironment, postgres: ThrowawayPostgres, repos: string[], nodeCount: number, mode: 'standby' | 'active', root: string): Promise<ClusterTasksRound> {
  const { api } = clusterApi(() => env);
  const databaseUrl = await postgres.createDatabase(`bench_nodes_${mode}_${nodeCount}`);
  const dir = join(root, `round-${mode}-${nodeCount}`);
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
          CCWEB_CLUSTER_MODE: mode,
          CCWEB_DATABASE_URL: databaseUrl,
          CCWEB_NODE_ID: `node-${i}`,
          CCWEB_MAX_CONCURRENT_TASKS: String(SLOTS),
          CODEX_HOME: codexHome,
        },
        { timeoutMs: 600_000, onLine: (l) => void lines[i]!.push(l), onSpawn: (c) => void children.push(c) },
      );
    };
    if (mode === 'active') {
      // Every node at once; the mentions start once each sees all the others (repositories go to the live nodes).
      await Promise.all(urls.map((_, i) => start(i)));
      for (const url of urls) {
        await eventually(`${url} to see ${nodeCount} nodes`, async () => {
          const o = await api<{ nodes: Array<{ stale: boolean; role: string }> }>(url, '/overview');
          if (o.nodes.filter((x) => !x.stale && x.role !== 'stopped').length !== nodeCount) throw new Error('not yet');
        }, 120_000);
      }
    } else await start(0);
    for (let i = 1; i < nodeCount && mode === 'standby'; i++) {
      start(i).catch(() => undefined);
      await eventually(`node-${i} to listen`, async () => {
        if (!lines[i]!.some((l) => /standby listening|ccweb-gitea listening/.test(l))) throw new Error('not yet');
      }, 120_000);
    }

    const nonce = randomUUID().slice(0, 8);
    const issues: Array<{ repo: string; index: number }> = [];
    for (let t = 0; t < TASKS; t++) {
      const repo = repos[t % repos.length]!;
      const r = await env.gitea.api<{ number: number }>('alice', 'POST', `/repos/${env.gitea.owner}/${repo}/issues`, { title: `bench task ${t + 1}`, body: '' }, 201);
      issues.push({ repo, index: r.body.number });
    }
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
    const ranOn = await whereTasksRan(api, urls[0]!, new Set(tasks.map((t) => t.taskId)));
    return { nodes: nodeCount, mode, tasks: TASKS, succeeded: tasks.filter((t) => t.state === 'succeeded').length, seconds, perMinute: (TASKS / seconds) * 60, ranOn };
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
    console.log(`\ncompleted tasks per minute — ${TASKS} mentions on ${REPOS} repositories, the model answering after ${DELAY_MS} ms, ${SLOTS} task slots per node`);
    const rounds: ClusterTasksRound[] = [];
    for (const { nodes: n, mode } of ROUNDS) {
      const r = await round(env, postgres, repos, n, mode, root);
      rounds.push(r);
      const where = Object.entries(r.ranOn).map(([node, count]) => `${node} ${count}`).join(', ');
      console.log(`${`${n} node${n > 1 ? `s, ${mode}` : ''}`.padEnd(18)}${r.perMinute.toFixed(1).padStart(7)} tasks/min   ${r.succeeded}/${r.tasks} succeeded in ${r.seconds.toFixed(1)} s   ran on: ${where}   load ${loadavg()[0]!.toFixed(1)}`);
    }
    const base = rounds[0]!.perMinute;
    console.log('\nresults (tasks per minute / one node, same run)');
    for (const r of rounds.slice(1)) console.log(`  ${`${r.nodes} nodes, ${r.mode}`.padEnd(30)} ${(r.perMinute / base).toFixed(2)}`);
    return rounds;
  } finally {
    await env.close();
    rmSync(root, { recursive: true, force: true });
  }
}
