// The Gitea host is configuration, never payload; repositories follow
// Gitea by id; the last git error is kept on the task.
//
// Real parts: intake over HTTP with a durable store, the real task executor and workspace manager
// running real git against `git http-backend` (the "configured Gitea"), and a second real HTTP
// listener playing the attacker's host. Test doubles: the Codex session port (the test stops after
// the workspace step, so no Codex is needed) and Gitea's "repository by id" answer
// (`currentRepository`), which stands for GET /repositories/{id}.
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { RepositoryRecord, TaskRecord } from '../../src/domain/records.js';
import { createTaskExecutor, type SessionPort, type VerificationPort } from '../../src/executor/task-effects.js';
import { createWorkspaceAdapter } from '../../src/executor/workspace-adapter.js';
import { taskActorId } from '../../src/tasks/task-actor.js';
import { allowedRepositoryHosts, foreignRepositoryOrigin, urlHost } from '../../src/webhook/repository-origin.js';
import { workspacePathFor } from '../../src/domain/workspace-path.js';
import { startGitHttpServer, type GitHttpServer } from '../../src/demo/gitea-double/git-http.js';
import { startIntakeHarness, type IntakeHarness } from '../support/intake-harness.js';
import { createSchedulerRuntime, ev, submitTask } from '../support/scheduler-harness.js';
import { mutatedDelivery } from '../support/webhook-fixtures.js';
import { grantTestLeaseIn } from '../support/test-lease.js';

const TOKEN = `tok_${randomBytes(20).toString('hex')}`;

/** A plain HTTP listener that records every request it gets (the attacker's host). */
async function startRecorder(): Promise<{ url: string; requests: Array<{ url: string; headers: IncomingHttpHeaders }>; close(): Promise<void> }> {
  const requests: Array<{ url: string; headers: IncomingHttpHeaders }> = [];
  const server: Server = createServer((req, res) => {
    requests.push({ url: req.url ?? '', headers: req.headers });
    res.writeHead(401, { 'WWW-Authenticate': 'Basic realm="x"' });
    res.end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.2', r));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.2:${port}`, requests, close: () => new Promise<void>((r) => server.close(() => r())) };
}

describe('payload repository URLs naming another host are refused', () => {
  let harness: IntakeHarness | null = null;
  afterEach(async () => {
    await harness?.close();
    harness = null;
  });

  it('hosts: http(s), scp-like and ssh:// URLs', () => {
    expect(urlHost('https://Gitea.Example.com/a/b.git')).toBe('gitea.example.com');
    expect(urlHost('git@gitea.example.com:a/b.git')).toBe('gitea.example.com');
    expect(urlHost('ssh://git@evil.example:2222/a/b.git')).toBe('evil.example');
    const allowed = allowedRepositoryHosts('http://127.0.0.1:3000', 'https://gitea.example.com');
    expect(foreignRepositoryOrigin({ cloneUrl: 'https://gitea.example.com/a/b.git', sshUrl: 'git@127.0.0.1:a/b.git' }, allowed)).toBeNull();
    expect(foreignRepositoryOrigin({ cloneUrl: 'https://gitea.example.com/a/b.git', htmlUrl: 'http://evil.example/a/b' }, allowed)).toEqual({
      field: 'repository.html_url',
      host: 'evil.example',
    });
    expect(foreignRepositoryOrigin({ cloneUrl: 'not a url' }, allowed)).toEqual({ field: 'repository.clone_url', host: 'unparsable' });
  });

  for (const field of ['clone_url', 'html_url', 'ssh_url'] as const) {
    it(`signed payload with repository.${field} on another host → 400 + security audit, nothing queued`, async () => {
      harness = await startIntakeHarness({ intake: { repositoryHosts: allowedRepositoryHosts('https://gitea.example.com') } });
      const d = mutatedDelivery('issue_comment_created_on_issue', (p) => {
        p.repository[field] = field === 'ssh_url' ? 'git@attacker.example:alice/widgets.git' : 'http://attacker.example/alice/widgets.git';
      });
      const res = await harness.post(d.body, d.headers);
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ error: 'foreign_repository_origin' });
      expect(await harness.store.count('tasks')).toBe(0);
      expect(await harness.store.count('repositories')).toBe(0);
      expect(harness.permissionCalls).toEqual([]);
      const events = (await harness.store.audit()).filter((e) => e.action === 'webhook.foreign_repository_origin');
      expect(events).toHaveLength(1);
      expect(events[0]).toMatchObject({ level: 'security', errorCode: 'foreign_repository_origin', metadata: { field: `repository.${field}`, host: 'attacker.example' } });
    });
  }

  it('the same payload with the configured host is accepted', async () => {
    harness = await startIntakeHarness({ intake: { repositoryHosts: allowedRepositoryHosts('https://gitea.example.com') } });
    const d = mutatedDelivery('issue_comment_created_on_issue', () => undefined);
    expect((await harness.post(d.body, d.headers)).status).toBe(202);
  });
});

describe('git goes to CCWEB_GITEA_URL only; repositories follow Gitea by id; git errors are kept', () => {
  let tmp: string;
  let gitea: GitHttpServer;
  let attacker: Awaited<ReturnType<typeof startRecorder>>;

  beforeAll(async () => {
    tmp = await mkdtemp(path.join(os.tmpdir(), 'ccweb-origin-'));
    gitea = await startGitHttpServer({ root: path.join(tmp, 'gitea'), token: TOKEN });
    attacker = await startRecorder();
    await gitea.createRepo('evil', 'proj', { files: { 'README.md': '# proj\n' } });
    await gitea.createRepo('newowner', 'renamed', { files: { 'README.md': '# renamed\n' } });
  });
  afterAll(async () => {
    await gitea?.close();
    await attacker?.close();
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  /** A task in `preparing` for `repo`, run by the real executor until its workspace step is over. */
  async function runPrepare(repo: Partial<RepositoryRecord> & { owner: string; name: string }, currentRepository?: (r: RepositoryRecord) => Promise<{ owner: string; name: string } | null>) {
    const rt = await createSchedulerRuntime(path.join(tmp, `store-${randomBytes(4).toString('hex')}`));
    const root = path.join(tmp, `ws-${randomBytes(4).toString('hex')}`);
    const repoKey = `default:${repo.owner}/${repo.name}`;
    const taskId = `t-${randomBytes(4).toString('hex')}`;
    await rt.store.transact(async (tx) => {
      await tx.insert<RepositoryRecord>('repositories', repoKey, {
        repoKey,
        instanceId: 'default',
        cloneUrl: `${attacker.url}/${repo.owner}/${repo.name}.git`,
        workspacePath: workspacePathFor(root, 'default', repo.owner, repo.name),
        defaultBranch: 'main',
        status: 'active',
        registeredAt: new Date().toISOString(),
        lastFetchAt: null,
        version: 1,
        ...repo,
      });
    });
    await submitTask(rt.store, rt.runtime, taskId, repoKey);
    await grantTestLeaseIn(rt.store, { repoKey, leaseId: 'lease-1', owner: 'test', taskId });
    await rt.runtime.send(taskActorId(taskId), ev({ type: 'CLAIM', leaseId: 'lease-1' }), { by: 'test' });
    const threads: string[] = [];
    const sessions: SessionPort = {
      // Stop right after the workspace step: a fatal MCP code ends the task without a Codex turn.
      ensureThread: async (_task, cwd) => {
        threads.push(cwd);
        throw Object.assign(new Error('stop here'), { errorCode: 'mcp_command_missing' });
      },
      runTurn: async () => {
        throw new Error('not reached');
      },
      interrupt: async () => ({ confirmed: true }),
    };
    const verification: VerificationPort = {
      verify: async () => ({ result: 'failed' }),
      replyRetryPrompt: () => '',
    };
    const executor = createTaskExecutor({
      store: rt.store,
      runtime: rt.runtime,
      workspace: createWorkspaceAdapter({ root, token: TOKEN, giteaUrl: gitea.url, timeoutMs: 30_000 }),
      sessions,
      verification,
      ...(currentRepository ? { currentRepository } : {}),
    });
    await executor.run(taskId, { repoKey, leaseId: 'lease-1', owner: 'test', expiresAt: Date.now() + 60_000 }, new AbortController().signal);
    const task = (await rt.store.get<TaskRecord>('tasks', taskId))!;
    const record = (await rt.store.get<RepositoryRecord>('repositories', repoKey))!;
    const audit = await rt.store.audit();
    await rt.close();
    return { task, record, audit, threads, root };
  }

  it('a repository registered with an attacker clone_url is cloned from the configured Gitea; the attacker gets nothing', async () => {
    const before = gitea.requests.length;
    const { threads, root } = await runPrepare({ owner: 'evil', name: 'proj' });
    expect(threads).toEqual([workspacePathFor(root, 'default', 'evil', 'proj')]);
    expect(existsSync(path.join(threads[0]!, 'README.md'))).toBe(true);
    expect(attacker.requests).toEqual([]);
    // The token went to the configured Gitea (it checks it: a clone without it fails).
    expect(gitea.requests.length).toBeGreaterThan(before);
  });

  it('a renamed/transferred repository is found by its id: cloned from its new name, the record notes the move', async () => {
    const asked: number[] = [];
    const { threads, record, audit } = await runPrepare({ owner: 'oldowner', name: 'oldname', repoId: 42 } as never, async (r) => {
      asked.push(Number(r.repoId));
      return { owner: 'newowner', name: 'renamed' };
    });
    expect(asked).toEqual([42]);
    // The workspace keeps its place (the record's key), its contents come from the new name.
    expect(existsSync(path.join(threads[0]!, 'README.md'))).toBe(true);
    expect(record.currentFullName).toBe('newowner/renamed');
    expect(audit.find((e) => e.action === 'repository.moved')?.metadata).toMatchObject({ from: 'oldowner/oldname', to: 'newowner/renamed' });
    expect(attacker.requests).toEqual([]);
  });

  it('a failing clone leaves its redacted git error on the task and in the audit', async () => {
    const { task, audit, threads } = await runPrepare({ owner: 'nobody', name: 'missing' });
    expect(threads).toEqual([]);
    const lastGitError = task.lastGitError;
    expect(lastGitError?.code).toBe('git_failed');
    expect(lastGitError?.message).toMatch(/not found|repository|fatal/i);
    expect(lastGitError?.message.length).toBeLessThanOrEqual(500);
    expect(JSON.stringify(task)).not.toContain(TOKEN);
    const failed = audit.filter((e) => e.action === 'workspace.failed');
    expect(failed.length).toBeGreaterThan(0);
    expect(JSON.stringify(failed)).not.toContain(TOKEN);
  });
});
