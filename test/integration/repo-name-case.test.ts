// Repository names compare case-insensitively, as on Gitea. The real intake
// over HTTP and the operators' API on one store: a signed payload naming `ALICE/Widgets` for the
// stored `default:alice/widgets` (the fixture's repository, Gitea id 1) is that repository — its
// disabled status, its one record in /overview, its keys on the task — and the control API finds a
// repository whatever case its key is given in. Existing mixed-case keys are kept, not lowercased.
import { afterEach, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { createApp } from '../../src/http/create-app.js';
import { createControlRouter } from '../../src/api/control-router.js';
import { createUsageRouter } from '../../src/api/usage-router.js';
import type { RepositoryRecord, SessionRecord, TaskRecord } from '../../src/domain/records.js';
import { startIntakeHarness, type HarnessOptions, type IntakeHarness } from '../support/intake-harness.js';
import { mutatedDelivery, withFreshDeliveryId } from '../support/webhook-fixtures.js';
import { ADMIN_TOKEN } from '../support/api-harness.js';
import { writeBeforeFirstTransaction } from '../support/interleaved-store.js';
import type { Store } from '../../src/store/types.js';

const CANONICAL = 'default:alice/widgets';

/** A fixture comment naming its repository `owner/name` (same Gitea id 1), under a fresh delivery id. */
function comment(owner: string, name: string, commentId: number, updatedAt?: string): { body: Buffer; headers: Record<string, string> } {
  const d = mutatedDelivery('issue_comment_created_on_issue', (p) => {
    p.comment.id = commentId;
    if (updatedAt) p.comment.updated_at = updatedAt;
    p.repository.owner.login = owner;
    p.repository.name = name;
    p.repository.full_name = `${owner}/${name}`;
    p.repository.clone_url = `https://gitea.example.com/${owner}/${name}.git`;
  });
  return withFreshDeliveryId(d);
}

let intake: IntakeHarness | undefined;
let server: Server | undefined;

afterEach(async () => {
  server?.closeAllConnections();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  await intake?.close();
  intake = undefined;
  server = undefined;
});

/** `apiStore` gives the store the operators' API works on (default: the intake's). */
async function start(options: HarnessOptions = {}, apiStore: (h: IntakeHarness) => Store = (h) => h.store) {
  intake = await startIntakeHarness(options);
  const store = apiStore(intake);
  const app = createApp({
    routers: [
      createControlRouter({ store, runtime: intake.runtime, adminToken: ADMIN_TOKEN }),
      createUsageRouter({ store, adminToken: ADMIN_TOKEN, limits: {} }),
    ],
  });
  server = createServer(app.callback());
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  const api = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/gitea-workflow`;
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${api}${path}`, {
      method,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    return { status: res.status, body: (await res.json()) as any };
  };
  return { h: intake, call };
}

const control = (reason: string) => ({ requestId: randomUUID(), operator: 'alice', reason });
const repoPath = (repoKey: string) => `/repos/${encodeURIComponent(repoKey)}`;

function repository(repoKey: string, owner: string, name: string, extra: Partial<RepositoryRecord> = {}): RepositoryRecord {
  return {
    repoKey,
    instanceId: 'default',
    owner,
    name,
    repoId: 1,
    cloneUrl: `https://gitea.example.com/${owner}/${name}.git`,
    workspacePath: `/w/${owner}/${name}`,
    defaultBranch: 'main',
    status: 'active',
    registeredAt: '2026-01-01T00:00:00.000Z',
    lastFetchAt: null,
    version: 1,
    ...extra,
  };
}

describe('repository names compare case-insensitively', () => {
  it('a disabled repository stays disabled for a payload in another case; a task it creates uses the stored keys; /overview lists one repository', async () => {
    const { h, call } = await start();
    // Registered by Gitea's own payload (its canonical name), then disabled by an operator.
    expect((await h.post(...post(comment('alice', 'widgets', 920001)))).status).toBe(202);
    expect((await call('POST', `${repoPath(CANONICAL)}/disable`, control('noisy'))).body).toMatchObject({ status: 'disabled', repoKey: CANONICAL });

    const variant = comment('ALICE', 'Widgets', 920002);
    expect(await h.post(variant.body, variant.headers)).toMatchObject({ status: 409, body: { error: 'repository_disabled' } });
    // The thread's one disabled notice of the day is a task that never runs, under the stored keys.
    expect(await h.store.count('tasks')).toBe(2);
    const notice = (await h.store.list<TaskRecord>('tasks')).find((t) => t.state === 'rejected')!;
    expect(notice.repoKey).toBe(CANONICAL);
    const refused = (await h.store.audit()).filter((e) => e.action === 'webhook.repository_disabled');
    expect(refused.map((e) => e.metadata?.['repoKey'])).toEqual([CANONICAL]);

    // The control API finds the repository in any case, and answers with its stored key.
    expect((await call('POST', `${repoPath('default:Alice/WIDGETS')}/enable`, control('calm'))).body).toMatchObject({ status: 'active', repoKey: CANONICAL, changed: true });

    const accepted = await h.post(...post(comment('ALICE', 'Widgets', 920003)));
    expect(accepted.status).toBe(202);
    const task = (await h.store.get<TaskRecord>('tasks', accepted.body.taskId))!;
    expect(task).toMatchObject({ repoKey: CANONICAL, resourceKey: `${CANONICAL}:issue:7`, sessionKey: `${CANONICAL}:issue:7`, owner: 'alice', repo: 'widgets' });
    // Write access is asked of Gitea under the stored name too (Gitea would find either).
    expect(h.permissionCalls.at(-1)).toEqual(['alice', 'widgets', expect.any(String)]);
    expect(await h.store.get<SessionRecord>('sessions', `${CANONICAL}:issue:7`)).toBeDefined();

    const overview = await call('GET', '/overview');
    expect(overview.body.repos.map((r: { repoKey: string; queued: number }) => [r.repoKey, r.queued])).toEqual([[CANONICAL, 2]]);
    expect((await h.store.list('repositories')).map((r) => r['repoKey'])).toEqual([CANONICAL]);
    expect(await h.store.count('sessions') + await h.store.archivedCount('sessions')).toBe(1);
  });

  it.each([
    ['disable', (key: string) => `${repoPath(key)}/disable`, {}],
    ['agent-tools', (key: string) => `${repoPath(key)}/agent-tools`, { groups: [] }],
    ['limits', (key: string) => `${repoPath(key)}/limits`, { limits: { taskTurns: 3 } }],
  ] as const)('%s finds a repository registered after the request began, in another letter case', async (_name, path, extra) => {
    // Intake registers the repository between the request's first read and its transaction.
    const { h, call } = await start({}, (h) => writeBeforeFirstTransaction(h.store, async () => expect((await h.post(...post(comment('alice', 'widgets', 920101)))).status).toBe(202)));
    const answer = await call('POST', path('default:Alice/Widgets'), { ...control('racing'), ...extra });
    expect(answer).toMatchObject({ status: 200, body: { repoKey: CANONICAL } });
    expect((await h.store.list<RepositoryRecord>('repositories')).map((r) => r.repoKey)).toEqual([CANONICAL]);
  });

  it('the same comment under another letter case and a new delivery id is a duplicate, not a second task', async () => {
    const { h } = await start();
    const updatedAt = '2026-07-20T09:15:42Z';
    const first = await h.post(...post(comment('alice', 'widgets', 920101, updatedAt)));
    expect(first.status).toBe(202);
    const again = await h.post(...post(comment('Alice', 'WIDGETS', 920101, updatedAt)));
    expect(again).toMatchObject({ status: 200, body: { status: 'duplicate', taskId: first.body.taskId } });
    expect(await h.store.count('tasks')).toBe(1);
  });

  it('existing keys in mixed case keep their form: a stored default:Alice/Widgets is found by either case and never lowercased', async () => {
    const { h, call } = await start();
    // Gitea keeps a name's case; a repository registered before this change is keyed as it was sent.
    const stored = 'default:Alice/Widgets';
    await h.store.transact((tx) => tx.insert('repositories', stored, repository(stored, 'Alice', 'Widgets')));

    for (const [owner, name, id] of [['Alice', 'Widgets', 920201], ['alice', 'widgets', 920202]] as const) {
      const res = await h.post(...post(comment(owner, name, id)));
      expect(res.status).toBe(202);
      expect(await h.store.get<TaskRecord>('tasks', res.body.taskId)).toMatchObject({ repoKey: stored, resourceKey: `${stored}:issue:7`, owner: 'Alice', repo: 'Widgets' });
    }
    expect((await h.store.list('repositories')).map((r) => r['repoKey'])).toEqual([stored]);
    expect(await h.auditActions()).not.toContain('repository.register');

    // Limits set under a lower-case key land on the stored key, the one intake's quota check reads.
    const limits = await call('POST', `${repoPath('default:alice/widgets')}/limits`, { ...control('cap'), limits: { repoTokensPerDay: 1000 } });
    expect(limits).toMatchObject({ status: 200, body: { repoKey: stored } });
    expect(await h.store.get('usage', `limits:${stored}`)).toMatchObject({ limits: { repoTokensPerDay: 1000 } });
    expect((await call('POST', `${repoPath('default:nobody/widgets')}/limits`, { ...control('x'), limits: { repoTokensPerDay: 1 } })).status).toBe(404);
  });

  it('two case variants racing to register their repository make one record (resolved again inside the write transaction)', async () => {
    // Both deliveries pass the first resolution while nothing is stored, then wait in the permission
    // lookup; only the write transaction can see that the other one registered the repository.
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let waiting = 0;
    const { h } = await start({
      fetchPermission: async () => {
        waiting += 1;
        if (waiting === 2) release();
        await gate;
        return 'write';
      },
    });
    const [a, b] = await Promise.all([h.post(...post(comment('alice', 'widgets', 920301))), h.post(...post(comment('ALICE', 'WIDGETS', 920302)))]);
    expect([a.status, b.status]).toEqual([202, 202]);
    const repos = await h.store.list<RepositoryRecord>('repositories');
    expect(repos).toHaveLength(1);
    const key = repos[0]!.repoKey;
    expect((await h.store.list<TaskRecord>('tasks')).map((t) => [t.repoKey, t.resourceKey])).toEqual([
      [key, `${key}:issue:7`],
      [key, `${key}:issue:7`],
    ]);
  });

  it("a new repository is registered under Gitea's letter case for its id; a lookup that fails leaves the payload's name; one that names another repository refuses the comment", async () => {
    // The lookup is a function port here (the real Gitea one: repo-name-case-real-gitea.test.ts):
    // these cases inject what the real Gitea cannot be made to answer for a real repository.
    const asked: number[] = [];
    const answers: Array<() => Promise<{ owner: string; name: string }>> = [
      async () => ({ owner: 'alice', name: 'widgets' }),
      async () => {
        throw new Error('gitea down');
      },
      async () => ({ owner: 'alice', name: 'renamed' }),
    ];
    const { h } = await start({ intake: { repositoryName: (id) => (asked.push(id), answers.shift()!()) } });
    // A comment without a mention (most comments) is ignored without asking anything.
    const quiet = mutatedDelivery('issue_comment_created_on_issue', (p) => {
      p.comment.id = 920500;
      p.comment.body = 'no mention here';
      p.repository.owner.login = 'ALICE';
      p.repository.full_name = 'ALICE/widgets';
    });
    expect((await h.post(quiet.body, quiet.headers)).body).toMatchObject({ status: 'ignored' });
    expect(asked).toEqual([]);
    const first = await h.post(...post(comment('ALICE', 'Widgets', 920501)));
    expect(await h.store.get<TaskRecord>('tasks', first.body.taskId)).toMatchObject({ repoKey: CANONICAL, owner: 'alice', repo: 'widgets' });
    expect((await h.store.get<RepositoryRecord>('repositories', CANONICAL))?.workspacePath).toMatch(/alice[/\\]widgets$/);
    // Stored now: no more lookups for it, in any case.
    await h.post(...post(comment('Alice', 'WIDGETS', 920502)));
    expect(asked).toEqual([1]);

    const failed = await h.post(...post(comment('Bob', 'Gadget', 920503)));
    expect(await h.store.get<TaskRecord>('tasks', failed.body.taskId)).toMatchObject({ repoKey: 'default:Bob/Gadget' });
    // The payload's repository id is not its repository's (another one on Gitea) → refused.
    const other = await h.post(...post(comment('Carol', 'Thing', 920504)));
    expect(other.body).toEqual({ status: 'rejected', reason: 'comment_not_confirmed', taskId: null });
    expect(await h.store.get('repositories', 'default:Carol/Thing')).toBeUndefined();
    expect(asked).toEqual([1, 1, 1]);
  });

  it('case variants an older version stored as second records: disable/enable switches them all, and a new comment goes to the first registered', async () => {
    const { h, call } = await start();
    const legacy = 'default:ALICE/Widgets';
    await h.store.transact(async (tx) => {
      await tx.insert('repositories', CANONICAL, repository(CANONICAL, 'alice', 'widgets'));
      await tx.insert('repositories', legacy, repository(legacy, 'ALICE', 'Widgets', { registeredAt: '2026-02-01T00:00:00.000Z' }));
    });
    const off = await call('POST', `${repoPath(legacy)}/disable`, control('stop it'));
    expect(off.body).toMatchObject({ repoKey: legacy, status: 'disabled' });
    expect((await h.store.list<RepositoryRecord>('repositories')).map((r) => r.status)).toEqual(['disabled', 'disabled']);
    expect((await h.post(...post(comment('alice', 'widgets', 920401)))).status).toBe(409);

    await call('POST', `${repoPath(CANONICAL)}/enable`, control('ok'));
    expect((await h.store.list<RepositoryRecord>('repositories')).map((r) => r.status)).toEqual(['active', 'active']);
    const res = await h.post(...post(comment('ALICE', 'Widgets', 920402)));
    expect(res.status).toBe(202);
    expect(await h.store.get<TaskRecord>('tasks', res.body.taskId)).toMatchObject({ repoKey: CANONICAL });

    // A comment that became a task under the old variant key, replayed in that case: still a duplicate
    // (its trigger is under the variant's key, the comment now resolves to the canonical one).
    const updatedAt = '2026-07-20T09:15:42Z';
    const oldTrigger = `${legacy}:comment:920403:created:${updatedAt}`;
    await h.store.transact((tx) => tx.insert('comment_triggers', oldTrigger, { triggerKey: oldTrigger, deliveryKey: 'default:old', taskId: 'gitea-task-old', createdAt: updatedAt }));
    expect(await h.post(...post(comment('ALICE', 'Widgets', 920403, updatedAt)))).toMatchObject({ status: 200, body: { status: 'duplicate', taskId: 'gitea-task-old' } });
  });
});

function post(d: { body: Buffer; headers: Record<string, string> }): [Buffer, Record<string, string>] {
  return [d.body, d.headers];
}
