// Two nodes on one PostgreSQL, every node alike, end to end: the real service processes with their
// own data directories and Codex homes, a REAL Gitea 1.26 whose webhook goes through a round-robin
// relay (the load balancer), the real Codex app-server with the scripted agent, the real gitea-mcp, a
// real PostgreSQL. Node A is killed with SIGKILL (its whole process group) while a task it claimed is
// in flight; node B ends A's lease once it expires on the database's clock and finishes the task: one
// receipt, one answer, one pull request. A Replay answered by B is a duplicate; a follow-up on B's
// node is answered although the Codex thread lives in A's home.
//
// In test/cluster/: CI runs it on Node 24 only, like test/chaos (no API here differs between versions).
//
// Fault injection (the only double): the git wrapper of the publish environment holds the first
// clone (`holdGit`), so A dies with the task in `preparing`.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clusterApi, FINAL_STATES as FINAL, present, type TaskDetail } from '../support/cluster-api.js';
import { startPublishEnvironment, type PublishEnvironment } from '../support/publish-environment.js';
import { startThrowawayPostgres, type ThrowawayPostgres } from '../support/postgres-server.js';
import { eventually, freePort } from '../support/real-gitea/index.js';
import { startRoundRobinRelay, type RoundRobinRelay } from '../support/round-robin-relay.js';
import { startServiceProcess, type ServiceProcess } from '../support/sandbox/service-process.js';
import { writeCodexHome } from '../../src/demo/scripted-model.js';
import { waitForTaskState } from '../support/wait-for-task.js';

const root = mkdtempSync(join(tmpdir(), 'ccweb-failover-'));
let env: PublishEnvironment;
let postgres: ThrowawayPostgres;
let relay: RoundRobinRelay;
const nodes: { a?: ServiceProcess; b?: ServiceProcess } = {};
const urls: { a: string; b: string } = { a: '', b: '' };

const { api, taskFor, botComments } = clusterApi(() => env);

beforeAll(async () => {
  env = await startPublishEnvironment(root);
  postgres = await startThrowawayPostgres({ parentDir: root });
  const databaseUrl = await postgres.createDatabase('ccweb');
  const [portA, portB] = [await freePort(), await freePort()];
  urls.a = `http://127.0.0.1:${portA}`;
  urls.b = `http://127.0.0.1:${portB}`;
  // The hook points at CCWEB_PORT of the environment: the relay takes it over.
  relay = await startRoundRobinRelay(Number(env.env['CCWEB_PORT']), () => [urls.a, urls.b]);
  const codexB = join(root, 'codex-home-b');
  writeCodexHome(codexB, { port: env.model.port, model: 'fake-model' });
  const node = (name: string, port: number, extra: Record<string, string> = {}) => ({
    ...env.env,
    CCWEB_PORT: String(port),
    CCWEB_DATA_DIR: join(root, `node-${name}`),
    CCWEB_DATABASE_URL: databaseUrl,
    CCWEB_NODE_ID: `node-${name}`,
    // Short, so the test does not wait a minute for A's lease to run out.
    CCWEB_LEASE_TTL_MS: '6000',
    ...extra,
  });
  [nodes.a, nodes.b] = await Promise.all([
    startServiceProcess(node('a', portA), { ownProcessGroup: true, timeoutMs: 120_000 }),
    startServiceProcess(node('b', portB, { CODEX_HOME: codexB }), { ownProcessGroup: true, timeoutMs: 120_000 }),
  ]);
}, 300_000);

afterAll(async () => {
  for (const n of [nodes.a, nodes.b]) await n?.stop().catch(() => undefined);
  await relay?.close();
  await postgres?.stop();
  await env?.close();
  rmSync(root, { recursive: true, force: true });
});

describe('two nodes on one PostgreSQL: a task of a node that died is finished by the other [real gitea-mcp]', () => {
  let firstIssue = 0;
  let firstTask = '';
  let firstNonce = '';

  it('node A dies (SIGKILL) with a task in flight; node B takes over and finishes it: one receipt, one answer, one pull request', async () => {
    firstIssue = await env.gitea.createIssue('alice', 'Fail over while cloning');
    const hold = env.holdGit('clone');
    const nonce = (firstNonce = randomUUID().slice(0, 8));
    // A accepts it and claims it at once (a node claims what it accepts before any other hears of it).
    relay.sendNextTo(0, nonce);
    await env.gitea.comment('alice', firstIssue, `@ccweb-bot please append a line to CHANGES.md (change-file) [${nonce}]`);
    firstTask = await taskFor(urls.a, nonce);
    await hold.held;
    expect((await api<TaskDetail>(urls.a, `/tasks/${firstTask}`)).task.state).toBe('preparing');

    const a = nodes.a!;
    const exited = new Promise<void>((resolve) => (a.child.exitCode !== null || a.child.signalCode !== null ? resolve() : a.child.once('exit', () => resolve())));
    process.kill(-a.pid, 'SIGKILL');
    await exited;
    nodes.a = undefined;
    hold.release();

    const d = await waitForTaskState((path) => api<TaskDetail>(urls.b, path), firstTask, FINAL, 180_000);
    expect(d.task.state).toBe('succeeded');
    const actions = d.audit.map((e) => e.action);
    expect(actions).toContain('lease.expired');
    // One receipt (edited in place) and one answer, whoever wrote them.
    const bodies = await eventually('the answer on the issue', present(async () => {
      const list = await botComments(firstIssue);
      return list.length >= 2 ? list : undefined;
    }), 30_000);
    expect(bodies).toHaveLength(2);
    // Node B's overview lists both nodes: A still as it left its row (killed, it never said it stopped), its
    // heartbeat stopped while B's goes on (B may finish the task before its next beat: waited for).
    type Overview = { nodes: Array<{ nodeId: string; role: string; self: boolean; heartbeatAt: string; startedAt: string }> };
    const byIdNow = async () => Object.fromEntries((await api<Overview>(urls.b, '/overview')).nodes.map((x) => [x.nodeId, x]));
    const firstSeen = await byIdNow();
    const byId = await eventually('node B to beat after node A stopped', present(async () => {
      const now = await byIdNow();
      return Date.parse(now['node-b']!.heartbeatAt) > Date.parse(now['node-a']!.heartbeatAt) ? now : undefined;
    }), 30_000);
    expect(byId['node-b']).toMatchObject({ role: 'writer', self: true });
    expect(byId['node-a']).toMatchObject({ role: 'writer', self: false, heartbeatAt: firstSeen['node-a']!.heartbeatAt });
    const pulls = await env.gitea.api<Array<{ head: { ref: string } }>>(env.gitea.owner, 'GET', `/repos/${env.gitea.owner}/${env.gitea.repo}/pulls?state=all&limit=50`);
    expect(pulls.body.filter((p) => p.head.ref === `ccweb/issue-${firstIssue}`)).toHaveLength(1);
  });

  it("Gitea's Replay of the first mention, answered by node B through the relay, is a duplicate", async () => {
    const deliveries = await env.gitea.deliveries(env.hookId);
    const original = deliveries.find((x) => {
      let p: { comment?: { body?: string; user?: { login?: string } } };
      try {
        p = JSON.parse(x.payload) as typeof p;
      } catch {
        return false; // a delivery Gitea shows without its payload
      }
      return p.comment?.user?.login === 'alice' && (p.comment.body ?? '').includes(firstNonce);
    })!;
    expect(original).toBeDefined();
    const before = await api<{ total: number }>(urls.b, '/tasks?pageSize=1');
    await env.gitea.replay(env.hookId, original.uuid);
    const replayed = await env.gitea.waitForDelivery(env.hookId, (x) => x.uuid !== original.uuid && x.payload === original.payload);
    expect(replayed.status).toBe(200);
    expect(JSON.parse(replayed.responseBody)).toMatchObject({ status: 'duplicate' });
    expect((await api<{ total: number }>(urls.b, '/tasks?pageSize=1')).total).toBe(before.total);
  });

  it('a follow-up on the same issue is answered by node B, whose Codex home never had the thread', async () => {
    const before = (await botComments(firstIssue)).length;
    const nonce = randomUUID().slice(0, 8);
    await env.gitea.comment('alice', firstIssue, `@ccweb-bot thanks, one more line please [${nonce}]`);
    const taskId = await taskFor(urls.b, nonce);
    const d = await waitForTaskState((path) => api<TaskDetail>(urls.b, path), taskId, FINAL, 120_000);
    expect(d.task.state).toMatch(/^succeeded/);
    expect((await botComments(firstIssue)).length).toBe(before + 2);
  });
});
