// Three nodes alike on one PostgreSQL, and the node running a turn cut off from the database mid-turn:
// each node reaches PostgreSQL through its own userspace TCP relay (test/support/postgres-relay.ts, the
// one double here: a partition on demand), with a real Gitea 1.26 behind a round-robin relay, the real
// gitea-mcp and the real Codex app-server with the scripted agent. The runner's link is
//   (a) cut (connections reset, new ones refused) and left cut: another node takes the task over once the
//       lease expired on the database's clock and answers; the cut-off node exits 75 at
//       CCWEB_DATABASE_OUTAGE_SECONDS (it is then started again, as its supervisor would);
//   (b) held half-open (nothing passes, nothing is closed) and healed before that limit: the same
//       takeover, and the cut-off node rides the outage out and serves again.
// Either way one receipt and one answer on Gitea, the cut-off node's agent posts nothing, the webhooks
// sent to the healthy nodes meanwhile are accepted and answered, and the history check over the audit
// (test/support/history-check.ts) finds no two runs of a repository under overlapping leases.
//
// In test/cluster/: CI runs it on Node 24 only, like the others.
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STORE_INDEXES, type TaskRecord } from '../../src/domain/records.js';
import { instanceOfOwner } from '../../src/leases/lease-owner.js';
import { createStore } from '../../src/store/index.js';
import { writeCodexHome } from '../../src/demo/scripted-model.js';
import { clusterApi, FINAL_STATES as FINAL, present, type TaskDetail } from '../support/cluster-api.js';
import { addRepository, stopNodes } from '../support/cluster-nodes.js';
import { checkComments, checkHistory } from '../support/history-check.js';
import { startPostgresRelay, type PostgresRelay, type RelayMode } from '../support/postgres-relay.js';
import { startPublishEnvironment, type PublishEnvironment } from '../support/publish-environment.js';
import { startThrowawayPostgres, type ThrowawayPostgres } from '../support/postgres-server.js';
import { eventually, freePort } from '../support/real-gitea/index.js';
import { startRoundRobinRelay, type RoundRobinRelay } from '../support/round-robin-relay.js';
import { startServiceProcess } from '../support/sandbox/service-process.js';
import { waitForTaskState } from '../support/wait-for-task.js';

const NAMES = ['a', 'b', 'c'] as const;
type Name = (typeof NAMES)[number];
const NODE_IDS = NAMES.map((n) => `node-${n}`);
const LEASE_TTL_MS = 6_000;
const OUTAGE_SECONDS = 20;
const root = mkdtempSync(join(tmpdir(), 'ccweb-partition-'));
let env: PublishEnvironment;
let postgres: ThrowawayPostgres;
let databaseUrl: string;
let relay: RoundRobinRelay;
const links = {} as Record<Name, PostgresRelay>;
const urls = {} as Record<Name, string>;
/** The running process of each node: its child, its output, and its exit (code or signal). */
const nodes = {} as Record<Name, { child: ChildProcess; lines: string[]; exited: Promise<number | string>; exitedAt: number | null }>;
const children: ChildProcess[] = [];
const repos = { partitioned: ['', 'partition-b'], healthy: 'healthy' };
/** The tasks whose runner was cut off. */
const partitionedTasks: string[] = [];

const { api, taskFor } = clusterApi(() => env);
const repoKeyOf = (name: string) => `default:${env.gitea.owner}/${name}`;
const nameOf = (nodeId: string | null) => NAMES[NODE_IDS.indexOf(nodeId ?? '')];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function comment(repo: string, index: number, body: string): Promise<void> {
  await env.gitea.api('alice', 'POST', `/repos/${env.gitea.owner}/${repo}/issues/${index}/comments`, { body }, 201);
}
async function createIssue(repo: string, title: string): Promise<number> {
  return (await env.gitea.api<{ number: number }>('alice', 'POST', `/repos/${env.gitea.owner}/${repo}/issues`, { title, body: '' }, 201)).body.number;
}
async function commentsOn(repo: string, index: number): Promise<Array<{ user: string; body: string }>> {
  const r = await env.gitea.api<Array<{ user: { login: string }; body: string }>>(env.gitea.owner, 'GET', `/repos/${env.gitea.owner}/${repo}/issues/${index}/comments`);
  return r.body.map((c) => ({ user: c.user.login, body: c.body }));
}
const botComments = async (repo: string, index: number) => (await commentsOn(repo, index)).filter((c) => c.user === 'ccweb-bot');

/** The node whose lease ran the task: the lease owner its repository's lock last granted for it. */
async function ranOn(repo: string, taskId: string, base: string): Promise<string | null> {
  const { events } = await api<{ events: Array<{ action: string; metadata?: { event?: { type?: string; owner?: string; taskId?: string } } }> }>(base, `/audit?actorId=${encodeURIComponent(`lock:${repoKeyOf(repo)}`)}&limit=500`);
  const acquire = events.filter((e) => e.action === 'lock.transition' && e.metadata?.event?.type === 'ACQUIRE' && e.metadata.event.taskId === taskId).at(-1);
  return instanceOfOwner(acquire?.metadata?.event?.owner ?? '');
}

async function startNode(n: Name): Promise<void> {
  const codexHome = join(root, `codex-home-${n}`);
  writeCodexHome(codexHome, { port: env.model.port, model: 'fake-model' });
  const lines: string[] = [];
  let exited!: (how: number | string) => void;
  const exit = new Promise<number | string>((r) => (exited = r));
  const node = { child: null as unknown as ChildProcess, lines, exited: exit, exitedAt: null as number | null };
  const s = await startServiceProcess(
    {
      ...env.env,
      CCWEB_PORT: new URL(urls[n]).port,
      CCWEB_DATA_DIR: join(root, `node-${n}`),
      CCWEB_DATABASE_URL: links[n].url,
      CCWEB_NODE_ID: `node-${n}`,
      CCWEB_NODE_HEARTBEAT_SECONDS: '1',
      // Renewed every 2 s; a cut-off runner's lease is free for another node 6 s after its last renewal.
      CCWEB_LEASE_TTL_MS: String(LEASE_TTL_MS),
      CCWEB_DATABASE_OUTAGE_SECONDS: String(OUTAGE_SECONDS),
      CODEX_HOME: codexHome,
    },
    {
      ownProcessGroup: true,
      timeoutMs: 120_000,
      onLine: (l) => void lines.push(l),
      onSpawn: (c) => {
        children.push(c);
        c.once('exit', (code, signal) => {
          node.exitedAt = Date.now();
          exited(code ?? signal ?? 'unknown');
        });
      },
    },
  );
  node.child = s.child;
  nodes[n] = node;
}

beforeAll(async () => {
  env = await startPublishEnvironment(root);
  postgres = await startThrowawayPostgres({ parentDir: root });
  databaseUrl = await postgres.createDatabase('ccweb');
  for (const n of NAMES) {
    urls[n] = `http://127.0.0.1:${await freePort()}`;
    links[n] = await startPostgresRelay(databaseUrl);
  }
  relay = await startRoundRobinRelay(Number(env.env['CCWEB_PORT']), () => NAMES.map((n) => urls[n]));
  repos.partitioned[0] = env.gitea.repo;
  for (const name of [repos.partitioned[1]!, repos.healthy]) await addRepository(env, name, relay.url);
  await Promise.all(NAMES.map((n) => startNode(n)));
  for (const n of NAMES) {
    await eventually(`node ${n} to see the three nodes`, present(async () => {
      const o = await api<{ nodes: Array<{ nodeId: string; stale: boolean }> }>(urls[n], '/overview');
      return o.nodes.filter((x) => !x.stale).length === 3 ? o : undefined;
    }), 60_000);
  }
}, 300_000);

afterAll(async () => {
  for (const n of NAMES) links[n]?.setMode('pass');
  await stopNodes(children);
  await relay?.close();
  for (const n of NAMES) await links[n]?.close();
  await postgres?.stop();
  await env?.close();
  rmSync(root, { recursive: true, force: true });
});

/**
 * A mention whose turn runs 20 s before it answers (`answer-late`; a retry answers at once); once it runs,
 * the runner's link to PostgreSQL goes `mode`. Meanwhile a mention on another repository is sent to each
 * healthy node. Returns what the case's checks need.
 */
async function partitionMidTurn(repo: string, mode: RelayMode, healAfterMs?: number) {
  const issue = await createIssue(repo, `A node cut off from PostgreSQL (${mode})`);
  const nonce = randomUUID().slice(0, 8);
  await comment(repo, issue, `@ccweb-bot please answer-late [${nonce}]`);
  const taskId = await taskFor(urls.a, nonce);
  await waitForTaskState((path) => api<TaskDetail>(urls.a, path), taskId, ['running'], 120_000);
  const cut = nameOf(await ranOn(repo, taskId, urls.a))!;
  partitionedTasks.push(taskId);
  const healthy = NAMES.filter((n) => n !== cut);
  links[cut].setMode(mode);
  const cutAt = Date.now();
  let healedAt: number | null = null;
  const heal = healAfterMs === undefined ? null : setTimeout(() => {
    links[cut].setMode('pass');
    healedAt = Date.now();
  }, healAfterMs);

  // Webhooks sent to the healthy nodes while the runner is cut off: accepted, run and answered.
  const meanwhile: Array<{ issue: number; nonce: string; to: Name }> = [];
  for (const to of healthy) {
    const i = await createIssue(repos.healthy, `Meanwhile, through node ${to} (${mode})`);
    const n = randomUUID().slice(0, 8);
    relay.sendNextTo(NAMES.indexOf(to), n);
    await comment(repos.healthy, i, `@ccweb-bot please summarise the README [${n}]`);
    meanwhile.push({ issue: i, nonce: n, to });
  }

  // Another node takes the task over (after the lease expired on the database's clock) and answers.
  const d = await waitForTaskState((path) => api<TaskDetail>(urls[healthy[0]!], path), taskId, FINAL, 120_000);
  expect(d.task.state, `${d.task.errorCode}: ${d.audit.map((e) => e.toState ?? e.action).join(' > ')}`).toBe('succeeded');
  const tookOver = await ranOn(repo, taskId, urls[healthy[0]!]);
  expect(healthy.map((n) => `node-${n}`), 'the node that ran the task in the end').toContain(tookOver);
  const takenOverAfterMs = Date.now() - cutAt;
  // The cut-off node stopped the turn itself, by its own clock, before the lease's expiry.
  expect(nodes[cut].lines.some((l) => l.includes('lease not renewed before its expiry: stopping the turn') && l.includes(taskId)), `node ${cut} stopping the turn`).toBe(true);

  for (const m of meanwhile) {
    const uuid = relay.pinnedDeliveries.get(m.nonce)!;
    expect(relay.statuses.get(uuid), `the delivery of [${m.nonce}] to node ${m.to}`).toBe(202);
    expect(relay.handledBy.get(uuid)).toBe(`node-${m.to}`);
    const id = await taskFor(urls[m.to], m.nonce);
    const md = await waitForTaskState((path) => api<TaskDetail>(urls[m.to], path), id, FINAL, 120_000);
    expect(md.task.state, `the task for [${m.nonce}]`).toBe('succeeded');
    await eventually(`receipt and answer of [${m.nonce}]`, present(async () => ((await botComments(repos.healthy, m.issue)).length >= 2 ? true : undefined)), 30_000);
  }
  if (heal) await sleep(Math.max(0, cutAt + healAfterMs! - Date.now() + 100));
  await timeline(healthy[0]!, taskId, cutAt);
  return { issue, nonce, taskId, cut, healthy, cutAt, takenOverAfterMs, meanwhile, healedAfterMs: healedAt === null ? null : healedAt - cutAt };
}

/** Prints the task's audit (and its repository's leases) in time from the cut: what the report's figures come from. */
async function timeline(base: Name, taskId: string, cutAt: number): Promise<void> {
  const { events } = await api<{ events: Array<{ action: string; timestamp: string; toState?: string | null; metadata?: Record<string, unknown> }> }>(urls[base], `/audit?taskId=${taskId}&limit=500`);
  const rel = (iso: unknown) => `${((Date.parse(String(iso)) - cutAt) / 1000).toFixed(1)} s`;
  console.log(
    events
      .filter((e) => e.action === 'task.transition' || e.action.startsWith('lease.') || e.action.startsWith('agent.'))
      .map((e) => `  ${rel(e.timestamp)} ${e.action}${e.toState ? ` > ${e.toState}` : ''}${e.metadata?.['epoch'] ? ` epoch ${String(e.metadata['epoch'])}` : ''}${e.metadata?.['endedAt'] ? ` ended ${rel(e.metadata['endedAt'])} (db)` : ''}${e.metadata?.['grantedAt'] ? ` granted ${rel(e.metadata['grantedAt'])} (db)` : ''}`)
      .join('\n'),
  );
}

/** One receipt and one answer for the task on its issue (history-check's rule), after the cut-off node's agent had its 20 s and more. */
async function expectOneReceiptOneAnswer(repo: string, issue: number, taskId: string, cutAt: number): Promise<void> {
  await sleep(Math.max(0, cutAt + 30_000 - Date.now()));
  const on = await commentsOn(repo, issue);
  const found = checkComments([{ taskId, state: 'succeeded' }], () => on, 'ccweb-bot');
  const mine = on.filter((c) => c.user === 'ccweb-bot');
  expect({ receipts: found.receiptProblems, answers: found.answerProblems }, `bot comments on ${repo}#${issue}: ${mine.map((c) => c.body.slice(0, 80)).join(' | ')}`).toEqual({ receipts: [], answers: [] });
  expect(mine).toHaveLength(2);
}

describe('a node cut off from PostgreSQL during its turn, three nodes on one URL [real gitea-mcp]', () => {
  it(`(a) cut and left cut: another node answers once; the cut-off node exits 75 after ${OUTAGE_SECONDS} s, and is started again`, async () => {
    const r = await partitionMidTurn(repos.partitioned[0]!, 'cut');
    try {
      const exit = await Promise.race([nodes[r.cut].exited, sleep((OUTAGE_SECONDS + 30) * 1000).then(() => 'still running')]);
      expect(exit, `node ${r.cut}'s exit:\n${nodes[r.cut].lines.slice(-10).join('\n')}`).toBe(75);
      const exitedAfterS = (nodes[r.cut].exitedAt! - r.cutAt) / 1000;
      expect(nodes[r.cut].lines.some((l) => l.includes('the database did not answer for'))).toBe(true);
      await expectOneReceiptOneAnswer(repos.partitioned[0]!, r.issue, r.taskId, r.cutAt);
      console.log(`partition (cut): taken over and answered ${(r.takenOverAfterMs / 1000).toFixed(1)} s after the cut; node ${r.cut} exited 75 ${exitedAfterS.toFixed(1)} s after it`);
    } finally {
      // Its supervisor starts it again once the database is back.
      links[r.cut].setMode('pass');
      if (nodes[r.cut].child.exitCode === null) process.kill(-nodes[r.cut].child.pid!, 'SIGKILL');
      await nodes[r.cut].exited;
      await startNode(r.cut);
    }
  }, 240_000);

  it(`(b) half-open, healed before ${OUTAGE_SECONDS} s: another node answers once; the cut-off node rides it out and serves again`, async () => {
    // Healed well before the outage limit, while the takeover's turn still runs: what the cut-off node
    // sent meanwhile (its lease loss, decided by its own clock) reaches the database only now.
    const r = await partitionMidTurn(repos.partitioned[1]!, 'half-open', 9_000);
    const healedAfterS = r.healedAfterMs! / 1000;
    await expectOneReceiptOneAnswer(repos.partitioned[1]!, r.issue, r.taskId, r.cutAt);
    const stillRunning = await Promise.race([nodes[r.cut].exited, sleep(1_000).then(() => 'running')]);
    expect(stillRunning, `node ${r.cut}:\n${nodes[r.cut].lines.slice(-10).join('\n')}`).toBe('running');
    // And it serves again: a mention sent to it is accepted and answered.
    const issue = await createIssue(repos.healthy, `After the partition, through node ${r.cut}`);
    const nonce = randomUUID().slice(0, 8);
    relay.sendNextTo(NAMES.indexOf(r.cut), nonce);
    await comment(repos.healthy, issue, `@ccweb-bot please summarise the README [${nonce}]`);
    const id = await taskFor(urls[r.cut], nonce);
    expect((await waitForTaskState((path) => api<TaskDetail>(urls[r.cut], path), id, FINAL, 120_000)).task.state).toBe('succeeded');
    expect(relay.handledBy.get(relay.pinnedDeliveries.get(nonce)!)).toBe(`node-${r.cut}`);
    console.log(`partition (half-open): taken over and answered ${(r.takenOverAfterMs / 1000).toFixed(1)} s after the cut; healed after ${healedAfterS.toFixed(1)} s; node ${r.cut} rode it out`);
  }, 240_000);

  it('the history over the audit: no repository ran two tasks under overlapping leases (database clock); every accepted comment answered once', async () => {
    const store = createStore({ url: databaseUrl, indexes: STORE_INDEXES });
    await store.open();
    const tasks = (await store.list<TaskRecord>('tasks')).map((t) => ({ ...t }));
    const events = await store.audit();
    await store.close();
    const byIssue = new Map<string, Array<{ user: string; body: string }>>();
    for (const t of tasks) {
      const key = `${t.repo}#${t.resource.number}`;
      if (!byIssue.has(key)) byIssue.set(key, await commentsOn(t.repo, t.resource.number));
    }
    const byId = new Map(tasks.map((t) => [t.taskId, t]));
    const history = checkHistory({ events, tasks, commentsOn: ({ taskId }) => byIssue.get(`${byId.get(taskId)!.repo}#${byId.get(taskId)!.resource.number}`) ?? [], botLogin: 'ccweb-bot' });
    console.log(history.lines.join('\n'));
    expect(history.problems).toEqual([]);
    // Each partitioned task ran twice (the cut-off run, then the takeover), the first lease over on the
    // database's clock before the second was granted.
    expect(partitionedTasks).toHaveLength(2);
    for (const id of partitionedTasks) {
      const spans = history.leases.runSpans.filter((r) => r.taskId === id).map((r) => r.span);
      expect(spans, `the runs of ${id}`).toHaveLength(2);
      expect(spans[1]!.epoch).toBeGreaterThan(spans[0]!.epoch);
      expect(spans[0]!.until).not.toBeNull();
      expect(spans[0]!.until!).toBeLessThanOrEqual(spans[1]!.from);
    }
    expect(history.comments.answers).toBe(tasks.filter((t) => t.state.startsWith('succeeded')).length);
  }, 60_000);
});
