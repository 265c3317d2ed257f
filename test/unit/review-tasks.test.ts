// What a review delivery becomes, on the deliveries and review-API answers recorded from a
// real Gitea 1.26.3 (test/fixtures/gitea/webhooks/review_*): the normalised event, which review on
// Gitea it is, the tasks it makes, and the agent's input for them (file, line, side, hunk).
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { commentedLine } from '../../src/domain/review-input.js';
import type { TaskRecord } from '../../src/domain/records.js';
import { reviewOnGitea } from '../../src/gitea/review-on-gitea.js';
import { decideReview, matchReview, type GiteaReviewCommentFacts, type GiteaReviewFacts } from '../../src/intake/review-tasks.js';
import { turnInputText } from '../../src/sessions/developer-instructions.js';
import { normalizeComment } from '../../src/webhook/normalize-comment.js';
import { normalizeReview, reviewEventType, type NormalizedReview } from '../../src/webhook/review-event.js';
import { sha256Hex } from '../../src/intake/confirm-comment.js';
import { DEFAULT_RETRY_POLICY, pendingRecord, reviewPendingKey } from '../../src/intake/pending-intake.js';
import type { NormalizedComment } from '../../src/webhook/normalize-comment.js';

/** The review as the pending record's comment (what the admin page lists; no comment of its own). */
const normalizeAsComment = (r: NormalizedReview): NormalizedComment => ({
  instanceId: 'default', deliveryId: r.deliveryId, deliveryKey: r.deliveryKey, eventType: 'pull_request_comment', action: r.action, repo: r.repo, repoKey: r.repoKey,
  resource: r.resource, resourceKey: r.resourceKey, comment: { id: 0, body: r.content, createdAt: '', updatedAt: '', htmlUrl: '' }, actor: r.actor, refs: r.refs,
});

const dir = fileURLToPath(new URL('../fixtures/gitea/webhooks/', import.meta.url));
type Name = 'review_comment_single_web' | 'review_reply_web' | 'review_comment_api' | 'review_submitted_comment' | 'review_submitted_rejected';
const delivery = (name: Name) => ({
  body: readFileSync(`${dir}${name}.json`),
  headers: (JSON.parse(readFileSync(`${dir}${name}.headers.json`, 'utf8')) as { headers: Record<string, string> }).headers,
});
const readBack = (name: Name) => JSON.parse(readFileSync(`${dir}${name}.readback.json`, 'utf8')) as { review: unknown; comments: unknown[] };

/** The fixture's read-back through the service's own adapter (the same mapping as against Gitea). */
async function gitea(name: Name): Promise<{ reviews: GiteaReviewFacts[]; comments: GiteaReviewCommentFacts[] }> {
  const rb = readBack(name);
  const adapter = reviewOnGitea({
    listPullReviews: async () => [rb.review] as never,
    listPullReviewComments: async () => rb.comments as never,
    getPullRequestAuthor: async () => ({ login: 'ccweb-bot' }),
  });
  return { reviews: await adapter.reviews('acme', 'widget', 2), comments: await adapter.comments('acme', 'widget', 2, 1) };
}

function review(name: Name): NormalizedReview {
  const d = delivery(name);
  const n = normalizeReview(d.headers, d.body, { botLogin: 'ccweb-bot' });
  if (!n.ok) throw new Error(n.issues);
  return n.value;
}

const off = { botLogin: 'ccweb-bot', requestChangesStartsTask: false };

describe('review deliveries of Gitea 1.26.3', () => {
  it('are told apart by X-Gitea-Event-Type; a reply in a line thread is an ordinary PR comment', () => {
    expect(reviewEventType(delivery('review_comment_single_web').headers)).toBe('pull_request_review_comment');
    expect(reviewEventType(delivery('review_submitted_rejected').headers)).toBe('pull_request_review_rejected');
    expect(reviewEventType(delivery('review_reply_web').headers)).toBeNull();
    const reply = delivery('review_reply_web');
    expect(normalizeComment(reply.headers, reply.body).ok).toBe(true);
  });

  it('normalise to the pull request, the sender and the review body; the unsigned header must agree with the signed review type', () => {
    const r = review('review_submitted_comment');
    expect(r).toMatchObject({ eventType: 'pull_request_review_comment', action: 'reviewed', repoKey: 'default:acme/widget', resource: { kind: 'pull_request', number: 2 }, actor: { login: 'acme', isBot: false }, content: '@ccweb-bot please address this review', pullRequestAuthor: 'alice', refs: { head: 'feature/login-retry', base: 'main' } });
    // Gitea sends no access in a review delivery's repository, not even the owner's: no hint to act on.
    expect(JSON.parse(delivery('review_submitted_comment').body.toString()).repository.permissions).toEqual({ admin: false, push: false, pull: false });
    expect(r).not.toHaveProperty('permissions');
    const d = delivery('review_submitted_comment');
    const lied = normalizeReview({ ...d.headers, 'X-Gitea-Event-Type': 'pull_request_review_approved' }, d.body);
    expect(lied).toEqual({ ok: false, code: 'invalid_payload', issues: 'X-Gitea-Event-Type does not match review.type' });
  });

  it('find their review on Gitea by sender, state and body, not by anything the payload names', async () => {
    const g = await gitea('review_submitted_comment');
    const r = review('review_submitted_comment');
    expect(matchReview(r, g.reviews)?.id).toBe(3);
    expect(matchReview({ ...r, content: 'something else' }, g.reviews)).toBeNull();
    expect(matchReview({ ...r, actor: { login: 'alice', isBot: false } }, g.reviews)).toBeNull();
    expect(decideReview(r, null, [], off)).toEqual({ kind: 'refused', reason: 'not_found' });
  });

  it('a review waiting for Gitea keeps no body: its record holds the review without it, and the match compares hashes', async () => {
    const g = await gitea('review_submitted_comment');
    const r = review('review_submitted_comment');
    const at = new Date('2026-08-01T10:00:00Z');
    const key = reviewPendingKey(r.repoKey, 'sha256:x');
    const rec = pendingRecord({ key, deliveryKey: r.deliveryKey, deliveryId: r.deliveryId, eventType: r.eventType, payloadHash: 'sha256:x', receivedAt: at, comment: normalizeAsComment(r), review: r, bodySha256: sha256Hex(r.content), command: 'task', source: null, error: 'review lookup: gitea_server_error 502' }, at, DEFAULT_RETRY_POLICY);
    expect(rec).toMatchObject({ key: 'default:acme/widget:review_delivery:sha256:x', state: 'waiting', attempts: 1, bodyChars: r.content.length, review: { content: '', deliveryId: r.deliveryId } });
    expect(matchReview(rec.review!, g.reviews, (body) => sha256Hex(body) === rec.bodySha256)?.id).toBe(3);
    expect(matchReview(rec.review!, g.reviews, (body) => sha256Hex(body) === sha256Hex('another body'))).toBeNull();
  });
});

describe('tasks a review makes', () => {
  it('a new line comment mentioning the bot: one task, deduplicated by the comment id, its input naming file, line, side and hunk', async () => {
    const g = await gitea('review_comment_single_web');
    const r = review('review_comment_single_web');
    const d = decideReview(r, matchReview(r, g.reviews), g.comments, off);
    if (d.kind !== 'items') throw new Error(d.kind);
    expect(d.items).toHaveLength(1);
    const [item] = d.items;
    expect(item!.triggerKey).toBe(`default:acme/widget:comment:3:created:${g.comments[0]!.updatedAt}`);
    expect(item!.comment.comment.id).toBe(3);
    expect(item!.comment.review).toMatchObject({ kind: 'line_comment', reviewId: 1, lines: [{ commentId: 3, path: 'src/login.js', line: 2, side: 'new', quote: '  return user === "demo" && password === "demo"; // retried by the caller' }] });
    const text = item!.comment.comment.body;
    expect(text).toContain("`src/login.js`, line 2 (the pull request's version)");
    expect(text).toContain('@@ -1,3 +1,3 @@');
    expect(text).toContain('+  return user === "demo" && password === "demo"; // retried by the caller');
    expect(text).toContain('@ccweb-bot is the retry comment still true here?');
  });

  it('a line comment without a mention, or by the bot: nothing', async () => {
    const g = await gitea('review_comment_single_web');
    const r = review('review_comment_single_web');
    const quiet = g.comments.map((c) => ({ ...c, body: 'just a remark' }));
    expect(decideReview(r, matchReview(r, g.reviews), quiet, off)).toEqual({ kind: 'ignored', reason: 'no_mention' });
    expect(decideReview({ ...r, actor: { login: 'CCWEB-bot', isBot: true } }, matchReview(r, g.reviews), g.comments, off)).toEqual({ kind: 'ignored', reason: 'bot_self_comment' });
  });

  it('a review whose body mentions the bot: ONE task whose input has the body and all three line comments', async () => {
    const g = await gitea('review_submitted_comment');
    const r = review('review_submitted_comment');
    const d = decideReview(r, matchReview(r, g.reviews), g.comments, off);
    if (d.kind !== 'items') throw new Error(d.kind);
    expect(d.items).toHaveLength(1);
    const item = d.items[0]!;
    expect(item.triggerKey).toBe('default:acme/widget:review:3:submitted');
    expect(item.comment.review).toMatchObject({ kind: 'review', trigger: 'mention', reviewId: 3 });
    expect(item.comment.review!.lines.map((l) => [l.path, l.line])).toEqual([['src/login.js', 1], ['src/login.js', 2], ['src/login.js', 3]]);
    const text = item.comment.comment.body;
    for (const s of ['@ccweb-bot please address this review', 'validate both arguments', 'drop the trailing comment', 'add a newline at the end', 'line 1', 'line 2', 'line 3', 'Line comments (3):']) expect(text).toContain(s);
    // Each line comment with its own hunk (Gitea cuts it at the commented line): three hunks, the last one to line 3.
    expect(text.match(/@@ -1,3 \+1,3 @@/g)).toHaveLength(3);
    expect(text).toContain('// retried by the caller\n }\n```');
  });

  it("request changes without a mention: a task only with the repository's option on and on the bot's own pull request", async () => {
    const g = await gitea('review_submitted_rejected');
    const r = review('review_submitted_rejected');
    const match = matchReview(r, g.reviews);
    expect(match?.state).toBe('REQUEST_CHANGES');
    expect(decideReview(r, match, g.comments, off)).toEqual({ kind: 'ignored', reason: 'no_mention' });
    // Off, on the bot's own pull request: still nothing.
    expect(decideReview(r, match, g.comments, { ...off, pullRequestAuthor: 'ccweb-bot' })).toEqual({ kind: 'ignored', reason: 'no_mention' });
    expect(decideReview(r, match, g.comments, { ...off, requestChangesStartsTask: true, pullRequestAuthor: 'alice' })).toEqual({ kind: 'ignored', reason: 'no_mention' });
    const on = decideReview(r, match, g.comments, { ...off, requestChangesStartsTask: true, pullRequestAuthor: 'ccweb-bot' });
    if (on.kind !== 'items') throw new Error(on.kind);
    expect(on.items).toHaveLength(1);
    expect(on.items[0]!.comment.review).toMatchObject({ kind: 'review', trigger: 'request_changes', reviewState: 'REQUEST_CHANGES' });
    expect(on.items[0]!.comment.comment.body).toContain('bound the retry');
  });
});

describe("the agent's input for a line comment", () => {
  it('says what it is, quotes it with file, line and hunk as untrusted data, and says where the answer goes', async () => {
    const g = await gitea('review_comment_single_web');
    const r = review('review_comment_single_web');
    const d = decideReview(r, matchReview(r, g.reviews), g.comments, off);
    if (d.kind !== 'items') throw new Error(d.kind);
    const c = d.items[0]!.comment;
    const task = { author: c.actor.login, commentUrl: c.comment.htmlUrl, resource: c.resource, instruction: c.comment.body, review: c.review } as unknown as TaskRecord;
    const input = turnInputText(task, { kind: 'normal', marker: '<!-- m -->' });
    expect(input).toContain('Gitea user "acme" wrote a line comment mentioning the bot on `src/login.js` line 2 of pull request #2 (https://gitea.example.com/acme/widget/pulls/2#issuecomment-3)');
    expect(input).toContain('```untrusted-comment');
    expect(input).toContain('@@ -1,3 +1,3 @@');
    expect(input).toContain("Gitea cannot reply in a line thread");
    expect(input).toContain('> `src/login.js` line 2:   return user === "demo" && password === "demo"; // retried by the caller');
  });

  it('takes the commented line from the end of the hunk, without its diff prefix', () => {
    expect(commentedLine('@@ -1 +1 @@\n-old\n+new\n')).toBe('new');
    expect(commentedLine('@@ -1 +1 @@\n-gone')).toBe('gone');
  });
});
