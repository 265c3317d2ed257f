// A non-writer's mentions grow the store by a bounded amount, whatever their size.
// Real parts: signed webhooks into the real HTTP app (createApp + the webhook route + intake), the
// durable store (journal, compaction, cold tier), the actor runtime, the retention sweep, and a real
// Gitea 1.26.3 answering the permission question through the service's own Gitea client and its
// 30 s permission cache (as create-service.ts wires it). The deliveries are built here rather than
// made by Gitea: 1,000 comments of 1.4 MB through Gitea's API would take minutes; the webhook path
// after the signature is the same.
import { createHash, randomUUID } from 'node:crypto';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CommentRecord, TaskRecord } from '../../src/domain/records.js';
import { createGiteaClient } from '../../src/gitea/index.js';
import { MENTION_REJECTED, REJECTED_TASKS_PER_AUTHOR_DAY, type RejectedMentionRecord } from '../../src/intake/rejected-mentions.js';
import { SECURITY_EVENTS } from '../../src/intake/security-events.js';
import { DAY_MS, sweepRetention } from '../../src/retention/retention-sweep.js';
import { taskDetail, taskSummary } from '../../src/api/task-queries.js';
import type { SqlStore } from '../../src/store/index.js';
import { WAL_SIZE_LIMIT_BYTES } from '../../src/store/sql/sqlite-connection.js';
import { EXCERPT_CHARS, TASK_TEXTS } from '../../src/tasks/task-texts.js';
import type { RepoPermission } from '../../src/webhook/authorize-actor.js';
import { cachedPermissionLookup } from '../../src/webhook/permission-cache.js';
import { startIntakeHarness, type IntakeHarness } from '../support/intake-harness.js';
import { startSeededGitea, type SeededGitea } from '../support/real-gitea/index.js';
import { loadFixture, signedHeaders } from '../support/webhook-fixtures.js';

function dirBytes(dir: string): number {
  let total = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = join(dir, entry.name);
    total += entry.isDirectory() ? dirBytes(full) : statSync(full).size;
  }
  return total;
}

const N = 1000;
const TEXT_BYTES = 1_400_000;
/** What one counted mention may add at most: its delivery and comment-trigger records, the count's update. */
const PER_MENTION_BYTES = 2_500;
/** Fixed part: the few excerpt-only tasks with their actors and audit events, the day's record. */
const FIXED_BYTES = 100_000;
const ID_BASE = 900_000_000;

let g: SeededGitea;
let h: IntakeHarness;
const giteaCalls: string[] = [];

beforeAll(async () => {
  // The bot must be an admin to ask for another user's permission (docs/security.md).
  g = await startSeededGitea({ botPermission: 'admin' });
  const gitea = createGiteaClient({ baseUrl: g.url, token: g.users.bot.token });
  h = await startIntakeHarness({
    fetchPermission: cachedPermissionLookup(async (owner, repo, login) => {
      giteaCalls.push(`${owner}/${repo}:${login}`);
      return (await gitea.getCollaboratorPermission(owner, repo, login)).permission as RepoPermission;
    }),
  });
}, 60_000);

afterAll(async () => {
  await h?.close();
  await g?.gitea.close();
});

/** Signed deliveries of bob's (a reader on acme/widget) comments, each `TEXT_BYTES` long, ids from ID_BASE + 1. */
function readerDeliveries(text: string) {
  const fixture = loadFixture('issue_comment_created_on_issue');
  const p = JSON.parse(fixture.body.toString('utf8'));
  p.repository.owner.login = g.owner;
  p.repository.name = g.repo;
  p.repository.full_name = `${g.owner}/${g.repo}`;
  // No permissions in the payload: only Gitea's answer decides.
  delete p.repository.permissions;
  p.sender.login = g.users.reader.login;
  p.comment.user.login = g.users.reader.login;
  p.comment.body = text;
  p.comment.id = ID_BASE;
  const template = Buffer.from(JSON.stringify(p, null, 2));
  // Each delivery is a copy with the comment id's digits overwritten (same length): building a
  // 1.4 MB payload anew for each would cost the test more than the service spends on it.
  const at = template.indexOf(`"id": ${ID_BASE},`) + '"id": '.length;
  expect(at).toBeGreaterThan(5);
  return (i: number) => {
    const body = Buffer.from(template);
    body.write(String(ID_BASE + i), at, 'latin1');
    return { body, headers: { ...signedHeaders(fixture.headers, body), 'X-Gitea-Delivery': randomUUID() } };
  };
}

describe('1,000 mentions of 1.4 MB by a reader (real intake, real store, real Gitea permission)', () => {
  it('grow the data directory by a bounded amount; the first few are tasks with an excerpt, the rest a count', { timeout: 180_000 }, async () => {
    const text = `@ccweb-bot please read this log\n\n${'x'.repeat(120)}\n`.repeat(12_000).slice(0, TEXT_BYTES);
    const delivery = readerDeliveries(text);
    const store = h.store as SqlStore;
    const dir = join(h.dir, 'store');
    await store.checkpoint();
    const before = dirBytes(dir);
    const started = Date.now();

    const answers: Array<{ status: number; body: any }> = new Array(N);
    const sent: Array<ReturnType<typeof delivery>> = new Array(N);
    let next = 0;
    // Eight at a time (their journal writes share fsyncs): the order of the first few does not matter, only how many get a task.
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (next < N) {
          const i = next++;
          sent[i] = delivery(i + 1);
          answers[i] = await h.post(sent[i]!.body, sent[i]!.headers);
        }
      }),
    );
    await store.sync();
    const afterFlood = dirBytes(dir);
    // The write-ahead log folded into the database file: what the store keeps.
    await store.checkpoint();
    const afterCompaction = dirBytes(dir);
    const seconds = (Date.now() - started) / 1000;

    expect(answers.every((a) => a.status === 200 && a.body.status === 'rejected' && a.body.reason === 'actor_not_authorized')).toBe(true);
    const withTask = answers.filter((a) => a.body.taskId !== null);
    expect(withTask).toHaveLength(REJECTED_TASKS_PER_AUTHOR_DAY);
    // Gitea was asked (the cache answers the rest for 30 s; the eight first ones race past it).
    expect(giteaCalls.length).toBeGreaterThanOrEqual(1);
    expect(giteaCalls.length).toBeLessThan(N / 10);

    // One record for the author's day with every mention counted.
    const counts = await store.list<RejectedMentionRecord>(SECURITY_EVENTS);
    expect(counts).toHaveLength(1);
    expect(counts[0]).toMatchObject({ kind: MENTION_REJECTED, source: `gitea:user:${g.users.reader.login}`, count: N, tasks: REJECTED_TASKS_PER_AUTHOR_DAY, reasons: { actor_not_authorized: N } });
    // No text stored whole anywhere; five tasks, each with an excerpt, the length and the hash.
    expect(await store.count(TASK_TEXTS) + await store.archivedCount(TASK_TEXTS)).toBe(0);
    const tasks = await store.list<TaskRecord>('tasks');
    expect(tasks).toHaveLength(REJECTED_TASKS_PER_AUTHOR_DAY);
    const sha256 = 'sha256:' + createHash('sha256').update(text).digest('hex');
    for (const t of tasks) {
      expect(t).toMatchObject({ state: 'rejected', author: g.users.reader.login, instruction: text.slice(0, EXCERPT_CHARS), instructionExcerptOnly: true, instructionLength: text.length, instructionSha256: sha256 });
    }
    // The thread gets one notice that only writers can ask, from the first mention: one comment row
    // for the receipt outbox, whatever the flood (one per thread and day, and only with a task of its own).
    const notices = await store.list<CommentRecord>('comments');
    expect(notices).toHaveLength(1);
    expect(notices[0]).toMatchObject({ kind: 'status', status: 'pending', readerNotice: true, errorCode: 'actor_not_authorized' });
    expect(tasks.map((t) => t.taskId)).toContain(notices[0]!.taskId);
    // The operators' audit shows the tries: five rejections with their tasks, then one event for the counted rest.
    const actions = await h.auditActions();
    expect(actions.filter((a) => a === 'webhook.rejected')).toHaveLength(REJECTED_TASKS_PER_AUTHOR_DAY);
    expect(actions.filter((a) => a === 'webhook.rejected_counted')).toHaveLength(1);
    expect(actions).toHaveLength(REJECTED_TASKS_PER_AUTHOR_DAY * 3 + 1);

    const grown = afterFlood - before;
    const grownCompacted = afterCompaction - before;
    console.log(
      `${N} mentions of ${TEXT_BYTES} bytes by a reader in ${seconds.toFixed(1)} s: data directory ${before} → ${afterFlood} bytes (+${grown}, ${Math.round(grown / N)} per mention), ` +
        `after a WAL checkpoint ${afterCompaction} (+${grownCompacted}, ${Math.round(grownCompacted / N)} per mention); ${tasks.length} tasks, 1 count record, ${actions.length} audit events, ${giteaCalls.length} permission lookup(s) on Gitea`,
    );
    // Before the checkpoint the write-ahead log holds up to its size limit besides.
    expect(grown).toBeLessThan(FIXED_BYTES + N * PER_MENTION_BYTES + WAL_SIZE_LIMIT_BYTES);
    expect(grownCompacted).toBeLessThan(FIXED_BYTES + N * PER_MENTION_BYTES);

    // Dedupe still holds: a Replay (new delivery id, same comment) of a counted mention and of one
    // with a task answer `duplicate` and add no count and no task; a repeat of a delivery id its first answer.
    const counted = answers.findIndex((a) => a.body.taskId === null);
    const ownTask = answers.findIndex((a) => a.body.taskId !== null);
    const replay = (i: number) => h.post(sent[i]!.body, { ...sent[i]!.headers, 'X-Gitea-Delivery': randomUUID() });
    expect((await replay(counted)).body).toEqual({ status: 'duplicate', taskId: null });
    expect((await replay(ownTask)).body).toEqual({ status: 'duplicate', taskId: answers[ownTask]!.body.taskId });
    expect((await h.post(sent[counted]!.body, sent[counted]!.headers)).body).toEqual(answers[counted]!.body);
    expect((await store.list<RejectedMentionRecord>(SECURITY_EVENTS))[0]!.count).toBe(N);
    expect(await store.list('tasks')).toHaveLength(REJECTED_TASKS_PER_AUTHOR_DAY);

    // The API's task list and detail show the excerpt in place of the text (same shapes).
    const detail = (await taskDetail(store, answers[ownTask]!.body.taskId))!;
    expect((detail['task'] as TaskRecord).instruction).toBe(text.slice(0, EXCERPT_CHARS));
    expect(detail['error']).toBe('actor_not_authorized');
    expect(taskSummary(tasks[0]!)['instruction']).toBe(text.slice(0, 159) + '…');

    // Kept as long as security events (30 days by default), then gone: tasks, their actors, the count.
    const policy = { deliveryRetentionMs: 30 * DAY_MS, taskRetentionMs: null, excerptOnlyTaskRetentionMs: 30 * DAY_MS };
    expect((await sweepRetention(store, policy, { now: () => Date.now() + 29 * DAY_MS })).tasks).toBe(0);
    const swept = await sweepRetention(store, policy, { now: () => Date.now() + 32 * DAY_MS });
    expect(swept).toMatchObject({ tasks: REJECTED_TASKS_PER_AUTHOR_DAY, securityEvents: 1 });
    expect(await store.list('tasks')).toEqual([]);
    expect(await store.list('actors')).toEqual([]);
    expect(await store.list('comments')).toEqual([]);
    expect(await store.list(SECURITY_EVENTS)).toEqual([]);
  });
});
