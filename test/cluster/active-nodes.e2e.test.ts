// Three nodes, every one alike, end to end: three real service processes with their own data
// directories and Codex homes on one real PostgreSQL, a REAL Gitea 1.26 with four repositories whose
// webhooks go through a round-robin relay (the load balancer), the real Codex app-server with the
// scripted agent, the real gitea-mcp. Any node accepts any webhook and runs any repository's tasks;
// the database's lease row lets one run at a time per repository. Mentions on every repository (a
// change pushed as one pull request, a mention on a pull request) sent to different nodes, a Replay
// sent to another node, a `stop` and an operator's abort through a node that does not run the turn
// (the database tells the one that does); then the faults: a node stopped (SIGSTOP) past its lease
// mid-turn; a node stopped 30 s under a stream of mentions; node c's clock 30 s ahead; last, the node
// that ran a repository's task is killed with SIGKILL, and a follow-up there is answered once by another.
//
// Node c runs with its wall clock 30 s ahead for the whole file (test/support/clock-ahead.mjs, a
// preload that moves its Date: a double, since one machine has one clock); every test here holds
// with it, and one checks the leases on its account. The double reaches the service process (and the
// Node processes that inherit its NODE_OPTIONS), not the MCP gate Codex starts with an environment of
// its own: so the test that stops a node mid-turn stops one whose clock is right.
//
// In test/cluster/: CI runs it on Node 24 only, like test/chaos.
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
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
/** The node whose wall clock runs ahead, and by how much. */
const SKEWED: Name = 'c';
const AHEAD_MS = 30_000;
const CLOCK_AHEAD = fileURLToPath(new URL('../support/clock-ahead.mjs', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'ccweb-active-'));
let env: PublishEnvironment;
let postgres: ThrowawayPostgres;
let relay: RoundRobinRelay;
const urls = {} as Record<Name, string>;
const procs = {} as Partial<Record<Name, ServiceProcess>>;
const children: ChildProcess[] = [];
/** This process's clock when each node's "listening" line came. */
const listenedAt: Partial<Record<Name, number>> = {};
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
/** Exactly a receipt and an answer on the issue (their openings in the message when not). */
async function expectReceiptAndAnswer(repo: string, index: number): Promise<void> {
  const bodies = await botComments(repo, index);
  expect(bodies.length, `the bot's comments on ${repo}#${index}: ${JSON.stringify(bodies.map((b) => b.slice(0, 160)))}`).toBe(2);
}
/** The node whose lease ran the task: the lease owner its repository's lock last granted for it. */
async function ranOn(repo: string, taskId: string, base: string): Promise<string | null> {
  const actorId = encodeURIComponent(`lock:${repoKeyOf(repo)}`);
  const { events } = await api<{ events: Array<{ action: string; metadata?: { event?: { type?: string; owner?: string; taskId?: string } } }> }>(base, `/audit?actorId=${actorId}&limit=5000`);
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
      ...(n === SKEWED ? { NODE_OPTIONS: `${process.env['NODE_OPTIONS'] ?? ''} --import ${CLOCK_AHEAD}`.trim(), CLOCK_AHEAD_MS: String(AHEAD_MS) } : {}),
    },
    { ownProcessGroup: true, timeoutMs: 300_000, onSpawn: (c) => void children.push(c) },
  );
  p.then((s) => {
    procs[n] = s;
    listenedAt[n] = Date.now();
  }).catch(() => undefined);
  return p;
}

beforeAll(async () => {
  // Four deliveries at once, as a Gitea on an 8-core host sends them (on this 2-core machine it would
  // send one at a time, and a stopped node would hold the whole stream back, not only its share).
  env = await startPublishEnvironment(root, { giteaWebhookWorkers: 4 });
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

  it('every node answers its own /healthz and serves its own overview listing all three, each writing, at its URL', async () => {
    for (const n of NAMES) {
      expect((await fetch(`${urls[n]}/healthz`)).status).toBe(200);
      const o = await api<{ nodes: Array<{ nodeId: string; role: string; self: boolean; url: string | null }> }>(urls[n], '/overview');
      const byId = Object.fromEntries(o.nodes.map((x) => [x.nodeId, x]));
      for (const m of NAMES) expect(byId[`node-${m}`]).toMatchObject({ role: 'writer', self: m === n, url: urls[m] });
    }
  });

  it(`node ${SKEWED}'s clock is ${AHEAD_MS / 1000} s ahead (the time in its "listening" line against this clock when the line came); the others' are not`, () => {
    for (const n of NAMES) {
      const line = procs[n]!.lines.map((l) => { try { return JSON.parse(l) as { msg?: string; time?: number }; } catch { return {}; } }).find((l) => l.msg === 'ccweb-gitea listening');
      expect(line?.time, `node ${n}'s listening line`).toBeDefined();
      expect(Math.abs(line!.time! - listenedAt[n]! - (n === SKEWED ? AHEAD_MS : 0)), `node ${n}'s clock against this one`).toBeLessThan(3_000);
    }
  });

  it(`a live-stream ticket issued by one node opens the stream on another, whichever of them has its clock ${AHEAD_MS / 1000} s ahead`, async () => {
    for (const [from, to] of [['a', SKEWED], [SKEWED, 'a']] as const) {
      const issued = await fetch(`${urls[from]}/api/gitea-workflow/events/ticket`, { method: 'POST', headers: { Authorization: `Bearer ${env.adminToken}` } });
      const { ticket } = (await issued.json()) as { ticket: string };
      const abort = new AbortController();
      const res = await fetch(`${urls[to]}/api/gitea-workflow/events?ticket=${encodeURIComponent(ticket)}`, { signal: abort.signal });
      expect(res.status, `a ticket from node ${from} at node ${to}`).toBe(200);
      abort.abort();
    }
  });

  it('a mention on each repository (one a change to push, one on a pull request), delivered to different nodes, is run by one node and answered once; every live view shows every task', async () => {
    const sent: Array<{ repo: string; issue: number; nonce: string; to: Name }> = [];
    // Node a's live view, to see the other nodes' work in it.
    const live = await liveTransitions(urls.a, urls.b);
    const mention = async (repo: string, issue: number, to: Name, ask: string) => {
      const nonce = randomUUID().slice(0, 8);
      relay.sendNextTo(NAMES.indexOf(to), nonce);
      await comment(repo, issue, `@ccweb-bot ${ask} [${nonce}]`);
      sent.push({ repo, issue, nonce, to });
    };
    for (const [i, { name }] of repos.entries()) {
      const issue = await createIssue(name, `Nodes alike: ${name}`);
      await mention(name, issue, NAMES[i % NAMES.length]!, i === 0 ? 'please append a line to CHANGES.md (change-file)' : 'please summarise the README');
    }
    await mention(env.gitea.repo, env.gitea.prNumber, 'c', 'what does this change do?');
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
      await expectReceiptAndAnswer(s.repo, s.issue);
    }
    // The work was spread: a node claims what it accepted at once, so every node ran some.
    expect(ran.size).toBe(3);
    // The change went out as one branch and one pull request, whichever node pushed it.
    const pulls = await env.gitea.api<Array<{ head: { ref: string } }>>(env.gitea.owner, 'GET', `/repos/${env.gitea.owner}/${env.gitea.repo}/pulls?state=all&limit=50`);
    expect(pulls.body.filter((p) => p.head.ref === `ccweb/issue-${first.issue}`)).toHaveLength(1);
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
    const before = await api<{ total: number }>(urls.a, '/tasks?pageSize=1');
    relay.sendNextTo(other, first.nonce);
    await env.gitea.replay(env.hookId, original.uuid);
    const replayed = await env.gitea.waitForDelivery(env.hookId, (x) => x.uuid !== original.uuid && x.payload === original.payload);
    expect(relay.deliveries.get(replayed.uuid)).toBe(other);
    expect(replayed.status).toBe(200);
    expect(JSON.parse(replayed.responseBody)).toMatchObject({ status: 'duplicate' });
    expect(relay.handledBy.get(replayed.uuid)).toBe(`node-${NAMES[other]}`);
    expect((await api<{ total: number }>(urls.a, '/tasks?pageSize=1')).total).toBe(before.total);
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
    // To a node whose clock is right (it claims what it accepts): the double moves node c's clock, not
    // its gate's (Codex starts the gate with an environment of its own), and the gate judges the node's
    // write deadline, a time on the node's clock, by its own; on a real machine both read one clock.
    relay.sendNextTo(NAMES.indexOf('a'), nonce);
    await comment(name, issue, `@ccweb-bot please answer-late [${nonce}]`);
    const taskId = await taskFor(urls.a, nonce);
    await waitForTaskState((path) => api<TaskDetail>(urls.a, path), taskId, ['running'], 120_000);
    const paused = nameOf(await ranOn(name, taskId, urls.a))!;
    expect(paused, 'the node running the turn').not.toBe(SKEWED);
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
    await expectReceiptAndAnswer(name, issue);
    // The stopped node's gate refused its agent's answer, and said so once the node ingested its calls.
    await eventually("the refusal of the paused node's answer in the audit", present(async () => {
      const { events } = await api<{ events: Array<{ action: string; metadata?: { reason?: string } }> }>(urls[other], `/audit?taskId=${taskId}&limit=500`);
      return events.find((e) => e.action === 'agent.gitea_refused' && /no longer held by this node/.test(e.metadata?.reason ?? ''));
    }), 60_000);
  }, 300_000);

  it('a node stopped (SIGSTOP) 30 s under a stream of mentions sent round-robin to all three: the others answer every delivery within Gitea\'s 5 s; after it wakes every accepted mention has one receipt and one answer', async () => {
    const paused: Name = 'b';
    const BEFORE = 6;
    const DURING = 30;
    // An issue per mention, made beforehand so the stream is only comments.
    const targets: Array<{ repo: string; issue: number }> = [];
    for (let i = 0; i < BEFORE + DURING; i++) {
      const repo = repos[i % repos.length]!.name;
      targets.push({ repo, issue: await createIssue(repo, `Stream ${i}`) });
    }
    const sent: Array<{ repo: string; issue: number; nonce: string }> = [];
    const start = performance.now();
    let pausedAt = 0;
    let wokeAt = 0;
    try {
      for (const [i, t] of targets.entries()) {
        const due = start + i * 1_000;
        await new Promise((r) => setTimeout(r, Math.max(0, due - performance.now())));
        if (i === BEFORE) {
          process.kill(procs[paused]!.pid, 'SIGSTOP');
          pausedAt = performance.now();
        }
        const nonce = randomUUID().slice(0, 8);
        await comment(t.repo, t.issue, `@ccweb-bot please summarise the README [${nonce}]`);
        sent.push({ ...t, nonce });
      }
      // The last mentions' deliveries reach the relay while the node is still stopped.
      await new Promise((r) => setTimeout(r, Math.max(0, pausedAt + DURING * 1_000 - performance.now())));
    } finally {
      process.kill(procs[paused]!.pid, 'SIGCONT');
      wokeAt = performance.now();
    }
    const mentionAcks = () => relay.acks.filter((a) => a.at >= start && sent.some((m) => a.body.includes(m.nonce)));
    // Every delivery the other nodes got while the stream ran (mentions, and the bot's own comments'
    // deliveries, which they answer too) was answered within Gitea's DELIVER_TIMEOUT, 2xx.
    const others = relay.acks.filter((a) => a.at >= start && a.at < wokeAt && a.target !== NAMES.indexOf(paused));
    const late = others.filter((a) => a.ms >= 5_000 || a.status >= 300);
    expect(late.map((a) => `${NAMES[a.target]}: ${a.status} in ${a.ms.toFixed(0)} ms`), 'deliveries to the running nodes answered late or not 2xx').toEqual([]);
    const pct = (xs: number[], p: number) => (xs.length === 0 ? NaN : [...xs].sort((x, y) => x - y)[Math.min(xs.length - 1, Math.ceil((p / 100) * xs.length) - 1)]!);
    const phase = (from: number, to: number) => others.filter((a) => a.at >= from && a.at < to).map((a) => a.ms);
    for (const [label, ms] of [['before the pause', phase(start, pausedAt)], ['during the pause', phase(pausedAt, wokeAt)]] as const) {
      console.log(`other nodes' webhook acks ${label}: ${ms.length} deliveries, p50 ${pct(ms, 50).toFixed(0)} ms, p99 ${pct(ms, 99).toFixed(0)} ms, max ${Math.max(...ms).toFixed(0)} ms`);
    }
    // The mentions that went to the stopped node: answered once it woke (Gitea, after 5 s, had marked them failed).
    await eventually('the relay to have every request answered', present(async () => (relay.inFlight() === 0 ? true : undefined)), 60_000);
    const toPaused = mentionAcks().filter((a) => a.target === NAMES.indexOf(paused) && a.at >= pausedAt && a.at < wokeAt);
    expect(toPaused.length, 'mentions sent to the stopped node while it was stopped').toBeGreaterThan(0);
    console.log(`mentions sent to the stopped node: ${toPaused.length}, answered after ${toPaused.map((a) => (a.ms / 1000).toFixed(1)).join(', ')} s (statuses ${[...new Set(toPaused.map((a) => a.status))].join(', ')})`);
    // Every mention the nodes accepted (202) ran once and was answered once, whichever node took it.
    const acceptedBy = (m: { nonce: string }) => mentionAcks().some((a) => a.body.includes(m.nonce) && a.status === 202);
    await eventually('every mention to be delivered and accepted (202) by some node', present(async () => (sent.every(acceptedBy) ? true : undefined)), 60_000).catch(() => undefined);
    const accepted = sent.filter(acceptedBy);
    expect(sent.filter((m) => !acceptedBy(m)).map((m) => m.nonce), 'mentions no node accepted').toEqual([]);
    for (const m of accepted) {
      const taskId = await taskFor(urls.a, m.nonce);
      const d = await waitForTaskState((path) => api<TaskDetail>(urls.a, path), taskId, FINAL, 240_000);
      expect(d.task.state, `[${m.nonce}] on ${m.repo}#${m.issue}: ${d.task.errorCode}`).toBe('succeeded');
      await eventually(`receipt and answer on ${m.repo}#${m.issue}`, present(async () => ((await botComments(m.repo, m.issue)).length >= 2 ? true : undefined)), 30_000);
    }
    // Settled: none got a second receipt or answer late.
    await new Promise((r) => setTimeout(r, 3_000));
    for (const m of accepted) await expectReceiptAndAnswer(m.repo, m.issue);
  }, 420_000);

  it(`node ${SKEWED}, its clock ${AHEAD_MS / 1000} s ahead, neither takes a live lease nor loses its own early: one task at a time per repository, each answered once`, async () => {
    // Two repositories, each with a turn longer than the lease's TTL (answer-late: 20 s against 15 s):
    // on the first node c holds the lease and must renew it on the database's clock; on the second a
    // node with the right clock holds it while node c, to which clock that lease looks 30 s past its
    // end, is sent the repository's next mention.
    const plans = [
      { repo: repos[1]!.name, holder: SKEWED, waiter: 'a' as Name },
      { repo: repos[2]!.name, holder: 'a' as Name, waiter: SKEWED },
    ];
    const runs = await Promise.all(plans.map(async (p) => {
      const issue = await createIssue(p.repo, `Clock ahead: ${p.holder} holds`);
      const nonce = randomUUID().slice(0, 8);
      relay.sendNextTo(NAMES.indexOf(p.holder), nonce);
      await comment(p.repo, issue, `@ccweb-bot please answer-late [${nonce}]`);
      const longTask = await taskFor(urls.b, nonce);
      await waitForTaskState((path) => api<TaskDetail>(urls.b, path), longTask, ['running'], 120_000);
      expect(await ranOn(p.repo, longTask, urls.b), `the node that claimed ${p.repo}'s long turn (the one it was sent to)`).toBe(`node-${p.holder}`);
      const nextIssue = await createIssue(p.repo, `Clock ahead: ${p.waiter} waits`);
      const nextNonce = randomUUID().slice(0, 8);
      relay.sendNextTo(NAMES.indexOf(p.waiter), nextNonce);
      await comment(p.repo, nextIssue, `@ccweb-bot please summarise the README [${nextNonce}]`);
      const nextTask = await taskFor(urls.b, nextNonce);
      return { ...p, issue, longTask, nextIssue, nextTask };
    }));
    for (const r of runs) {
      for (const taskId of [r.longTask, r.nextTask]) {
        const d = await waitForTaskState((path) => api<TaskDetail>(urls.b, path), taskId, FINAL, 180_000);
        expect(d.task.state, `${r.repo} ${taskId}: ${d.task.errorCode}: ${d.audit.map((e) => e.toState ?? e.action).join(' > ')}`).toBe('succeeded');
      }
      // The long turn kept its lease to the end, on the node that claimed it: one grant, never expired or taken over.
      const { events } = await api<{ events: Array<{ seq: number; action: string; taskId: string | null; metadata?: { leaseId?: string; event?: { type?: string; leaseId?: string; taskId?: string } } }> }>(urls.b, `/audit?actorId=${encodeURIComponent(`lock:${repoKeyOf(r.repo)}`)}&limit=5000`);
      const lockEvents = events.sort((x, y) => x.seq - y.seq);
      const grants = (taskId: string) => lockEvents.filter((e) => e.action === 'lease.granted' && e.taskId === taskId);
      expect(grants(r.longTask), `grants of ${r.repo}'s long turn`).toHaveLength(1);
      expect(grants(r.nextTask), `grants of ${r.repo}'s next task`).toHaveLength(1);
      expect(lockEvents.filter((e) => (e.action === 'lease.expired' || e.action === 'lease.taken_over') && (e.taskId === r.longTask || e.taskId === r.nextTask)), `${r.repo}: leases ended by expiry or takeover`).toEqual([]);
      expect(await ranOn(r.repo, r.longTask, urls.b)).toBe(`node-${r.holder}`);
      // One at a time: the next task's lease was granted only after the long turn's was released.
      const longLease = grants(r.longTask)[0]!.metadata!.leaseId;
      const released = lockEvents.find((e) => e.action === 'lock.transition' && e.metadata?.event?.type === 'RELEASE' && e.metadata.event.leaseId === longLease);
      expect(released, `the release of ${r.repo}'s long turn's lease`).toBeDefined();
      expect(grants(r.nextTask)[0]!.seq, `${r.repo}: the next grant after the long turn's release`).toBeGreaterThan(released!.seq);
      await expectReceiptAndAnswer(r.repo, r.issue);
      await expectReceiptAndAnswer(r.repo, r.nextIssue);
    }
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
