// Webhook intake end to end within the HTTP layer: byte-exact Gitea fixtures with real signatures,
// over loopback HTTP, into a real durable store and actor runtime. Every test checks what was
// stored and that nothing else was (records per collection, audit actions).
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import type { TaskEvent } from '../../machines/task-lifecycle.js';
import { createStore } from '../../src/store/index.js';
import type { Store, Tx } from '../../src/store/types.js';
import { STORE_INDEXES, type CommentRecord, type DeliveryRecord, type RepositoryRecord, type SessionRecord, type TaskRecord } from '../../src/domain/records.js';
import { taskIdFor } from '../../src/webhook/normalize-comment.js';
import { taskActorId } from '../../src/tasks/task-actor.js';
import { formatReceiptMarker } from '../../src/domain/marker.js';
import {
  ACCEPT_AUDIT,
  ONE_ACCEPTED_TASK,
  expectedCounts,
  startIntakeHarness,
  type HarnessOptions,
  type IntakeHarness,
} from '../support/intake-harness.js';
import {
  FIXTURE_SECRET,
  formEncode,
  loadFixture,
  signedHeaders,
  withoutHeader,
  type FixtureName,
} from '../support/webhook-fixtures.js';

let h: IntakeHarness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

async function start(options: HarnessOptions = {}): Promise<IntakeHarness> {
  h = await startIntakeHarness(options);
  return h;
}

/** A fixture re-serialised after `mutate`, signed, under a fresh delivery UUID (or the one given). */
function delivery(
  name: FixtureName,
  options: { mutate?: (p: any) => void; deliveryId?: string; secret?: string } = {},
): { body: Buffer; headers: Record<string, string>; deliveryId: string } {
  const fixture = loadFixture(name);
  const body = options.mutate
    ? Buffer.from(JSON.stringify((() => { const p = JSON.parse(fixture.body.toString('utf8')); options.mutate!(p); return p; })(), null, 2), 'utf8')
    : fixture.body;
  const deliveryId = options.deliveryId ?? randomUUID();
  const ids = { 'X-Gitea-Delivery': deliveryId, 'X-Gogs-Delivery': deliveryId, 'X-GitHub-Delivery': deliveryId };
  return { body, headers: signedHeaders(fixture.headers, body, options.secret ?? FIXTURE_SECRET, ids), deliveryId };
}

/** The fixture exactly as Gitea sent it, headers included. */
function exact(name: FixtureName): { body: Buffer; headers: Record<string, string>; deliveryId: string } {
  const f = loadFixture(name);
  return { ...f, deliveryId: f.headers['X-Gitea-Delivery']! };
}

function comment(body: string, id = 5000 + Math.floor(Math.random() * 1e6)) {
  return (p: any) => {
    p.comment.body = body;
    p.comment.id = id;
  };
}

async function task(harness: IntakeHarness, taskId: string): Promise<TaskRecord> {
  return (await harness.store.get<TaskRecord>('tasks', taskId))!;
}

describe('202: a verified, first-time comment becomes one durable queued task', () => {
  it('stores delivery, trigger, repository, session, task, actor and receipt intent in one transaction', async () => {
    const harness = await start();
    const d = exact('issue_comment_created_on_issue');
    const commitsBefore = harness.store.stats().commits;
    const res = await harness.post(d.body, d.headers);
    const taskId = taskIdFor(`default:${d.deliveryId}`);

    expect(res.status).toBe(202);
    expect(res.body).toEqual({ deliveryId: d.deliveryId, taskId, state: 'queued' });
    expect(harness.store.stats().commits - commitsBefore).toBe(1);
    expect(await harness.counts()).toEqual(expectedCounts(ONE_ACCEPTED_TASK));
    expect(await harness.auditActions()).toEqual(ACCEPT_AUDIT);
    expect(harness.accepted).toEqual([taskId]);

    const payload = JSON.parse(d.body.toString('utf8'));
    const t = await task(harness, taskId);
    expect(t).toMatchObject({
      taskId,
      deliveryKey: `default:${d.deliveryId}`,
      repoKey: 'default:alice/widgets',
      resourceKey: 'default:alice/widgets:issue:7',
      sessionKey: 'default:alice/widgets:issue:7',
      resource: { kind: 'issue', number: 7 },
      owner: 'alice',
      repo: 'widgets',
      commentId: 3,
      author: 'bob',
      instruction: payload.comment.body,
      refs: null,
      state: 'queued',
      stateVersion: 2,
      attempt: 0,
    });
    const accept = (await harness.store.audit()).find((e) => e.action === 'webhook.accept')!;
    expect(t.queueSeq).toBe(accept.seq);
    expect(accept).toMatchObject({ taskId, deliveryId: d.deliveryId, actor: 'gitea:user:bob' });
    expect((await harness.runtime.stateOf(taskActorId(taskId)))?.state).toBe('queued');

    const del = (await harness.store.get<DeliveryRecord>('webhook_deliveries', `default:${d.deliveryId}`))!;
    expect(del).toMatchObject({ status: 'accepted', taskId, signatureValid: true, normalized: true, eventType: 'issue_comment', reason: null });
    expect(del.response).toEqual({ status: 202, body: res.body });
    expect(del.payloadHash).toBe('sha256:15591085bd76e376bd72d5e47d3da49f9a0f6f1c2e4430fa953532a3c456edb1');
    expect(Date.parse(del.expiresAt) - Date.parse(del.receivedAt)).toBe(30 * 24 * 3600 * 1000);

    const repo = (await harness.store.get<RepositoryRecord>('repositories', 'default:alice/widgets'))!;
    expect(repo).toMatchObject({ status: 'active', version: 1, owner: 'alice', name: 'widgets', defaultBranch: 'main' });
    expect(repo.workspacePath).toBe(`${harness.workspaceRoot}/default/alice/widgets`);
    expect(repo.cloneUrl).not.toMatch(/@/); // no credentials in the stored URL
    expect(await harness.store.get<SessionRecord>('sessions', 'default:alice/widgets:issue:7')).toMatchObject({
      status: 'active',
      threadId: null,
      // 0: the session actor takes the record over with its first projection (CAS on version).
      version: 0,
      kind: 'issue',
      number: 7,
    });
    const receipt = (await harness.store.get<CommentRecord>('comments', `${taskId}:status:received`))!;
    expect(receipt).toMatchObject({ kind: 'status', status: 'pending', taskId, marker: formatReceiptMarker(`${taskId}:status:received`) });
    expect(await harness.store.get('comment_triggers', 'default:alice/widgets:comment:3:created:2026-12-01T11:12:17Z')).toMatchObject({ taskId });
  });

  it('the 202 is durable: a reopened store holds the queued task', async () => {
    const harness = await start();
    const d = exact('issue_comment_created_on_issue');
    const res = await harness.post(d.body, d.headers);
    expect(res.status).toBe(202);
    await harness.close(false);
    h = undefined;
    const reopened = createStore({ dir: `${harness.dir}/store`, indexes: STORE_INDEXES });
    await reopened.open();
    try {
      expect((await reopened.get<TaskRecord>('tasks', res.body.taskId))?.state).toBe('queued');
      expect(await reopened.get('webhook_deliveries', `default:${d.deliveryId}`)).toBeDefined();
    } finally {
      await reopened.close();
    }
  });

  it('a PR conversation comment carries the PR refs and kind pull_request', async () => {
    const harness = await start();
    const d = exact('pull_request_comment_created');
    const res = await harness.post(d.body, d.headers);
    expect(res.status).toBe(202);
    const t = await task(harness, res.body.taskId);
    expect(t.resource).toEqual({ kind: 'pull_request', number: t.resource.number });
    expect(t.resourceKey).toBe(`default:alice/widgets:pull_request:${t.resource.number}`);
    expect(t.refs).not.toBeNull();
    expect(t.instruction).toBe('@ccweb-bot please fix the lint errors & the failing test');
    expect(await harness.counts()).toEqual(expectedCounts(ONE_ACCEPTED_TASK));
  });

  it('a PR comment from Gitea < 1.23 (no pull_request object) is queued with refs null', async () => {
    const harness = await start();
    const d = delivery('pull_request_comment_created', { mutate: (p) => delete p.pull_request });
    const res = await harness.post(d.body, d.headers);
    expect(res.status).toBe(202);
    expect((await task(harness, res.body.taskId)).refs).toBeNull();
  });

  it('a second comment on a known repository and resource reuses both records', async () => {
    const harness = await start();
    await harness.post(exact('issue_comment_created_on_issue').body, exact('issue_comment_created_on_issue').headers);
    const d = delivery('issue_comment_created_on_issue', { mutate: comment('@ccweb-bot and the docs too', 4099) });
    const res = await harness.post(d.body, d.headers);
    expect(res.status).toBe(202);
    expect(await harness.counts()).toEqual(
      expectedCounts({ webhook_deliveries: 2, comment_triggers: 2, repositories: 1, sessions: 1, tasks: 2, actors: 2, comments: 2 }),
    );
    expect(await harness.auditActions()).toEqual([...ACCEPT_AUDIT, 'webhook.accept', 'task.transition', 'task.transition']);
    const [a, b] = await harness.store.list<TaskRecord>('tasks');
    expect(b!.queueSeq).toBeGreaterThan(a!.queueSeq);
  });

  it('form content type: payload=<urlencoded JSON>, signed over the JSON', async () => {
    const harness = await start();
    const f = exact('issue_comment_created_on_issue');
    const body = formEncode(f.body);
    const headers = { ...f.headers, 'Content-Type': 'application/x-www-form-urlencoded' };
    const res = await harness.post(body, headers);
    expect(res.status).toBe(202);
    expect((await task(harness, res.body.taskId)).instruction).toBe(JSON.parse(f.body.toString('utf8')).comment.body);
    expect(await harness.counts()).toEqual(expectedCounts(ONE_ACCEPTED_TASK));
  });

  it('X-Hub-Signature-256 alone is enough', async () => {
    const harness = await start();
    const f = exact('issue_comment_created_on_issue');
    const res = await harness.post(f.body, withoutHeader(withoutHeader(f.headers, 'X-Gitea-Signature'), 'X-Gogs-Signature'));
    expect(res.status).toBe(202);
  });

  it('secret rotation: the old and the new secret are accepted, a revoked one is not', async () => {
    const harness = await start({ secrets: ['rotated-secret-2026', FIXTURE_SECRET] });
    const old = exact('issue_comment_created_on_issue');
    expect((await harness.post(old.body, old.headers)).status).toBe(202);
    const fresh = delivery('issue_comment_created_on_issue', { mutate: comment('@ccweb-bot new secret', 4100), secret: 'rotated-secret-2026' });
    expect((await harness.post(fresh.body, fresh.headers)).status).toBe(202);
    const revoked = delivery('issue_comment_created_on_issue', { mutate: comment('@ccweb-bot revoked', 4101), secret: 'revoked-secret' });
    expect((await harness.post(revoked.body, revoked.headers)).status).toBe(401);
    expect(await harness.store.count('tasks')).toBe(2);
    expect(await harness.store.list<{ kind: string; count: number }>('security_events')).toMatchObject([{ kind: 'invalid_signature', count: 1 }]);
  });

  it('unicode, RTL and bidi control characters are stored byte-exact as the instruction', async () => {
    const harness = await start();
    const text = '@ccweb-bot 请修复构建 \u202Eevil.exe\u202C مرحبا بالعالم \u200F\u2066x\u2069 🎉 e\u0301 <tag> & "q" \\ \r\n\u0000end';
    const d = delivery('issue_comment_created_on_issue', { mutate: comment(text, 4200) });
    const res = await harness.post(d.body, d.headers);
    expect(res.status).toBe(202);
    const stored = (await task(harness, res.body.taskId)).instruction;
    expect(stored).toBe(text);
    expect(Buffer.from(stored, 'utf8').equals(Buffer.from(text, 'utf8'))).toBe(true);
  });

  it("Gitea's escaped <>& in the fixture bytes arrive unescaped in the instruction", async () => {
    const harness = await start();
    const d = delivery('issue_comment_created_on_issue', { mutate: comment('@ccweb-bot compare a<b && c>d', 4201) });
    const gitea = Buffer.from(d.body.toString('utf8').replace(/</g, '\\u003c').replace(/>/g, '\\u003e').replace(/&/g, '\\u0026'));
    const res = await harness.post(gitea, signedHeaders(d.headers, gitea));
    expect(res.status).toBe(202);
    expect((await task(harness, res.body.taskId)).instruction).toBe('@ccweb-bot compare a<b && c>d');
  });
});

describe('200: repeats and duplicates return the original result', () => {
  it('the same delivery again answers 200 with the original body and stores only an audit event', async () => {
    const harness = await start();
    const d = exact('issue_comment_created_on_issue');
    const first = await harness.post(d.body, d.headers);
    const again = await harness.post(d.body, d.headers);
    expect(again.status).toBe(200);
    expect(again.body).toEqual(first.body);
    expect(await harness.counts()).toEqual(expectedCounts(ONE_ACCEPTED_TASK));
    expect(await harness.auditActions()).toEqual([...ACCEPT_AUDIT, 'webhook.duplicate_delivery']);
    expect(harness.accepted).toHaveLength(1);
  });

  it('the same delivery on two nodes at once: the one whose insert meets the other\'s row runs its transaction again and answers 200 as a duplicate, never 503', async () => {
    // The moment a real race between two nodes reaches (PostgreSQL reads committed rows only) but a
    // test cannot aim at: the first run of this post's transaction does not see the delivery and the
    // comment trigger the other node committed, and inserts them again.
    let hiding = false;
    const hidden = (collection: string) => hiding && (collection === 'webhook_deliveries' || collection === 'comment_triggers');
    const hide = <T extends object>(target: T): T =>
      new Proxy(target, {
        get(t, prop) {
          const value: unknown = Reflect.get(t, prop, t);
          if (prop === 'get') return async (c: string, k: string) => (hidden(c) ? undefined : (value as Store['get']).call(t, c as never, k));
          if (prop === 'has') return async (c: string, k: string) => (hidden(c) ? false : (value as Tx['has']).call(t, c as never, k));
          if (prop === 'transact')
            return async (fn: (tx: Tx) => Promise<unknown>) => {
              try {
                return await (value as Store['transact']).call(t, (tx: Tx) => fn(hide(tx)));
              } finally {
                hiding = false;
              }
            };
          return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(t) : value;
        },
      });
    const harness = await start({ intakeStore: (store) => hide(store) });
    const d = exact('issue_comment_created_on_issue');
    const first = await harness.post(d.body, d.headers);
    hiding = true;
    const again = await harness.post(d.body, d.headers);
    expect(again.status).toBe(200);
    expect(again.body).toEqual(first.body);
    expect(harness.accepted).toHaveLength(1);
    expect(await harness.counts()).toEqual(expectedCounts(ONE_ACCEPTED_TASK));
  });

  it('on a node of several, the task records the node that accepted it (the claim preference reads it)', async () => {
    const harness = await start({ intake: { nodeId: 'node-x' } });
    const d = exact('issue_comment_created_on_issue');
    const res = await harness.post(d.body, d.headers);
    expect((await harness.store.get<TaskRecord>('tasks', res.body.taskId))?.acceptedBy).toBe('node-x');
  });

  it('Replay (same body, new delivery UUID) is a duplicate of the original task', async () => {
    const harness = await start();
    const original = exact('issue_comment_created_on_issue');
    const first = await harness.post(original.body, original.headers);
    const replayId = randomUUID();
    const replay = {
      ...original.headers,
      'X-Gitea-Delivery': replayId,
      'X-Gogs-Delivery': replayId,
      'X-GitHub-Delivery': replayId,
    };
    const res = await harness.post(original.body, replay);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'duplicate', taskId: first.body.taskId });
    expect(await harness.counts()).toEqual(expectedCounts({ ...ONE_ACCEPTED_TASK, webhook_deliveries: 2 }));
    expect(await harness.store.get<DeliveryRecord>('webhook_deliveries', `default:${replayId}`)).toMatchObject({
      status: 'duplicate',
      reason: 'duplicate_comment',
      taskId: first.body.taskId,
    });
    expect(await harness.auditActions()).toEqual([...ACCEPT_AUDIT, 'webhook.duplicate_comment']);
    // And the replay's own repeat answers with the replay's first answer.
    const again = await harness.post(original.body, replay);
    expect(again).toMatchObject({ status: 200, body: res.body });
  });

  // A slow permission API keeps all 50 requests in flight between their pre-checks and their final
  // transaction, so only the re-check inside that transaction can keep them apart.
  const slowApi: HarnessOptions = { fetchPermission: () => new Promise((r) => setTimeout(() => r('write'), 30)) };
  const noSignedPermissions = (p: any) => {
    delete p.repository.permissions;
  };

  it('50 concurrent identical posts yield exactly one task (signed permissions)', async () => {
    const harness = await start();
    const d = exact('issue_comment_created_on_issue');
    const results = await Promise.all(Array.from({ length: 50 }, () => harness.post(d.body, d.headers)));
    expect(results.filter((r) => r.status === 202)).toHaveLength(1);
    expect(results.filter((r) => r.status === 200)).toHaveLength(49);
    expect(await harness.counts()).toEqual(expectedCounts(ONE_ACCEPTED_TASK));
  });

  it('50 concurrent identical posts yield exactly one task, all racing past a slow permission check', async () => {
    const harness = await start(slowApi);
    const d = delivery('issue_comment_created_on_issue', { mutate: noSignedPermissions });
    const results = await Promise.all(Array.from({ length: 50 }, () => harness.post(d.body, d.headers)));
    const statuses = results.map((r) => r.status).sort();
    expect(statuses.filter((s) => s === 202)).toHaveLength(1);
    expect(statuses.filter((s) => s === 200)).toHaveLength(49);
    const taskId = taskIdFor(`default:${d.deliveryId}`);
    for (const r of results) expect(r.body).toEqual({ deliveryId: d.deliveryId, taskId, state: 'queued' });
    expect(await harness.counts()).toEqual(expectedCounts(ONE_ACCEPTED_TASK));
    const actions = await harness.auditActions();
    expect(actions.filter((a) => a === 'webhook.duplicate_delivery')).toHaveLength(49);
    expect(actions.filter((a) => a !== 'webhook.duplicate_delivery')).toEqual(ACCEPT_AUDIT);
    expect(harness.permissionCalls.length).toBeGreaterThan(1); // they really raced
  });

  it('50 concurrent Replays of one comment (50 delivery UUIDs) yield exactly one task', async () => {
    const harness = await start(slowApi);
    const f = delivery('issue_comment_created_on_issue', { mutate: noSignedPermissions });
    const results = await Promise.all(
      Array.from({ length: 50 }, () => {
        const id = randomUUID();
        return harness.post(f.body, { ...f.headers, 'X-Gitea-Delivery': id });
      }),
    );
    const winners = results.filter((r) => r.status === 202);
    expect(winners).toHaveLength(1);
    const dups = results.filter((r) => r.status === 200);
    expect(dups).toHaveLength(49);
    for (const r of dups) expect(r.body).toEqual({ status: 'duplicate', taskId: winners[0]!.body.taskId });
    expect(await harness.counts()).toEqual(expectedCounts({ ...ONE_ACCEPTED_TASK, webhook_deliveries: 50 }));
    expect(harness.permissionCalls.length).toBeGreaterThan(1);
  });

  it('concurrent first comments on a new repository register it once', async () => {
    const harness = await start();
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) => {
        const d = delivery('issue_comment_created_on_issue', {
          mutate: (p) => {
            comment(`@ccweb-bot task ${i}`, 6000 + i)(p);
            p.issue.number = 100 + i;
          },
        });
        return harness.post(d.body, d.headers);
      }),
    );
    expect(results.every((r) => r.status === 202)).toBe(true);
    expect(await harness.counts()).toEqual(
      expectedCounts({ webhook_deliveries: 10, comment_triggers: 10, repositories: 1, sessions: 10, tasks: 10, actors: 10, comments: 10 }),
    );
    expect((await harness.auditActions()).filter((a) => a === 'repository.register')).toHaveLength(1);
    const seqs = (await harness.store.list<TaskRecord>('tasks')).map((t) => t.queueSeq);
    expect(new Set(seqs).size).toBe(10);
  });
});

describe('200: ignored events and comments (delivery stored as ignored, audited, no task)', () => {
  const cases: Array<[string, () => { body: Buffer; headers: Record<string, string>; deliveryId: string }, string]> = [
    ['an edited comment (edits never trigger)', () => exact('issue_comment_edited'), 'edited_comment'],
    ["the bot's own comment", () => exact('issue_comment_created_by_bot'), 'bot_self_comment'],
    ["the bot's own comment, login in another case", () => delivery('issue_comment_created_by_bot', { mutate: (p) => { p.sender.login = 'CCWeb-Bot'; p.comment.body = '@ccweb-bot loop?'; } }), 'bot_self_comment'],
    ['a deleted comment', () => delivery('issue_comment_created_on_issue', { mutate: (p) => { p.action = 'deleted'; } }), 'deleted_comment'],
    ['a comment without a mention', () => delivery('issue_comment_created_on_issue', { mutate: comment('please fix the build') }), 'no_mention'],
    ['a mention of another user with a longer login', () => delivery('issue_comment_created_on_issue', { mutate: comment('@ccweb-botx fix it') }), 'no_mention'],
    ['a mention inside an inline code span', () => delivery('issue_comment_created_on_issue', { mutate: comment('run `@ccweb-bot fix` to see') }), 'no_mention'],
    ['a mention inside a fenced code block', () => delivery('issue_comment_created_on_issue', { mutate: comment('log:\n```\n@ccweb-bot fix\n```\nthanks') }), 'no_mention'],
    ['a mention inside a quote', () => delivery('issue_comment_created_on_issue', { mutate: comment('> @ccweb-bot please fix\n\nI agree with this') }), 'no_mention'],
  ];
  for (const [title, make, reason] of cases) {
    it(title, async () => {
      const harness = await start();
      const d = make();
      const res = await harness.post(d.body, d.headers);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ status: 'ignored', reason });
      expect(await harness.counts()).toEqual(expectedCounts({ webhook_deliveries: 1 }));
      expect(await harness.store.get<DeliveryRecord>('webhook_deliveries', `default:${d.deliveryId}`)).toMatchObject({
        status: 'ignored',
        reason,
        taskId: null,
        response: { status: 200, body: res.body },
      });
      expect(await harness.auditActions()).toEqual(['webhook.ignored']);
      expect((await harness.store.audit())[0]!.errorCode).toBe(reason);
    });
  }

  for (const [event, eventType] of [
    ['push', 'push'],
    ['pull_request_comment', 'pull_request_review_comment'],
    ['issues', 'issues'],
  ] as const) {
    it(`event ${event}/${eventType} is ignored as unsupported_event before parsing`, async () => {
      const harness = await start();
      const body = Buffer.from(JSON.stringify({ ref: 'refs/heads/main', unrelated: true }));
      const id = randomUUID();
      const headers = signedHeaders(loadFixture('issue_comment_created_on_issue').headers, body, FIXTURE_SECRET, {
        'X-Gitea-Event': event,
        'X-Gitea-Event-Type': eventType,
        'X-Gitea-Delivery': id,
      });
      const res = await harness.post(body, headers);
      expect(res).toMatchObject({ status: 200, body: { status: 'ignored', reason: 'unsupported_event' } });
      expect(await harness.counts()).toEqual(expectedCounts({ webhook_deliveries: 1 }));
      expect(await harness.store.get<DeliveryRecord>('webhook_deliveries', `default:${id}`)).toMatchObject({ normalized: false, eventType });
      expect(await harness.auditActions()).toEqual(['webhook.ignored']);
    });
  }
});

describe('401: missing or wrong signature — a security audit event and nothing else', () => {
  const f = () => exact('issue_comment_created_on_issue');
  const cases: Array<[string, () => Record<string, string>, (b: Buffer) => Buffer]> = [
    ['wrong signature', () => ({ ...f().headers, 'X-Gitea-Signature': 'ab'.repeat(32), 'X-Hub-Signature-256': `sha256=${'ab'.repeat(32)}` }), (b) => b],
    ['signed with another secret', () => signedHeaders(f().headers, f().body, 'not-the-secret'), (b) => b],
    ['body changed after signing (one byte)', () => f().headers, (b) => Buffer.concat([b.subarray(0, b.length - 2), Buffer.from(' }')])],
    ['no signature headers at all', () => withoutHeader(withoutHeader(withoutHeader(f().headers, 'X-Gitea-Signature'), 'X-Hub-Signature-256'), 'X-Gogs-Signature'), (b) => b],
    ['empty signature headers (a hook without secret)', () => ({ ...f().headers, 'X-Gitea-Signature': '', 'X-Gogs-Signature': '', 'X-Hub-Signature-256': 'sha256=' }), (b) => b],
    ['SHA-1 signature only', () => withoutHeader(withoutHeader(withoutHeader(f().headers, 'X-Gitea-Signature'), 'X-Hub-Signature-256'), 'X-Gogs-Signature'), (b) => b],
    ['truncated signature', () => ({ ...f().headers, 'X-Gitea-Signature': f().headers['X-Gitea-Signature']!.slice(0, 63), 'X-Hub-Signature-256': 'sha256=' }), (b) => b],
  ];
  for (const [title, headers, body] of cases) {
    it(title, async () => {
      const harness = await start();
      const res = await harness.post(body(f().body), headers());
      expect(res.status).toBe(401);
      expect(res.body).toEqual({ error: 'unauthorized' });
      // Not one audit event per request, but one expiring record per source and window.
      expect(await harness.counts()).toEqual(expectedCounts({ security_events: 1 }));
      expect(await harness.store.audit()).toEqual([]);
      const events = await harness.store.list('security_events');
      expect(events).toHaveLength(1);
      expect(events[0]).toMatchObject({
        kind: 'invalid_signature',
        source: '127.0.0.1',
        count: 1,
        sample: { deliveryId: f().deliveryId, userAgent: 'Go-http-client/1.1' },
      });
      const stored = JSON.stringify(events[0]);
      expect(stored).not.toContain('please fix');
      expect(stored).not.toContain(FIXTURE_SECRET);
      expect(stored).not.toContain(f().headers['X-Gitea-Signature']!.slice(0, 16));
    });
  }

  it('a form body without a payload field is unauthorized too', async () => {
    const harness = await start();
    const body = Buffer.from('other=1');
    const res = await harness.post(body, { ...signedHeaders(f().headers, body), 'Content-Type': 'application/x-www-form-urlencoded' });
    expect(res).toMatchObject({ status: 401, body: { error: 'unauthorized' } });
    expect(await harness.counts()).toEqual(expectedCounts({ security_events: 1 }));
    expect(await harness.store.list('security_events')).toMatchObject([{ kind: 'invalid_form', count: 1 }]);
  });
});

describe('400: unparseable or incomplete payloads, unsafe names — nothing queued', () => {
  async function expectInvalid(harness: IntakeHarness, res: { status: number; body: unknown }) {
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: 'invalid_payload' });
    expect(await harness.counts()).toEqual(expectedCounts({}));
    expect(await harness.auditActions()).toEqual(['webhook.invalid_payload']);
  }

  it('non-JSON body with a valid signature', async () => {
    const harness = await start();
    const body = Buffer.from('this is not json {');
    await expectInvalid(harness, await harness.post(body, signedHeaders(loadFixture('issue_comment_created_on_issue').headers, body)));
  });

  it('invalid UTF-8 with a valid signature', async () => {
    const harness = await start();
    const body = Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x7d]);
    await expectInvalid(harness, await harness.post(body, signedHeaders(loadFixture('issue_comment_created_on_issue').headers, body)));
  });

  for (const [field, mutate] of [
    ['comment.id', (p: any) => delete p.comment.id],
    ['comment.body', (p: any) => delete p.comment.body],
    ['repository', (p: any) => delete p.repository],
    ['sender', (p: any) => delete p.sender],
    ['is_pull', (p: any) => delete p.is_pull],
    ['issue.number (a string)', (p: any) => { p.issue.number = '7'; }],
  ] as const) {
    it(`missing or wrong required field: ${field}`, async () => {
      const harness = await start();
      const d = delivery('issue_comment_created_on_issue', { mutate });
      await expectInvalid(harness, await harness.post(d.body, d.headers));
    });
  }

  for (const [title, header] of [
    ['X-Gitea-Delivery', 'X-Gitea-Delivery'],
    ['X-Gitea-Event', 'X-Gitea-Event'],
    ['X-Gitea-Event-Type', 'X-Gitea-Event-Type'],
  ] as const) {
    it(`missing header ${title}`, async () => {
      const harness = await start();
      const d = exact('issue_comment_created_on_issue');
      await expectInvalid(harness, await harness.post(d.body, withoutHeader(d.headers, header)));
    });
  }

  it('X-Gitea-Event-Type contradicting the signed is_pull', async () => {
    const harness = await start();
    const d = exact('issue_comment_created_on_issue');
    await expectInvalid(harness, await harness.post(d.body, { ...d.headers, 'X-Gitea-Event-Type': 'pull_request_comment' }));
  });

  for (const [title, mutate] of [
    ['repository name ..', (p: any) => { p.repository.name = '..'; p.repository.full_name = 'alice/..'; }],
    ['repository name ../../etc', (p: any) => { p.repository.name = '../../etc'; p.repository.full_name = 'alice/../../etc'; }],
    ['repository name with a slash', (p: any) => { p.repository.name = 'a/b'; p.repository.full_name = 'alice/a/b'; }],
    ['repository name with a backslash', (p: any) => { p.repository.name = 'a\\b'; p.repository.full_name = 'alice/a\\b'; }],
    ['repository name with NUL', (p: any) => { p.repository.name = 'wid\u0000gets'; p.repository.full_name = 'alice/wid\u0000gets'; }],
    ['repository name with a newline', (p: any) => { p.repository.name = 'wid\ngets'; p.repository.full_name = 'alice/wid\ngets'; }],
    ['owner ..', (p: any) => { p.repository.owner.login = '..'; p.repository.full_name = '../widgets'; }],
    ['owner with a leading dash', (p: any) => { p.repository.owner.login = '-alice'; p.repository.full_name = '-alice/widgets'; }],
    ['full_name not matching owner/name', (p: any) => { p.repository.full_name = 'mallory/widgets'; }],
  ] as const) {
    it(`path traversal / unsafe name: ${title}`, async () => {
      const harness = await start();
      const d = delivery('issue_comment_created_on_issue', { mutate });
      await expectInvalid(harness, await harness.post(d.body, d.headers));
    });
  }
});

describe('415 and 413: content type and size, checked before anything is read or stored', () => {
  for (const [title, type] of [
    ['text/plain', 'text/plain'],
    ['multipart/form-data', 'multipart/form-data; boundary=x'],
    ['no Content-Type', undefined],
  ] as const) {
    it(`wrong content type: ${title}`, async () => {
      const harness = await start();
      const d = exact('issue_comment_created_on_issue');
      const headers = type === undefined ? withoutHeader(d.headers, 'Content-Type') : { ...d.headers, 'Content-Type': type };
      const res = await harness.post(d.body, headers);
      expect(res).toMatchObject({ status: 415, body: { error: 'unsupported_media_type' } });
      expect(await harness.counts()).toEqual(expectedCounts({}));
      expect(await harness.auditActions()).toEqual([]);
    });
  }

  it('application/json with a charset parameter is fine', async () => {
    const harness = await start();
    const d = exact('issue_comment_created_on_issue');
    expect((await harness.post(d.body, { ...d.headers, 'Content-Type': 'application/json; charset=utf-8' })).status).toBe(202);
  });

  it('a compressed body is refused (415), never decoded', async () => {
    const harness = await start();
    const d = exact('issue_comment_created_on_issue');
    const res = await harness.post(d.body, { ...d.headers, 'Content-Encoding': 'gzip' });
    expect(res.status).toBe(415);
    expect(await harness.counts()).toEqual(expectedCounts({}));
  });

  it('a declared Content-Length over the 2 MiB default → 413 and the connection closes', async () => {
    const harness = await start();
    const body = Buffer.alloc(2 * 1024 * 1024 + 1, 0x20);
    const res = await harness.post(body, signedHeaders(loadFixture('issue_comment_created_on_issue').headers, body));
    expect(res).toMatchObject({ status: 413, body: { error: 'payload_too_large' } });
    expect(res.headers['connection']).toBe('close');
    expect(await harness.counts()).toEqual(expectedCounts({}));
    expect(await harness.auditActions()).toEqual([]);
  });

  it('a chunked upload (no Content-Length) is cut off at the limit → 413', async () => {
    const harness = await start({ maxBytes: 64 * 1024 });
    const body = Buffer.alloc(1024 * 1024, 0x20);
    const res = await harness.post(body, signedHeaders(loadFixture('issue_comment_created_on_issue').headers, body), { chunked: true });
    expect(res.status).toBe(413);
    expect(await harness.counts()).toEqual(expectedCounts({}));
  });

  it('a body of exactly the limit is read', async () => {
    const d = exact('issue_comment_created_on_issue');
    const harness = await start({ maxBytes: d.body.length });
    expect((await harness.post(d.body, d.headers)).status).toBe(202);
  });

  it('GET on the webhook path → 405, nothing stored', async () => {
    const harness = await start();
    const res = await harness.post(Buffer.alloc(0), {}, { method: 'GET' });
    expect(res.status).toBe(405);
    expect(await harness.counts()).toEqual(expectedCounts({}));
  });
});

describe('who may trigger: write/admin confirmed by the API (signed permissions only a hint), fail closed', () => {
  /**
   * `notice`: Gitea said the commenter has no write access (not the operator's lists), so the thread's
   * first such mention of the day gets the one receipt row saying only writers can ask.
   */
  async function expectRejectedTask(harness: IntakeHarness, res: { status: number; body: any }, reason: string, deliveryId: string, notice: boolean) {
    const taskId = taskIdFor(`default:${deliveryId}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'rejected', reason, taskId });
    // Visible to operators as a rejected task (and counted for its author's day); no
    // repository or session for it.
    expect(await harness.counts()).toEqual(expectedCounts({ webhook_deliveries: 1, comment_triggers: 1, tasks: 1, actors: 1, security_events: 1, ...(notice ? { comments: 1 } : {}) }));
    if (notice) expect(await harness.store.get<CommentRecord>('comments', `${taskId}:status:refused`)).toMatchObject({ kind: 'status', status: 'pending', readerNotice: true, errorCode: reason });
    expect(await task(harness, taskId)).toMatchObject({ state: 'rejected', author: expect.any(String) });
    expect((await harness.runtime.stateOf(taskActorId(taskId)))?.state).toBe('rejected');
    expect(await harness.store.get<DeliveryRecord>('webhook_deliveries', `default:${deliveryId}`)).toMatchObject({ status: 'rejected', reason, taskId });
    expect(await harness.auditActions()).toEqual(['webhook.rejected', 'task.transition', 'task.transition']);
    expect((await harness.store.audit())[0]!.errorCode).toBe(reason);
    // The receipt outbox is woken for the notice; nothing else was accepted.
    expect(harness.accepted).toEqual(notice ? [taskId] : []);
  }

  /**
   * A permission lookup that fails for a passing reason is no refusal — no task,
   * no trigger (a Replay is decided then), the comment waits in `pending_intake` and is asked again.
   */
  async function expectWaiting(harness: IntakeHarness, res: { status: number; body: any }, deliveryId: string) {
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ deliveryId, taskId: null, state: 'pending_confirmation', attempts: 1, gaveUp: false });
    expect(await harness.counts()).toEqual(expectedCounts({ pending_intake: 1 }));
    expect((await harness.store.list('pending_intake'))[0]).toMatchObject({ deliveryId, state: 'waiting', attempts: 1, lastError: expect.stringContaining('permission lookup') });
    expect(await harness.auditActions()).toEqual([]);
    expect(harness.accepted).toEqual([]);
  }

  it('read-only commenter (signed permissions) → rejected, permission API not asked', async () => {
    const harness = await start({ fetchPermission: async () => 'admin' });
    const d = delivery('issue_comment_created_on_issue', { mutate: (p) => { p.repository.permissions = { admin: false, push: false, pull: true }; } });
    await expectRejectedTask(harness, await harness.post(d.body, d.headers), 'actor_not_authorized', d.deliveryId, true);
    expect(harness.permissionCalls).toEqual([]);
  });

  // The payload's permissions are never the decision: anyone knowing the secret can sign push: true.
  it('signed push: true for a user Gitea says has no access → rejected (the API decides)', async () => {
    const harness = await start({ fetchPermission: async () => 'none' });
    const d = delivery('issue_comment_created_on_issue', { mutate: (p) => { p.repository.permissions = { admin: true, push: true, pull: true }; } });
    await expectRejectedTask(harness, await harness.post(d.body, d.headers), 'actor_not_authorized', d.deliveryId, true);
    expect(harness.permissionCalls).toEqual([['alice', 'widgets', 'bob']]);
  });

  it('signed push: true and the permission API failing → not accepted: waits for Gitea (fail closed, not refused)', async () => {
    const harness = await start({ fetchPermission: async () => { throw new Error('connection refused'); } });
    const d = delivery('issue_comment_created_on_issue');
    await expectWaiting(harness, await harness.post(d.body, d.headers), d.deliveryId);
  });

  it('admin without push (signed), API says admin → accepted', async () => {
    const harness = await start({ fetchPermission: async () => 'admin' });
    const d = delivery('issue_comment_created_on_issue', { mutate: (p) => { p.repository.permissions = { admin: true, push: false, pull: true }; } });
    expect((await harness.post(d.body, d.headers)).status).toBe(202);
  });

  it('permissions absent, permission API says write → accepted', async () => {
    const harness = await start({ fetchPermission: async () => 'write' });
    const d = delivery('issue_comment_created_on_issue', { mutate: (p) => { delete p.repository.permissions; } });
    const res = await harness.post(d.body, d.headers);
    expect(res.status).toBe(202);
    expect(harness.permissionCalls).toEqual([['alice', 'widgets', 'bob']]);
    expect(await harness.counts()).toEqual(expectedCounts(ONE_ACCEPTED_TASK));
  });

  it('permissions absent, permission API says read → rejected', async () => {
    const harness = await start({ fetchPermission: async () => 'read' });
    const d = delivery('issue_comment_created_on_issue', { mutate: (p) => { p.repository.permissions = null; } });
    await expectRejectedTask(harness, await harness.post(d.body, d.headers), 'actor_not_authorized', d.deliveryId, true);
  });

  it('permissions absent, permission API throws → waits for Gitea (fail closed, not refused)', async () => {
    const harness = await start({ fetchPermission: async () => { throw Object.assign(new Error('403 Forbidden'), { status: 403 }); } });
    const d = delivery('issue_comment_created_on_issue', { mutate: (p) => { delete p.repository.permissions; } });
    await expectWaiting(harness, await harness.post(d.body, d.headers), d.deliveryId);
  });

  it('permissions absent, permission API answers 404 (no such user here) → rejected: a clear no', async () => {
    const harness = await start({ fetchPermission: async () => { throw Object.assign(new Error('user does not exist'), { status: 404 }); } });
    const d = delivery('issue_comment_created_on_issue', { mutate: (p) => { delete p.repository.permissions; } });
    await expectRejectedTask(harness, await harness.post(d.body, d.headers), 'actor_not_authorized', d.deliveryId, true);
  });

  it('permissions absent, permission API hangs → waits for Gitea after the timeout (fail closed, not refused)', async () => {
    const harness = await start({ fetchPermission: () => new Promise(() => undefined), intake: { permissionTimeoutMs: 50 } });
    const d = delivery('issue_comment_created_on_issue', { mutate: (p) => { delete p.repository.permissions; } });
    await expectWaiting(harness, await harness.post(d.body, d.headers), d.deliveryId);
  });

  it('deny list wins over write permission', async () => {
    const harness = await start({ denyUsers: ['BOB'] });
    const d = delivery('issue_comment_created_on_issue');
    await expectRejectedTask(harness, await harness.post(d.body, d.headers), 'actor_not_authorized', d.deliveryId, false);
  });

  it('allow list without the commenter → rejected; with the commenter → accepted', async () => {
    const harness = await start({ allowUsers: ['carol'] });
    const d = delivery('issue_comment_created_on_issue');
    await expectRejectedTask(harness, await harness.post(d.body, d.headers), 'actor_not_authorized', d.deliveryId, false);
    await harness.close();
    const allowed = await start({ allowUsers: ['carol', 'bob'] });
    const e = delivery('issue_comment_created_on_issue');
    expect((await allowed.post(e.body, e.headers)).status).toBe(202);
  });

  it("a reader's notice: one per thread and UTC day, only for a comment Gitea confirms, none once an operator turns them off", async () => {
    let now = new Date('2026-03-01T10:00:00.000Z');
    const harness = await start({ fetchPermission: async () => 'read', learnComments: false, intake: { now: () => now } });
    let id = 5_000;
    const mention = async (issue: number, known = true) => {
      const d = delivery('issue_comment_created_on_issue', {
        mutate: (p) => {
          delete p.repository.permissions;
          p.issue.number = issue;
          p.comment.id = ++id;
        },
      });
      if (known) harness.comments.learn({ rawBody: d.body, headers: d.headers, contentType: 'application/json' });
      return (await harness.post(d.body, d.headers)).body;
    };
    const notices = async () => (await harness.store.list<CommentRecord>('comments')).filter((c) => c.readerNotice === true).map((c) => c.resourceKey);
    // A mention Gitea does not have (a signed but forged payload): refused unconfirmed, nothing to post.
    expect(await mention(7, false)).toMatchObject({ status: 'rejected', reason: 'comment_not_confirmed' });
    expect(await notices()).toEqual([]);
    // The first confirmed one of the thread today gets it; the next ones of that thread do not; another thread does.
    expect(await mention(7)).toMatchObject({ status: 'rejected', reason: 'actor_not_authorized' });
    expect(await mention(7)).toMatchObject({ status: 'rejected', reason: 'actor_not_authorized' });
    expect(await mention(8)).toMatchObject({ status: 'rejected', reason: 'actor_not_authorized' });
    expect(await notices()).toEqual(['default:alice/widgets:issue:7', 'default:alice/widgets:issue:8']);
    // The next UTC day, the thread may be told again.
    now = new Date('2026-03-02T00:00:01.000Z');
    await mention(7);
    expect(await notices()).toHaveLength(3);
    // An operator turned them off for the repository: no notice, the mention is still rejected and counted.
    await harness.store.transact(async (tx) => {
      await tx.insert('repositories', 'default:alice/widgets', {
        repoKey: 'default:alice/widgets', instanceId: 'default', owner: 'alice', name: 'widgets',
        cloneUrl: 'https://gitea.example.com/alice/widgets.git', workspacePath: '/w/default/alice/widgets',
        defaultBranch: 'main', status: 'active', registeredAt: '2026-01-01T00:00:00Z', lastFetchAt: null, version: 2,
        readerNotices: { enabled: false },
      } satisfies RepositoryRecord);
    });
    expect(await mention(9)).toMatchObject({ status: 'rejected', reason: 'actor_not_authorized' });
    expect(await notices()).toHaveLength(3);
  });

  it('a Replay of a rejected comment stays rejected (duplicate of the rejected task)', async () => {
    const harness = await start();
    const d = delivery('issue_comment_created_on_issue', { mutate: (p) => { p.repository.permissions = { admin: false, push: false, pull: true }; } });
    const first = await harness.post(d.body, d.headers);
    const res = await harness.post(d.body, { ...d.headers, 'X-Gitea-Delivery': randomUUID() });
    expect(res.body).toEqual({ status: 'duplicate', taskId: first.body.taskId });
    expect(await harness.store.count('tasks')).toBe(1);
  });
});

describe('409: a repository disabled by an operator gets no task', () => {
  it('answers repository_disabled, records the delivery as rejected, and repeats it', async () => {
    // A read-only commenter: no notice (a writer's mention gets one, below).
    const harness = await start({ fetchPermission: async () => 'read' });
    await harness.store.transact((tx) =>
      tx.insert('repositories', 'default:alice/widgets', {
        repoKey: 'default:alice/widgets',
        instanceId: 'default',
        owner: 'alice',
        name: 'widgets',
        cloneUrl: 'https://gitea.example.com/alice/widgets.git',
        workspacePath: '/w/default/alice/widgets',
        defaultBranch: 'main',
        status: 'disabled',
        registeredAt: '2026-01-01T00:00:00Z',
        lastFetchAt: null,
        version: 2,
      } satisfies RepositoryRecord),
    );
    const d = exact('issue_comment_created_on_issue');
    const res = await harness.post(d.body, d.headers);
    expect(res).toMatchObject({ status: 409, body: { error: 'repository_disabled' } });
    expect(await harness.counts()).toEqual(expectedCounts({ webhook_deliveries: 1, repositories: 1 }));
    expect(await harness.store.get<DeliveryRecord>('webhook_deliveries', `default:${d.deliveryId}`)).toMatchObject({
      status: 'rejected',
      reason: 'repository_disabled',
      taskId: null,
    });
    expect(await harness.auditActions()).toEqual(['webhook.repository_disabled']);
    expect((await harness.store.get<RepositoryRecord>('repositories', 'default:alice/widgets'))?.version).toBe(2);
    const again = await harness.post(d.body, d.headers);
    expect(again).toMatchObject({ status: 409, body: { error: 'repository_disabled' } });
    expect(await harness.store.count('tasks')).toBe(0);
  });

  // In a disabled repository a mention gets 409; the thread must not be left showing nothing.
  it('a writer\'s mention gets one notice per thread and day; a later one, a read-only commenter\'s, or a Replay after enabling do not', async () => {
    let day = '2026-12-02T10:00:00.000Z';
    const harness = await start({ fetchPermission: async (_o, _r, login) => (login === 'mallory' ? 'read' : 'write'), intake: { now: () => new Date(day) } });
    await harness.store.transact((tx) =>
      tx.insert('repositories', 'default:alice/widgets', {
        repoKey: 'default:alice/widgets', instanceId: 'default', owner: 'alice', name: 'widgets',
        cloneUrl: 'https://gitea.example.com/alice/widgets.git', workspacePath: '/w/default/alice/widgets',
        defaultBranch: 'main', status: 'disabled', registeredAt: '2026-01-01T00:00:00Z', lastFetchAt: null, version: 2,
      } satisfies RepositoryRecord),
    );
    const mention = (id: number, login = 'bob', number = 7) =>
      delivery('issue_comment_created_on_issue', {
        mutate: (p) => {
          comment(`@ccweb-bot please look ${id}`, id)(p);
          p.sender.login = login;
          p.comment.user.login = login;
          p.issue.number = number;
        },
      });
    const first = mention(7601);
    expect(await harness.post(first.body, first.headers)).toMatchObject({ status: 409, body: { error: 'repository_disabled' } });
    const notices = async () => (await harness.store.list<CommentRecord>('comments')).filter((r) => r.repositoryDisabled === true);
    expect(await notices()).toHaveLength(1);
    const noticeTask = await task(harness, (await notices())[0]!.taskId);
    expect(noticeTask).toMatchObject({ state: 'rejected', resourceKey: 'default:alice/widgets:issue:7' });
    // The same thread, the same day: silence again; another thread gets its own notice.
    for (const d of [mention(7602), mention(7603, 'mallory', 8)]) expect((await harness.post(d.body, d.headers)).status).toBe(409);
    expect(await notices()).toHaveLength(1);
    const other = mention(7604, 'bob', 8);
    await harness.post(other.body, other.headers);
    expect(await notices()).toHaveLength(2);
    // The next day, the first thread is told once more.
    day = '2026-12-03T09:00:00.000Z';
    const next = mention(7605);
    await harness.post(next.body, next.headers);
    expect(await notices()).toHaveLength(3);
    // No trigger was kept: once enabled, a Replay of the first comment runs.
    await harness.store.transact(async (tx) => {
      const r = (await tx.get<RepositoryRecord>('repositories', 'default:alice/widgets'))!;
      await tx.put('repositories', r.repoKey, { ...r, status: 'enabled' });
    });
    expect((await harness.post(first.body, { ...first.headers, 'X-Gitea-Delivery': randomUUID() })).status).toBe(202);
  });
});

describe('503: the store cannot make the task durable — never "queued"', () => {
  it('store closed', async () => {
    const harness = await start();
    await harness.store.close();
    const d = exact('issue_comment_created_on_issue');
    const res = await harness.post(d.body, d.headers);
    expect(res).toMatchObject({ status: 503, body: { error: 'store_unavailable' } });
    expect(harness.accepted).toEqual([]);
  });

  it('a commit fails: 503, nothing acknowledged, and the failed write is not on disk', async () => {
    let fail = false;
    const harness = await start({
      store: {
        beforeCommit: () => {
          if (fail) throw new Error('EIO: simulated disk failure');
        },
      },
    });
    fail = true;
    const d = exact('issue_comment_created_on_issue');
    const res = await harness.post(d.body, d.headers);
    expect(res).toMatchObject({ status: 503, body: { error: 'store_unavailable' } });
    expect(harness.accepted).toEqual([]);
    // A repeat must not turn the in-memory (never durable) record into a "duplicate" answer.
    const again = await harness.post(d.body, d.headers);
    expect(again.status).toBe(503);
    await harness.close(false);
    h = undefined;
    const reopened = createStore({ dir: `${harness.dir}/store`, indexes: STORE_INDEXES });
    await reopened.open();
    try {
      expect(await reopened.count('tasks')).toBe(0);
      expect(await reopened.count('webhook_deliveries') + await reopened.archivedCount('webhook_deliveries')).toBe(0);
    } finally {
      await reopened.close();
    }
  });
});

describe('@ccweb-bot stop', () => {
  async function queue(harness: IntakeHarness, id: number, number = 7): Promise<string> {
    const d = delivery('issue_comment_created_on_issue', {
      mutate: (p) => {
        comment(`@ccweb-bot task ${id}`, id)(p);
        p.issue.number = number;
      },
    });
    const res = await harness.post(d.body, d.headers);
    expect(res.status).toBe(202);
    return res.body.taskId as string;
  }

  it('cancels queued tasks and aborts the running one of that resource only', async () => {
    const harness = await start();
    const running = await queue(harness, 7001);
    const queued = await queue(harness, 7002);
    const elsewhere = await queue(harness, 7003, 8);
    const claim: TaskEvent = { type: 'CLAIM', leaseId: 'lease-1' };
    expect((await harness.runtime.send(taskActorId(running), claim)).ok).toBe(true);
    expect((await harness.runtime.send(taskActorId(running), { type: 'WORKSPACE_READY' })).ok).toBe(true);

    const before = await harness.counts();
    const d = delivery('issue_comment_created_on_issue', { mutate: comment('@ccweb-bot STOP!', 7100) });
    const res = await harness.post(d.body, d.headers);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'stop', taskIds: [running, queued] });
    expect(await task(harness, running)).toMatchObject({ state: 'aborting', stoppedBy: 'gitea:user:bob' });
    expect(await task(harness, queued)).toMatchObject({ state: 'cancelled', stoppedBy: 'gitea:user:bob' });
    expect((await task(harness, elsewhere)).state).toBe('queued');
    expect(harness.stops).toEqual([[running, queued]]);
    expect(await harness.counts()).toEqual({ ...before, webhook_deliveries: before.webhook_deliveries + 1, comment_triggers: before.comment_triggers + 1 });
    expect(await harness.store.get<DeliveryRecord>('webhook_deliveries', `default:${d.deliveryId}`)).toMatchObject({ status: 'accepted', reason: 'stop', taskId: null });
    const tail = (await harness.store.audit()).slice(-3);
    expect(tail.map((e) => [e.action, e.actor, e.toState ?? null])).toEqual([
      ['webhook.stop', 'gitea:user:bob', null],
      ['task.transition', 'gitea:user:bob', 'aborting'],
      ['task.transition', 'gitea:user:bob', 'cancelled'],
    ]);
  });

  it('a stop from a read-only commenter is rejected and stops nothing', async () => {
    const harness = await start();
    const queued = await queue(harness, 7201);
    const d = delivery('issue_comment_created_on_issue', {
      mutate: (p) => {
        comment('@ccweb-bot stop', 7202)(p);
        p.sender.login = 'mallory';
        p.repository.permissions = { admin: false, push: false, pull: true };
      },
    });
    const res = await harness.post(d.body, d.headers);
    expect(res.body).toMatchObject({ status: 'rejected', reason: 'actor_not_authorized' });
    expect((await task(harness, queued)).state).toBe('queued');
    expect(harness.stops).toEqual([]);
  });

  // A stop during `preparing` must reach the task, or it would say nothing and push afterwards.
  it('reaches a task in every non-terminal state: nothing in flight is cancelled, work in flight is aborted', async () => {
    const harness = await start();
    // Event paths from `queued` into each state the stop must reach (the machine's own transitions).
    const claim: TaskEvent = { type: 'CLAIM', leaseId: 'lease-1' };
    const ready: TaskEvent = { type: 'WORKSPACE_READY' };
    const paths: Array<[string, TaskEvent[], string]> = [
      ['queued', [], 'cancelled'],
      ['preparing', [claim], 'aborting'],
      ['running', [claim, ready], 'aborting'],
      ['publishing', [claim, ready, { type: 'TURN_REPLIED', publish: true }], 'aborting'],
      ['verifying_reply', [claim, ready, { type: 'TURN_REPLIED' }], 'aborting'],
      ['retry_wait', [claim, { type: 'PREPARE_FAILED', errorCode: 'git_failed', retryable: true, retryAt: 1 }], 'cancelled'],
      ['waiting_user', [claim, ready, { type: 'TURN_WAITING_USER' }, { type: 'REPLY_CONFIRMED' }], 'cancelled'],
      ['blocked_workspace', [claim, { type: 'WORKSPACE_BLOCKED', errorCode: 'workspace_dirty' }], 'cancelled'],
    ];
    let id = 7400;
    for (const [state, events, after] of paths) {
      const number = id; // one thread per state: a stop reaches only its own thread's tasks
      const taskId = await queue(harness, id++, number);
      for (const e of events) expect((await harness.runtime.send(taskActorId(taskId), e)).ok, `${state}: ${e.type}`).toBe(true);
      expect((await task(harness, taskId)).state).toBe(state);
      const d = delivery('issue_comment_created_on_issue', {
        mutate: (p) => {
          comment('@ccweb-bot stop', id++)(p);
          p.issue.number = number;
        },
      });
      const res = await harness.post(d.body, d.headers);
      expect(res.body, state).toEqual({ status: 'stop', taskIds: [taskId] });
      expect(await task(harness, taskId), state).toMatchObject({ state: after, stoppedBy: 'gitea:user:bob' });
    }
    // A second stop finds the aborting task already stopping: reached, nothing sent, no comment of its own.
    const aborting = (await harness.store.byIndex<TaskRecord>('tasks', 'state', 'aborting'))[0]!;
    const before = await harness.store.count('comments');
    const again = delivery('issue_comment_created_on_issue', {
      mutate: (p) => {
        comment('@ccweb-bot stop', 7499)(p);
        p.issue.number = aborting.resource.number;
      },
    });
    expect((await harness.post(again.body, again.headers)).body).toEqual({ status: 'stop', taskIds: [aborting.taskId] });
    expect((await task(harness, aborting.taskId)).stateVersion).toBe(aborting.stateVersion);
    expect(await harness.store.count('comments')).toBe(before);
  });

  it('a stop with nothing to stop is answered once: a task that never runs and its one comment', async () => {
    const harness = await start();
    const d = delivery('issue_comment_created_on_issue', { mutate: comment('@ccweb-bot stop', 7301) });
    const res = await harness.post(d.body, d.headers);
    expect(res.body).toEqual({ status: 'stop', taskIds: [] });
    const taskId = (await harness.store.get<DeliveryRecord>('webhook_deliveries', `default:${d.deliveryId}`))!.taskId!;
    expect(await task(harness, taskId)).toMatchObject({ state: 'ignored', resourceKey: expect.stringContaining(':issue:') });
    const rows = await harness.store.byIndex<CommentRecord>('comments', 'taskId', taskId);
    expect(rows).toMatchObject([{ commentKey: `${taskId}:status:refused`, status: 'pending', errorCode: 'nothing_to_stop', nothingToStop: true }]);
    expect(await harness.counts()).toEqual(expectedCounts({ webhook_deliveries: 1, comment_triggers: 1, tasks: 1, actors: 1, comments: 1 }));
    expect(await harness.auditActions()).toEqual(['webhook.stop', 'task.transition', 'task.transition']);
    // A Replay of the same stop is a duplicate: no second comment.
    const replay = await harness.post(d.body, { ...d.headers, 'X-Gitea-Delivery': randomUUID() });
    expect(replay.body).toEqual({ status: 'duplicate', taskId });
    expect(await harness.store.count('comments')).toBe(1);
  });
});

describe('comments waiting for Gitea with several nodes: only the repository owner asks again', () => {
  it("the retry loop leaves another node's repository's waiting comment alone, and decides it once the repository is owned here", async () => {
    let clock = Date.now();
    let gitea: 'down' | 'up' = 'down';
    const scope = { owned: false, owns: (_repoKey: string) => scope.owned, leads: () => true };
    const harness = await start({
      fetchPermission: async () => {
        if (gitea === 'down') throw new Error('connection refused');
        return 'write';
      },
      intake: { now: () => new Date(clock), scope },
    });
    const d = delivery('issue_comment_created_on_issue');
    const res = await harness.post(d.body, d.headers);
    expect(res.body).toMatchObject({ taskId: null, state: 'pending_confirmation', attempts: 1 });
    const asked = harness.permissionCalls.length;
    gitea = 'up';
    clock += 60_000;

    // Due, but another node owns the repository: not asked here, still waiting as it was.
    expect(await harness.intake.retryDue()).toBe(0);
    expect(harness.permissionCalls.length).toBe(asked);
    expect(await harness.store.list('pending_intake')).toEqual([expect.objectContaining({ deliveryId: d.deliveryId, state: 'waiting', attempts: 1 })]);
    expect(await harness.store.count('tasks')).toBe(0);

    // This node took the repository over: the next pass decides it.
    scope.owned = true;
    expect(await harness.intake.retryDue()).toBe(1);
    expect(await harness.store.count('pending_intake')).toBe(0);
    expect(await harness.store.list<TaskRecord>('tasks')).toEqual([expect.objectContaining({ state: 'queued' })]);
    expect(harness.accepted).toHaveLength(1);
  });
});
