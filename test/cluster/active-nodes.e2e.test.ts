// Three nodes, every one alike, end to end: three real service processes with their own data
// directories and Codex homes on one real PostgreSQL, a REAL Gitea 1.26 with four repositories whose
// webhooks go through a round-robin relay (the load balancer), the real Codex app-server with the
// scripted agent, the real gitea-mcp. Any node accepts any webhook and runs any repository's tasks;
// the database's lease row lets one run at a time per repository. Mentions on every repository sent to
// different nodes, a Replay sent to a third node, a `stop` and an operator's abort through a node that
// does not run the turn (the database tells the one that does); then the node that ran a repository's
// task is killed with SIGKILL, and a follow-up there is answered once by another.
//
// In test/cluster/: CI runs it on Node 24 only, like test/chaos.
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { instanceOfOwner } from '../../src/leases/lease-owner.js';
import { clusterApi, FINAL_STATES as FINAL, present, type TaskDetail } from '../support/cluster-api.js';
import { addRepository, stopNodes } from '../support/cluster-nodes.js';
import { startPublishEnvironment, type PublishEnvironment } from '../support/publish-environment.js';
import { startThrowawayPostgres, type ThrowawayPostgres } from '../support/postgres-server.js';
import { eventually, freePort } from '../support/real-gitea/index.js';
import { startRoundRobinRelay, type RoundRobinRelay } from '../support/round-robin-relay.js';
import { startServiceProcess, type ServiceProcess } from '../support/sandbox/service-process.js';
import { writeCodexHome } from '../../src/demo/scripted-model.js';
import { waitForTaskState } from '../support/wait-for-task.js';

const NAMES = ['a', 'b', 'c'] as const;
type Name = (typeof NAMES)[number];
const NODE_IDS = NAMES.map((n) => `node-${n}`);
const root = mkdtempSync(join(tmpdir(), 'ccweb-active-'));
let env: PublishEnvironment;
let postgres: ThrowawayPostgres;
let relay: RoundRobinRelay;
const urls = {} as Record<Name, string>;
const procs = {} as Partial<Record<Name, ServiceProcess>>;
const children: ChildProcess[] = [];
/** The repositories (the seeded one first). */
const repos: Array<{ name: string }> = [];

const { api, taskFor } = clusterApi(() => env);
const repoKeyOf = (name: string) => `default:${env.gitea.owner}/${name}`;
const nameOf = (nodeId: string | null) => NAMES[NODE_IDS.indexOf(nodeId ?? '')];
const another = (than: Name, skip: Name[] = []) => NAMES.find((n) => n !== than && !skip.includes(n))!;

async function comment(repo: string, index: number, body: string): Promise<void> {
  await env.gitea.api('alice', 'POST', `/repos/${env.gitea.owner}/${repo}/issues/${index}/comments`, { body }, 201);
}
async function createIssue(repo: string, title: string): Promise<number> {
  return (await env.gitea.api<{ number: number }>('alice', 'POST', `/repos/${env.gitea.owner}/${repo}/issues`, { title, body: '' }, 201)).body.number;
}
async function botComments(repo: string, index: number): Promise<string[]> {
  const r = await env.gitea.api<Array<{ user: { login: string }; body: string }>>(env.gitea.owner, 'GET', `/repos/${env.gitea.owner}/${repo}/issues/${index}/comments`);
  return r.body.filter((c) => c.user.login === 'ccweb-bot').map((c) => c.body);
}
/** The node whose lease ran the task: the lease owner its repository's lock last granted for it. */
async function ranOn(repo: string, taskId: string, base: string): Promise<string | null> {
  const actorId = encodeURIComponent(`lock:${repoKeyOf(repo)}`);
  const { events } = await api<{ events: Array<{ action: string; metadata?: { event?: { type?: string; owner?: string; taskId?: string } } }> }>(base, `/audit?actorId=${actorId}&limit=500`);
  const acquire = events.filter((e) => e.action === 'lock.transition' && e.metadata?.event?.type === 'ACQUIRE' && e.metadata.event.taskId === taskId).at(-1);
  return instanceOfOwner(acquire?.metadata?.event?.owner ?? '');
}

/**
 * Collects the `transition` events of a node's live stream until `stop()`, opened as the admin page
 * opens it: with a one-use ticket, here issued by another node (`ticketFrom`) as a load balancer may do.
 */
async function liveTransitions(base: string, ticketFrom: string): Promise<{ seen: Array<{ taskId: string | null; kind: string; to: string }>; stop(): void }> {
  const seen: Array<{ taskId: string | null; kind: string; to: string }> = [];
  const abort = new AbortController();
  const issued = await fetch(`${ticketFrom}/api/gitea-workflow/events/ticket`, { method: 'POST', headers: { Authorization: `Bearer ${env.adminToken}` } });
  const { ticket } = (await issued.json()) as { ticket: string };
  const res = await fetch(`${base}/api/gitea-workflow/events?ticket=${encodeURIComponent(ticket)}`, { signal: abort.signal });
  expect(res.status, 'a stream opened with a ticket another node issued').toBe(200);
  void (async () => {
    const decoder = new TextDecoder();
    let buffer = '';
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      buffer += decoder.decode(chunk, { stream: true });
      let end: number;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const frame = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = frame.split('\n').find((l) => l.startsWith('data: '));
        if (frame.includes('event: transition') && data) seen.push(JSON.parse(data.slice(6)) as { taskId: string | null; kind: string; to: string });
      }
    }
  })().catch(() => undefined);
  return { seen, stop: () => abort.abort() };
}

function startNode(n: Name, databaseUrl: string): Promise<ServiceProcess> {
  const codexHome = join(root, `codex-home-${n}`);
  writeCodexHome(codexHome, { port: env.model.port, model: 'fake-model' });
  const p = startServiceProcess(
    {
      ...env.env,
      CCWEB_PORT: new URL(urls[n]).port,
      CCWEB_DATA_DIR: join(root, `node-${n}`),
      CCWEB_DATABASE_URL: databaseUrl,
      CCWEB_NODE_ID: `node-${n}`,
      // A killed node's id is free after 3 heartbeats (3 s), its leases end after their TTL.
      CCWEB_NODE_HEARTBEAT_SECONDS: '1',
      CCWEB_LEASE_TTL_MS: '15000',
      CODEX_HOME: codexHome,
    },
    { ownProcessGroup: true, timeoutMs: 300_000, onSpawn: (c) => void children.push(c) },
  );
  p.then((s) => (procs[n] = s)).catch(() => undefined);
  return p;
}

beforeAll(async () => {
  env = await startPublishEnvironment(root);
  postgres = await startThrowawayPostgres({ parentDir: root });
  const databaseUrl = await postgres.createDatabase('ccweb');
  for (const n of NAMES) urls[n] = `http://127.0.0.1:${await freePort()}`;
  relay = await startRoundRobinRelay(Number(env.env['CCWEB_PORT']), () => NAMES.map((n) => urls[n]));
  repos.push({ name: env.gitea.repo }, { name: 'spread-0' }, { name: 'spread-1' }, { name: 'spread-2' });
  for (const { name } of repos.slice(1)) await addRepository(env, name, relay.url);
  // All three at once: nobody waits for anybody.
  await Promise.all(NAMES.map((n) => startNode(n, databaseUrl)));
  for (const n of NAMES) {
    await eventually(`node ${n} to see the three nodes`, present(async () => {
      const o = await api<{ nodes: Array<{ nodeId: string; stale: boolean }> }>(urls[n], '/overview');
      return o.nodes.filter((x) => !x.stale).length === 3 ? o : undefined;
    }), 60_000);
  }
}, 400_000);

afterAll(async () => {
  await stopNodes(children);
  await relay?.close();
  await postgres?.stop();
  await env?.close();
  rmSync(root, { recursive: true, force: true });
});

describe('three nodes alike on one PostgreSQL, one URL [real gitea-mcp]', () => {
  /** The first repository's mention: its issue and nonce, for the Replay and the follow-up. */
  const first = { repo: '', issue: 0, nonce: '' };

  it('every node serves its own overview, all three writing', async () => {
    for (const n of NAMES) {
      const o = await api<{ nodes: Array<{ nodeId: string; role: string; self: boolean }> }>(urls[n], '/overview');
      expect(o.nodes.find((x) => x.self)?.nodeId).toBe(`node-${n}`);
      expect(o.nodes.map((x) => x.role)).toEqual(['writer', 'writer', 'writer']);
    }
  });

  it('a mention on each repository, delivered to different nodes, is run by one node and answered once; every live view shows every task', async () => {
    const sent: Array<{ repo: string; issue: number; nonce: string; to: Name }> = [];
    // Node a's live view, to see the other nodes' work in it.
    const live = await liveTransitions(urls.a, urls.b);
    for (const [i, { name }] of repos.entries()) {
      const issue = await createIssue(name, `Nodes alike: ${name}`);
      const nonce = randomUUID().slice(0, 8);
      const to = NAMES[i % NAMES.length]!;
      relay.sendNextTo(NAMES.indexOf(to), nonce);
      await comment(name, issue, `@ccweb-bot please summarise the README [${nonce}]`);
      sent.push({ repo: name, issue, nonce, to });
    }
    Object.assign(first, { repo: sent[0]!.repo, issue: sent[0]!.issue, nonce: sent[0]!.nonce });
    const ran = new Set<string>();
    for (const s of sent) {
      const taskId = await taskFor(urls[s.to], s.nonce);
      const d = await waitForTaskState((path) => api<TaskDetail>(urls[s.to], path), taskId, FINAL, 180_000);
      expect(d.task.state, `the task for [${s.nonce}] on ${s.repo}`).toBe('succeeded');
      const node = await ranOn(s.repo, taskId, urls[s.to]);
      expect(NODE_IDS, `where ${s.repo}'s task ran`).toContain(node);
      ran.add(node!);
      await eventually(`receipt and answer on ${s.repo}#${s.issue}`, present(async () => ((await botComments(s.repo, s.issue)).length >= 2 ? true : undefined)), 30_000);
      expect(await botComments(s.repo, s.issue)).toHaveLength(2);
    }
    // The work was spread: a node claims what it accepted at once, so every node ran some.
    expect(ran.size).toBe(3);
    // And node a's live events showed every task's end, the ones other nodes ran too.
    const ids = await Promise.all(sent.map((s) => taskFor(urls.a, s.nonce)));
    await eventually("node a's live view to show every task ending", present(async () => (ids.every((id) => live.seen.some((t) => t.taskId === id && t.kind === 'task' && t.to === 'succeeded')) ? true : undefined)), 15_000);
    live.stop();
    // Each mention's delivery was handled by the node it was sent to: nothing is forwarded.
    for (const s of sent) {
      const uuid = relay.pinnedDeliveries.get(s.nonce)!;
      expect(uuid, `the delivery of [${s.nonce}]`).toBeDefined();
      expect(relay.statuses.get(uuid)).toBe(202);
      expect(relay.deliveries.get(uuid), `the node [${s.nonce}] was sent to`).toBe(NAMES.indexOf(s.to));
      expect(relay.handledBy.get(uuid), `the node that handled [${s.nonce}]`).toBe(`node-${s.to}`);
    }
  });

  it("Gitea's Replay of a mention, sent to yet another node, is a duplicate", async () => {
    const deliveries = await env.gitea.deliveries(env.hookId);
    const original = deliveries.find((x) => x.payload.includes(first.nonce) && relay.deliveries.has(x.uuid))!;
    const sentTo = NAMES[relay.deliveries.get(original.uuid)!]!;
    const other = NAMES.indexOf(another(sentTo));
    relay.sendNextTo(other, first.nonce);
    await env.gitea.replay(env.hookId, original.uuid);
    const replayed = await env.gitea.waitForDelivery(env.hookId, (x) => x.uuid !== original.uuid && x.payload === original.payload);
    expect(relay.deliveries.get(replayed.uuid)).toBe(other);
    expect(replayed.status).toBe(200);
    expect(JSON.parse(replayed.responseBody)).toMatchObject({ status: 'duplicate' });
    expect(relay.handledBy.get(replayed.uuid)).toBe(`node-${NAMES[other]}`);
  });

  it('"@ccweb-bot stop" delivered to a node that does not run the turn aborts it on the node that does', async () => {
    const { name } = repos[1]!;
    const issue = await createIssue(name, 'Stop through another node');
    const nonce = randomUUID().slice(0, 8);
    await comment(name, issue, `@ccweb-bot please take your time (slow) [${nonce}]`);
    const taskId = await taskFor(urls.a, nonce);
    await waitForTaskState((path) => api<TaskDetail>(urls.a, path), taskId, ['running'], 120_000);
    const runner = nameOf(await ranOn(name, taskId, urls.a))!;
    const stopNonce = randomUUID().slice(0, 8);
    const to = another(runner);
    relay.sendNextTo(NAMES.indexOf(to), stopNonce);
    await comment(name, issue, `@ccweb-bot stop\n\n<!-- [${stopNonce}] -->`);
    const d = await waitForTaskState((path) => api<TaskDetail>(urls[to], path), taskId, FINAL, 120_000);
    expect(d.task.state, `${d.task.errorCode}: ${d.audit.map((e) => e.toState ?? e.action).join(' > ')}`).toBe('aborted');
    expect(relay.handledBy.get(relay.pinnedDeliveries.get(stopNonce)!), 'the node that handled the stop').toBe(`node-${to}`);
  });

  it("an operator's abort through another node's API reaches the turn on the node running it", async () => {
    const { name } = repos[2]!;
    const issue = await createIssue(name, 'Abort through another node');
    const nonce = randomUUID().slice(0, 8);
    await comment(name, issue, `@ccweb-bot please take your time (slow) [${nonce}]`);
    const taskId = await taskFor(urls.a, nonce);
    await waitForTaskState((path) => api<TaskDetail>(urls.a, path), taskId, ['running'], 120_000);
    const runner = nameOf(await ranOn(name, taskId, urls.a))!;
    const to = another(runner);
    await api(urls[to], `/tasks/${taskId}/abort`, { method: 'POST', body: { requestId: randomUUID(), operator: 'ops', reason: `through node ${to}` } });
    const d = await waitForTaskState((path) => api<TaskDetail>(urls[to], path), taskId, FINAL, 120_000);
    expect(d.task.state, `${d.task.errorCode}: ${d.audit.map((e) => e.toState ?? e.action).join(' > ')}`).toBe('aborted');
    expect(await ranOn(name, taskId, urls[to])).toBe(`node-${runner}`);
  });

  it('a node stopped (SIGSTOP) past its lease mid-turn: another node runs the task and answers; the stopped node\'s agent, still running, cannot answer too', async () => {
    const { name } = repos[3]!;
    const issue = await createIssue(name, 'A node paused past its lease');
    const nonce = randomUUID().slice(0, 8);
    await comment(name, issue, `@ccweb-bot please answer-late [${nonce}]`);
    const taskId = await taskFor(urls.a, nonce);
    await waitForTaskState((path) => api<TaskDetail>(urls.a, path), taskId, ['running'], 120_000);
    const paused = nameOf(await ranOn(name, taskId, urls.a))!;
    const other = another(paused);
    // Only the service process: its app-server, Codex's shell and the gate go on (the agent answers at about 20 s).
    process.kill(procs[paused]!.pid, 'SIGSTOP');
    try {
      const d = await waitForTaskState((path) => api<TaskDetail>(urls[other], path), taskId, FINAL, 180_000);
      expect(d.task.state, `${d.task.errorCode}: ${d.audit.map((e) => e.toState ?? e.action).join(' > ')}`).toBe('succeeded');
      expect(NODE_IDS.filter((id) => id !== `node-${paused}`)).toContain(await ranOn(name, taskId, urls[other]));
      // Past the time the stopped node's agent tried to post (its turn's shell sleeps 20 s).
      await new Promise((r) => setTimeout(r, 10_000));
    } finally {
      process.kill(procs[paused]!.pid, 'SIGCONT');
    }
    await new Promise((r) => setTimeout(r, 5_000));
    // One receipt and one answer, whatever the woken node does now.
    expect(await botComments(name, issue)).toHaveLength(2);
    // The stopped node's gate refused its agent's answer, and said so once the node ingested its calls.
    await eventually("the refusal of the paused node's answer in the audit", present(async () => {
      const { events } = await api<{ events: Array<{ action: string; metadata?: { reason?: string } }> }>(urls[other], `/audit?taskId=${taskId}&limit=500`);
      return events.find((e) => e.action === 'agent.gitea_refused' && /no longer held by this node/.test(e.metadata?.reason ?? ''));
    }), 60_000);
  }, 300_000);

  it('the node that ran a repository\'s task is killed: a follow-up there is answered once by another node', async () => {
    const firstTask = await taskFor(urls.a, first.nonce);
    const owner = nameOf(await ranOn(first.repo, firstTask, urls.a))!;
    process.kill(-procs[owner]!.pid, 'SIGKILL');
    const survivors = NAMES.filter((n) => n !== owner);
    const before = (await botComments(first.repo, first.issue)).length;
    const nonce = randomUUID().slice(0, 8);
    relay.sendNextTo(NAMES.indexOf(survivors[0]!), nonce);
    await comment(first.repo, first.issue, `@ccweb-bot thanks, one more summary please [${nonce}]`);
    const taskId = await taskFor(urls[survivors[1]!], nonce);
    const d = await waitForTaskState((path) => api<TaskDetail>(urls[survivors[1]!], path), taskId, FINAL, 180_000);
    expect(d.task.state).toMatch(/^succeeded/);
    expect(survivors.map((n) => `node-${n}`)).toContain(await ranOn(first.repo, taskId, urls[survivors[1]!]));
    await eventually('receipt and answer of the follow-up', present(async () => ((await botComments(first.repo, first.issue)).length >= before + 2 ? true : undefined)), 30_000);
    expect(await botComments(first.repo, first.issue)).toHaveLength(before + 2);
  });
});
