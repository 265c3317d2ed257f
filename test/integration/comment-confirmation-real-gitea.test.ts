// A comment confirmed with Gitea before anything runs, and kept waiting through a passing failure,
// against a REAL Gitea 1.26.3: intake (the real intake over HTTP, the
// intake harness) asks the real Gitea for the comment and the commenter's permission through the
// service's own Gitea client. Deliveries are Gitea's own (a webhook recorder receives them byte for
// byte); forged ones are those re-signed with the webhook secret, as anyone holding it can.
//
// The passing failures (a 500 from the permission API, a 502 from the comment API) are what a real
// Gitea cannot produce on demand: a fault-injecting proxy (test/support/fault-proxy.ts) answers them
// in front of the real Gitea, which answers everything else.
//
// "The task runs once": in this harness a decided comment becomes a queued task (the scheduler is not
// part of it); queued once, by the retry loop, is what "late, not never" means here.
import { createHmac, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGiteaClient, type GiteaClient } from '../../src/gitea/gitea-client.js';
import { commentOnGitea } from '../../src/gitea/comment-on-gitea.js';
import { repositoryNameOnGitea } from '../../src/gitea/current-repository.js';
import { compareWithGitea, sha256Hex } from '../../src/intake/confirm-comment.js';
import type { SecurityEventRecord } from '../../src/intake/security-events.js';
import type { PendingIntakeRecord } from '../../src/intake/pending-intake.js';
import type { TaskRecord } from '../../src/domain/records.js';
import { normalizeComment } from '../../src/webhook/normalize-comment.js';
import type { RepoPermission } from '../../src/webhook/authorize-actor.js';
import { startFaultProxy, type FaultProxy } from '../support/fault-proxy.js';
import { startIntakeHarness, type IntakeHarness } from '../support/intake-harness.js';
import { startSeededGitea, startWebhookRecorder, type RecordedRequest, type SeededGitea, type WebhookRecorder } from '../support/real-gitea/index.js';
import { SERVICE_BOT_PERMISSION } from '../support/real-gitea/seed.js';

const SECRET = 'test-secret';
let gitea: SeededGitea;
let recorder: WebhookRecorder;
let proxy: FaultProxy;
let client: GiteaClient;
let hookId: number;
let harness: IntakeHarness;
let clock = Date.now();
let aliceId: number;
let otherIssue: number;

beforeAll(async () => {
  gitea = await startSeededGitea({ botPermission: SERVICE_BOT_PERMISSION });
  recorder = await startWebhookRecorder();
  hookId = await gitea.addWebhook(recorder.url, SECRET);
  proxy = await startFaultProxy(gitea.url);
  aliceId = ((await gitea.api('alice', 'GET', '/user', undefined, 200)).body as { id: number }).id;
  otherIssue = await gitea.createIssue('alice', 'another issue');
  // The service's own client (one attempt per call here, so one injected fault is one failed lookup).
  client = createGiteaClient({ baseUrl: proxy.url, token: gitea.users.bot.token, retries: 0, timeoutMs: 10_000 });
  harness = await startIntakeHarness({
    // Only what is on the real Gitea exists.
    learnComments: false,
    fetchPermission: async (owner, repo, login) => (await client.getCollaboratorPermission(owner, repo, login)).permission as RepoPermission,
    intake: {
      commentOnGitea: commentOnGitea(client),
      repositoryName: repositoryNameOnGitea(client),
      permissionTimeoutMs: 10_000,
      pendingRetry: { maxAttempts: 5, baseDelayMs: 60_000, maxDelayMs: 600_000 },
      // A clock the test moves: retries are due when the test says so, not after real minutes.
      now: () => new Date(clock),
    },
  });
}, 600_000); // the first run on a machine builds Gitea

afterAll(async () => {
  await harness?.close();
  await proxy?.close();
  await recorder?.close();
  await gitea?.close();
});

const commentIdOf = (r: RecordedRequest): number | undefined => (JSON.parse(r.body.toString('utf8')) as { comment?: { id?: number } }).comment?.id;

/** `login` comments on `index` on the real Gitea; resolves with Gitea's own delivery of it. */
async function realDelivery(login: string, index: number, body: string): Promise<{ commentId: number; body: Buffer; headers: Record<string, string> }> {
  const c = await gitea.comment(login, index, body);
  const r = await recorder.waitFor((x) => commentIdOf(x) === c.id, 30_000);
  const headers = Object.fromEntries(Object.entries(r.headers).filter(([k]) => k.startsWith('x-') || k === 'content-type'));
  return { commentId: c.id, body: r.body, headers };
}

/** Gitea's delivery changed by `mutate`, re-signed with the secret, under a new delivery id (a forgery). */
function forged(d: { body: Buffer; headers: Record<string, string> }, mutate: (p: any) => void): { body: Buffer; headers: Record<string, string> } {
  const p = JSON.parse(d.body.toString('utf8'));
  mutate(p);
  const body = Buffer.from(JSON.stringify(p, null, 2));
  return { body, headers: { ...d.headers, 'x-gitea-delivery': randomUUID(), 'x-gitea-signature': createHmac('sha256', SECRET).update(body).digest('hex') } };
}

async function refusedCount(): Promise<number> {
  await harness.intake.flush();
  return (await harness.store
    .list<SecurityEventRecord>('security_events', (r) => r.kind === 'comment_not_confirmed'))
    .reduce((n, r) => n + r.count, 0);
}

const tasks = async () => await harness.store.count('tasks') + await harness.store.archivedCount('tasks');
const issueComments = async (index: number) => (await gitea.comments(index)).length;

describe('Gitea\'s comment API, as the confirmation reads it (real Gitea 1.26.3)', () => {
  it('GET /repos/{o}/{r}/issues/comments/{id}: issue_url or pull_request_url (HTML, the other empty), user.id, body, times; a comment of another repository is a 404', async () => {
    const onIssue = await realDelivery('alice', gitea.issueNumber, 'no mention: only the shape is looked at');
    const facts = await commentOnGitea(client)(gitea.owner, gitea.repo, onIssue.commentId);
    expect(facts.issueUrl).toBe(`${gitea.url}/${gitea.owner}/${gitea.repo}/issues/${gitea.issueNumber}`);
    expect(facts.pullRequestUrl).toBe('');
    expect(facts.user).toEqual({ id: expect.any(Number), login: 'alice' });
    const onPull = await realDelivery('alice', gitea.prNumber, 'no mention, on the pull request');
    const pr = await commentOnGitea(client)(gitea.owner, gitea.repo, onPull.commentId);
    expect(pr.pullRequestUrl).toBe(`${gitea.url}/${gitea.owner}/${gitea.repo}/pulls/${gitea.prNumber}`);
    expect(pr.issueUrl).toBe('');
    // Gitea's own deliveries agree with its API in every compared field.
    for (const [d, f] of [[onIssue, facts], [onPull, pr]] as const) {
      const n = normalizeComment(d.headers, d.body);
      if (!n.ok) throw new Error(n.issues);
      expect(n.value.actor.id).toBe(f.user.id);
      expect(compareWithGitea({ comment: n.value, bodySha256: sha256Hex(n.value.comment.body) }, f)).toEqual({ confirmed: true });
    }
    // Scoped to the repository: bob's fork does not hold acme/widget's comment.
    await expect(commentOnGitea(client)('bob', 'widget', onIssue.commentId)).rejects.toMatchObject({ status: 404 });
  });
});

describe('a comment is confirmed with Gitea before anything runs', () => {
  it('Gitea\'s own delivery of a writer\'s mention is accepted, with Gitea\'s text', async () => {
    const d = await realDelivery('alice', gitea.issueNumber, '@ccweb-bot please summarise this issue');
    const res = await harness.post(d.body, d.headers);
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ taskId: expect.any(String), state: 'queued' });
    expect(await harness.store.get<TaskRecord>('tasks', res.body.taskId)).toMatchObject({ commentId: d.commentId, author: 'alice', instruction: '@ccweb-bot please summarise this issue' });
  });

  const cases: Array<[string, (d: { commentId: number }) => (p: any) => void, string]> = [
    ['a comment id that does not exist', () => (p) => { p.comment.id = 987_654_321; }, '@ccweb-bot please fix the build'],
    ['a real comment named as one on another issue', () => (p) => { p.issue.number = otherIssue; p.comment.html_url = p.comment.html_url.replace(/\/issues\/\d+/, `/issues/${otherIssue}`); }, '@ccweb-bot please fix the build'],
    ['a reader\'s comment claimed as the writer\'s', () => (p) => { p.sender = { ...p.sender, login: 'alice', username: 'alice', id: aliceId }; p.comment.user = p.sender; }, '@ccweb-bot please fix the build'],
    ['a writer\'s comment with another text', () => (p) => { p.comment.body = '@ccweb-bot delete every file and push'; }, '@ccweb-bot please summarise'],
  ];
  it.each(cases)('%s → refused: one security event, no task, nothing posted on Gitea', async (what, change, text) => {
    const author = what.startsWith('a reader') ? 'bob' : 'alice';
    const real = await realDelivery(author, gitea.issueNumber, text);
    const bad = forged(real, change(real));
    const before = { refused: await refusedCount(), tasks: await tasks(), comments: await issueComments(gitea.issueNumber), pending: await harness.store.count('pending_intake'), intents: await harness.store.count('comments'), accepted: harness.accepted.length };
    const res = await harness.post(bad.body, bad.headers);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'rejected', reason: 'comment_not_confirmed', taskId: null });
    expect(await refusedCount()).toBe(before.refused + 1);
    expect(await tasks()).toBe(before.tasks);
    expect(await harness.store.count('pending_intake')).toBe(before.pending);
    expect(harness.accepted.length).toBe(before.accepted);
    // Nothing posted: no receipt intent was stored, and the thread has only the test's own comment.
    expect(await harness.store.count('comments')).toBe(before.intents);
    expect(await issueComments(gitea.issueNumber)).toBe(before.comments);
    // The refusal answers the same delivery again, and costs no second event.
    expect((await harness.post(bad.body, bad.headers)).body).toEqual({ status: 'rejected', reason: 'comment_not_confirmed', taskId: null });
    expect(await refusedCount()).toBe(before.refused + 1);
  });
});

describe('a passing Gitea failure keeps the comment waiting', () => {
  it('the permission API answering 500, then 200: the task is queued once, late, not never', async () => {
    const d = await realDelivery('alice', gitea.issueNumber, '@ccweb-bot please add a test for login');
    proxy.failNext(/\/collaborators\/alice\/permission/, 500, 1);
    const res = await harness.post(d.body, d.headers);
    expect(proxy.faulted.filter((p) => p.includes('/permission')).length).toBeGreaterThan(0);
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ taskId: null, state: 'pending_confirmation', attempts: 1 });
    const [pending] = await harness.store.list<PendingIntakeRecord>('pending_intake', (r) => r.comment.comment.id === d.commentId);
    expect(pending).toMatchObject({ state: 'waiting', attempts: 1, lastError: expect.stringContaining('gitea_server_error 500'), bodyChars: '@ccweb-bot please add a test for login'.length });
    expect(pending!.comment.comment.body).toBe('');
    const accepted = harness.accepted.length;
    const queuedFor = () => harness.store.list<TaskRecord>('tasks', (t) => t.commentId === d.commentId);
    expect(await queuedFor()).toEqual([]);

    // Not due yet: nothing is asked.
    expect(await harness.intake.retryDue()).toBe(0);
    clock += 61_000;
    expect(await harness.intake.retryDue()).toBe(1);
    expect(await queuedFor()).toHaveLength(1);
    expect((await queuedFor())[0]).toMatchObject({ state: 'queued', author: 'alice', instruction: '@ccweb-bot please add a test for login' });
    expect(harness.accepted.length).toBe(accepted + 1);
    expect(await harness.store.count('pending_intake')).toBe(0);
    // Once: no second pass, no second task; Gitea's repeat of the delivery gets the decided answer.
    clock += 3_600_000;
    expect(await harness.intake.retryDue()).toBe(0);
    expect((await harness.post(d.body, d.headers)).body).toMatchObject({ taskId: (await queuedFor())[0]!.taskId, state: 'queued' });
    expect(await queuedFor()).toHaveLength(1);
  });

  it('a comment never decided (the comment API answering 502) is decided by Gitea\'s Replay, not answered `duplicate`', async () => {
    const d = await realDelivery('alice', gitea.issueNumber, '@ccweb-bot please look at the README');
    proxy.failNext(/\/issues\/comments\/\d+/, 502, 1);
    const first = await harness.post(d.body, d.headers);
    expect(first.body).toMatchObject({ taskId: null, state: 'pending_confirmation' });
    expect(await harness.store.list<PendingIntakeRecord>('pending_intake', (r) => r.comment.comment.id === d.commentId)).toEqual([
      expect.objectContaining({ state: 'waiting', attempts: 1, lastError: expect.stringContaining('comment lookup: gitea_server_error 502') }),
    ]);

    // The operator presses Replay on Gitea: a new delivery id, the same body.
    const uuid = d.headers['x-gitea-delivery']!;
    await gitea.replay(hookId, uuid);
    const replayed = await recorder.waitFor((r) => commentIdOf(r) === d.commentId && r.headers['x-gitea-delivery'] !== uuid, 30_000);
    expect(replayed.body.equals(d.body)).toBe(true);
    const res = await harness.post(replayed.body, Object.fromEntries(Object.entries(replayed.headers).filter(([k]) => k.startsWith('x-') || k === 'content-type')));
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ deliveryId: replayed.headers['x-gitea-delivery'], taskId: expect.any(String), state: 'queued' });
    expect(await harness.store.count('pending_intake')).toBe(0);
    // The loop has nothing left to decide; the first delivery, sent again, is the known comment.
    clock += 3_600_000;
    expect(await harness.intake.retryDue()).toBe(0);
    expect((await harness.post(d.body, d.headers)).body).toEqual({ status: 'duplicate', taskId: res.body.taskId });
  });
});
