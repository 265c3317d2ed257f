// Three nodes on one PostgreSQL behind one URL, end to end: three real service processes with
// their own data directories and Codex homes, a REAL Gitea 1.26 whose webhook goes through a
// round-robin relay (the load balancer) to all three, the real Codex app-server with the scripted
// agent, the real gitea-mcp, a real PostgreSQL. Every node is alike: any node accepts any webhook and
// any API call and may run any task: issue and pull-request mentions, a Replay sent to another node
// than the original, a `stop` and an operator's abort through another node. Then a node is killed,
// and a follow-up sent to another is answered.
//
// In test/cluster/: CI runs it on Node 24 only, like test/chaos.
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clusterApi, FINAL_STATES as FINAL, present, type TaskDetail } from '../support/cluster-api.js';
import { stopNodes } from '../support/cluster-nodes.js';
import { startPublishEnvironment, type PublishEnvironment } from '../support/publish-environment.js';
import { startThrowawayPostgres, type ThrowawayPostgres } from '../support/postgres-server.js';
import { eventually, freePort } from '../support/real-gitea/index.js';
import { startRoundRobinRelay, type RoundRobinRelay } from '../support/round-robin-relay.js';
import { startServiceProcess, type ServiceProcess } from '../support/sandbox/service-process.js';
import { writeCodexHome } from '../../src/demo/scripted-model.js';
import { waitForTaskState } from '../support/wait-for-task.js';

const NAMES = ['a', 'b', 'c'] as const;
type Name = (typeof NAMES)[number];
const root = mkdtempSync(join(tmpdir(), 'ccweb-3nodes-'));
let env: PublishEnvironment;
let postgres: ThrowawayPostgres;
let relay: RoundRobinRelay;
const urls = {} as Record<Name, string>;
/** Each node's process once it listens (startServiceProcess resolves on "ccweb-gitea listening"). */
const starting = {} as Record<Name, Promise<ServiceProcess>>;
const pids = {} as Record<Name, number>;
/** Every node's process from its spawn, to be stopped whatever happens. */
const children: ChildProcess[] = [];

const { api, taskFor, botComments } = clusterApi(() => env);

beforeAll(async () => {
  env = await startPublishEnvironment(root);
  postgres = await startThrowawayPostgres({ parentDir: root });
  const databaseUrl = await postgres.createDatabase('ccweb');
  for (const n of NAMES) urls[n] = `http://127.0.0.1:${await freePort()}`;
  relay = await startRoundRobinRelay(Number(env.env['CCWEB_PORT']), () => NAMES.map((n) => urls[n]));
  const start = (n: Name) => {
    const codexHome = join(root, `codex-home-${n}`);
    if (n !== 'a') writeCodexHome(codexHome, { port: env.model.port, model: 'fake-model' });
    starting[n] = startServiceProcess(
      {
        ...env.env,
        CCWEB_PORT: new URL(urls[n]).port,
        CCWEB_DATA_DIR: join(root, `node-${n}`),
        CCWEB_DATABASE_URL: databaseUrl,
        CCWEB_NODE_ID: `node-${n}`,
        // Long enough that a heartbeat late under load does not lose a lease mid-test (nothing here waits for one to expire).
        CCWEB_LEASE_TTL_MS: '30000',
        ...(n !== 'a' ? { CODEX_HOME: codexHome } : {}),
      },
      { ownProcessGroup: true, timeoutMs: 600_000, onSpawn: (c) => void children.push(c) },
    );
    starting[n].catch(() => undefined);
  };
  // All three at once: nobody waits for anybody.
  for (const n of NAMES) start(n);
  for (const n of NAMES) pids[n] = (await starting[n]).pid;
}, 400_000);

afterAll(async () => {
  await stopNodes(children);
  await relay?.close();
  await postgres?.stop();
  await env?.close();
  rmSync(root, { recursive: true, force: true });
});

describe('three nodes on one PostgreSQL, one URL [real gitea-mcp]', () => {
  let issue = 0;
  let issueNonce = '';

  it('every node answers its own /healthz and any node\'s overview lists all three, each running', async () => {
    for (const n of NAMES) {
      expect((await fetch(`${urls[n]}/healthz`)).status).toBe(200);
      const overview = await eventually(`the overview of node ${n} listing three nodes`, present(async () => {
        const o = await api<{ nodes: Array<{ nodeId: string; role: string; self: boolean; url: string | null }> }>(urls[n], '/overview');
        return o.nodes.length === 3 ? o : undefined;
      }), 30_000);
      const byId = Object.fromEntries(overview.nodes.map((x) => [x.nodeId, x]));
      for (const m of NAMES) expect(byId[`node-${m}`]).toMatchObject({ role: 'writer', self: m === n, url: urls[m] });
    }
  });

  it('an issue mention and a pull-request mention, delivered to nodes b and c, are answered once each', async () => {
    issue = await env.gitea.createIssue('alice', 'Three nodes');
    issueNonce = randomUUID().slice(0, 8);
    const prNonce = randomUUID().slice(0, 8);
    relay.sendNextTo(1, issueNonce);
    relay.sendNextTo(2, prNonce);
    await env.gitea.comment('alice', issue, `@ccweb-bot please append a line to CHANGES.md (change-file) [${issueNonce}]`);
    await env.gitea.comment('alice', env.gitea.prNumber, `@ccweb-bot what does this change do? [${prNonce}]`);
    for (const [index, nonce] of [[issue, issueNonce], [env.gitea.prNumber, prNonce]] as const) {
      const taskId = await taskFor(urls.c, nonce);
      const d = await waitForTaskState((path) => api<TaskDetail>(urls.b, path), taskId, FINAL, 180_000);
      expect(d.task.state, `the task for [${nonce}]`).toBe('succeeded');
      const bodies = await eventually(`receipt and answer on #${index}`, present(async () => {
        const list = (await botComments(index)).filter((b) => b.includes(taskId) || b.includes(nonce));
        return list.length >= 1 ? await botComments(index) : undefined;
      }), 30_000);
      expect(bodies.length).toBeGreaterThanOrEqual(2);
    }
    // Every delivery of the two mentions went where it was sent and was accepted there.
    const deliveries = await env.gitea.deliveries(env.hookId);
    for (const [nonce, node] of [[issueNonce, 1], [prNonce, 2]] as const) {
      const d = deliveries.filter((x) => x.payload.includes(nonce) && !x.payload.includes('"login":"ccweb-bot"'));
      expect(d.length, `deliveries of [${nonce}]`).toBeGreaterThanOrEqual(1);
      for (const x of d) {
        expect(relay.deliveries.get(x.uuid), `the node that received [${nonce}]`).toBe(node);
        expect(x.status).toBe(202);
      }
    }
    // One answer per comment: exactly receipt + answer on the new issue.
    expect(await botComments(issue)).toHaveLength(2);
    const pulls = await env.gitea.api<Array<{ head: { ref: string } }>>(env.gitea.owner, 'GET', `/repos/${env.gitea.owner}/${env.gitea.repo}/pulls?state=all&limit=50`);
    expect(pulls.body.filter((p) => p.head.ref === `ccweb/issue-${issue}`)).toHaveLength(1);
  });

  it("Gitea's Replay of the issue mention, sent to another node than the original, is a duplicate", async () => {
    const deliveries = await env.gitea.deliveries(env.hookId);
    const original = deliveries.find((x) => x.payload.includes(issueNonce) && relay.deliveries.has(x.uuid))!;
    expect(original).toBeDefined();
    const other = (relay.deliveries.get(original.uuid)! + 1) % 3;
    const before = await api<{ total: number }>(urls.a, '/tasks?pageSize=1');
    relay.sendNextTo(other, issueNonce);
    await env.gitea.replay(env.hookId, original.uuid);
    const replayed = await env.gitea.waitForDelivery(env.hookId, (x) => x.uuid !== original.uuid && x.payload === original.payload);
    expect(relay.deliveries.get(replayed.uuid)).toBe(other);
    expect(replayed.status).toBe(200);
    expect(JSON.parse(replayed.responseBody)).toMatchObject({ status: 'duplicate' });
    expect((await api<{ total: number }>(urls.a, '/tasks?pageSize=1')).total).toBe(before.total);
  });

  it('"@ccweb-bot stop" delivered to node c aborts the turn wherever it runs', async () => {
    const n = await env.gitea.createIssue('alice', 'Stop through another node');
    const nonce = randomUUID().slice(0, 8);
    await env.gitea.comment('alice', n, `@ccweb-bot please take your time (slow) [${nonce}]`);
    const taskId = await taskFor(urls.a, nonce);
    await waitForTaskState((path) => api<TaskDetail>(urls.a, path), taskId, ['running'], 120_000);
    const stopNonce = randomUUID().slice(0, 8);
    relay.sendNextTo(2, stopNonce);
    await env.gitea.comment('alice', n, `@ccweb-bot stop\n\n<!-- [${stopNonce}] -->`);
    const d = await waitForTaskState((path) => api<TaskDetail>(urls.c, path), taskId, FINAL, 120_000);
    expect(d.task.state, `${d.task.errorCode}: ${d.audit.map((e) => e.toState ?? e.action).join(' > ')}`).toBe('aborted');
    const stop = (await env.gitea.deliveries(env.hookId)).find((x) => x.payload.includes(stopNonce));
    expect(stop && relay.deliveries.get(stop.uuid)).toBe(2);
  });

  it("an operator's abort through node b's API reaches the task wherever it runs", async () => {
    const n = await env.gitea.createIssue('alice', 'Abort through another node');
    const nonce = randomUUID().slice(0, 8);
    await env.gitea.comment('alice', n, `@ccweb-bot please take your time (slow) [${nonce}]`);
    const taskId = await taskFor(urls.b, nonce);
    await waitForTaskState((path) => api<TaskDetail>(urls.b, path), taskId, ['running'], 120_000);
    const answer = await api<{ ok?: boolean; state?: string }>(urls.b, `/tasks/${taskId}/abort`, {
      method: 'POST',
      body: { requestId: randomUUID(), operator: 'ops', reason: 'through node b' },
    });
    expect(answer).toBeDefined();
    const d = await waitForTaskState((path) => api<TaskDetail>(urls.b, path), taskId, FINAL, 120_000);
    expect(d.task.state, `${d.task.errorCode}: ${d.audit.map((e) => e.toState ?? e.action).join(' > ')}`).toBe('aborted');
    const abortEvent = (await api<{ events: Array<{ action: string; metadata?: { reason?: string } }> }>(urls.a, `/audit?taskId=${taskId}&limit=500`)).events.find((e) => e.action === 'control.task_abort');
    expect(abortEvent?.metadata?.reason ?? JSON.stringify(abortEvent)).toContain('through node b');
  });

  it('a node dies: a follow-up sent to another node is answered, once', async () => {
    process.kill(-pids.a, 'SIGKILL');
    const other = 'c' as const;
    const before = (await botComments(issue)).length;
    const nonce = randomUUID().slice(0, 8);
    relay.sendNextTo(NAMES.indexOf(other), nonce);
    await env.gitea.comment('alice', issue, `@ccweb-bot thanks, one more line please [${nonce}]`);
    const taskId = await taskFor(urls[other], nonce);
    const d = await waitForTaskState((path) => api<TaskDetail>(urls[other], path), taskId, FINAL, 180_000);
    expect(d.task.state).toMatch(/^succeeded/);
    expect((await botComments(issue)).length).toBe(before + 2);
  });
});
