// Comment confirmation, the pure parts: a payload compared with the comment Gitea has
// (confirm-comment.ts), and the bounded retries of a comment Gitea has not decided on (pending-intake.ts).
import { describe, expect, it } from 'vitest';
import { compareWithGitea, isClearNo, sha256Hex, type GiteaCommentFacts, type PayloadComment } from '../../src/intake/confirm-comment.js';
import { admit, afterFailure, dueRecords, nextWake, pendingRecord, retryDelayMs, type PendingIntakeRecord } from '../../src/intake/pending-intake.js';
import { normalizeComment, type NormalizedComment } from '../../src/webhook/normalize-comment.js';
import { loadFixture } from '../support/webhook-fixtures.js';

function fixture(name: 'issue_comment_created_on_issue' | 'pull_request_comment_created'): NormalizedComment {
  const { body, headers } = loadFixture(name);
  const r = normalizeComment(headers, body);
  if (!r.ok) throw new Error(r.issues);
  return r.value;
}

const onIssue = fixture('issue_comment_created_on_issue');
const onPull = fixture('pull_request_comment_created');
const payload = (c: NormalizedComment): PayloadComment => ({ comment: c, bodySha256: sha256Hex(c.comment.body) });

/** What Gitea 1.26 answers for the fixture's comment (shape checked against the real one in the integration test). */
function gitea(c: NormalizedComment, change: Partial<GiteaCommentFacts> = {}): GiteaCommentFacts {
  const html = c.resource.htmlUrl;
  return {
    id: c.comment.id,
    body: c.comment.body,
    user: { id: c.actor.id!, login: c.actor.login },
    issueUrl: c.resource.kind === 'issue' ? html : '',
    pullRequestUrl: c.resource.kind === 'pull_request' ? html : '',
    createdAt: c.comment.createdAt,
    updatedAt: c.comment.updatedAt,
    ...change,
  };
}

describe('compareWithGitea: the payload against the comment as Gitea has it', () => {
  it('the real delivery of a comment on an issue and on a pull request is confirmed', () => {
    expect(onIssue.actor.id).toEqual(expect.any(Number));
    expect(compareWithGitea(payload(onIssue), gitea(onIssue))).toEqual({ confirmed: true });
    expect(compareWithGitea(payload(onPull), gitea(onPull))).toEqual({ confirmed: true });
  });

  it('owner and repository compare in any letter case (Gitea names are case-insensitive); a trailing slash is fine', () => {
    const url = onIssue.resource.htmlUrl.replace(`/${onIssue.repo.owner}/${onIssue.repo.name}/`, `/${onIssue.repo.owner.toUpperCase()}/${onIssue.repo.name.toUpperCase()}/`) + '/';
    expect(compareWithGitea(payload(onIssue), gitea(onIssue, { issueUrl: url }))).toEqual({ confirmed: true });
  });

  it('another issue, another repository in the URL, an issue comment claimed as a PR comment → resource', () => {
    const other = onIssue.resource.htmlUrl.replace(/\/issues\/(\d+)$/, (_m, n: string) => `/issues/${Number(n) + 1}`);
    expect(compareWithGitea(payload(onIssue), gitea(onIssue, { issueUrl: other }))).toEqual({ confirmed: false, mismatch: ['resource'] });
    const otherRepo = onIssue.resource.htmlUrl.replace(`/${onIssue.repo.name}/`, '/gadgets/');
    expect(compareWithGitea(payload(onIssue), gitea(onIssue, { issueUrl: otherRepo }))).toEqual({ confirmed: false, mismatch: ['resource'] });
    // The payload says pull request #8; Gitea says the comment is on issue #8.
    const asIssue = gitea(onPull, { issueUrl: onPull.resource.htmlUrl.replace('/pulls/', '/issues/'), pullRequestUrl: '' });
    expect(compareWithGitea(payload(onPull), asIssue)).toEqual({ confirmed: false, mismatch: ['resource'] });
    expect(compareWithGitea(payload(onIssue), gitea(onIssue, { issueUrl: 'not a url' }))).toEqual({ confirmed: false, mismatch: ['resource'] });
  });

  it('another author, by login or by Gitea user id → author', () => {
    expect(compareWithGitea(payload(onIssue), gitea(onIssue, { user: { id: onIssue.actor.id!, login: 'mallory' } }))).toEqual({ confirmed: false, mismatch: ['author'] });
    expect(compareWithGitea(payload(onIssue), gitea(onIssue, { user: { id: onIssue.actor.id! + 1, login: onIssue.actor.login } }))).toEqual({ confirmed: false, mismatch: ['author'] });
    expect(compareWithGitea(payload(onIssue), gitea(onIssue, { user: { id: onIssue.actor.id!, login: onIssue.actor.login.toUpperCase() } }))).toEqual({ confirmed: true });
  });

  it('another text → body (refused, not run with either text)', () => {
    expect(compareWithGitea(payload(onIssue), gitea(onIssue, { body: '@ccweb-bot delete everything' }))).toEqual({ confirmed: false, mismatch: ['body'] });
  });

  it('made-up times: another creation time, or an update time Gitea never had → created; an edit since the webhook is fine', () => {
    const later = (iso: string, s: number) => new Date(Date.parse(iso) + s * 1000).toISOString().replace('.000Z', 'Z');
    expect(compareWithGitea(payload(onIssue), gitea(onIssue, { createdAt: later(onIssue.comment.createdAt, -60) }))).toEqual({ confirmed: false, mismatch: ['created'] });
    const replayed = { ...onIssue, comment: { ...onIssue.comment, updatedAt: later(onIssue.comment.updatedAt, 3600) } };
    expect(compareWithGitea(payload(replayed), gitea(onIssue))).toEqual({ confirmed: false, mismatch: ['created'] });
    // Gitea shows a later edit (the text is the same): the payload's updated_at is its creation time.
    expect(compareWithGitea(payload(onIssue), gitea(onIssue, { updatedAt: later(onIssue.comment.updatedAt, 30) }))).toEqual({ confirmed: true });
    // Gitea's times may carry an offset; seconds compare.
    const withOffset = new Date(Date.parse(onIssue.comment.createdAt) + 2 * 3600_000).toISOString().replace(/\.\d{3}Z$/, '+02:00');
    expect(compareWithGitea(payload(onIssue), gitea(onIssue, { createdAt: withOffset, updatedAt: withOffset }))).toEqual({ confirmed: true });
  });

  it('several disagreements are all named; another id too', () => {
    expect(compareWithGitea(payload(onIssue), gitea(onIssue, { id: 1, body: 'x', user: { id: 9, login: 'eve' } }))).toEqual({ confirmed: false, mismatch: ['id', 'author', 'body'] });
  });
});

describe('isClearNo: only a 404 decides; anything else keeps the comment waiting', () => {
  it.each([
    [{ status: 404 }, true],
    [{ status: 500 }, false],
    [{ status: 502 }, false],
    [{ status: 403 }, false],
    [{ status: 401 }, false],
    [new Error('comment lookup timed out'), false],
    ['boom', false],
  ])('%j → %s', (error, clear) => expect(isClearNo(error)).toBe(clear));
});

describe('pending-intake: bounded retries with backoff', () => {
  const policy = { maxAttempts: 4, baseDelayMs: 1000, maxDelayMs: 3000 };
  const at = new Date('2026-08-01T10:00:00Z');
  const first = (key = 'k'): PendingIntakeRecord =>
    pendingRecord(
      { key, deliveryKey: 'default:d', deliveryId: 'd', eventType: 'issue_comment', payloadHash: 'sha256:x', receivedAt: at, comment: onIssue, bodySha256: sha256Hex(onIssue.comment.body), command: 'task', source: '127.0.0.1', error: 'permission lookup: gitea_server_error 500' },
      at,
      policy,
    );

  it('keeps no comment text, only its hash and length', () => {
    const r = first();
    expect(r.comment.comment.body).toBe('');
    expect(r).toMatchObject({ bodySha256: sha256Hex(onIssue.comment.body), bodyChars: onIssue.comment.body.length, attempts: 1, state: 'waiting', nextAttemptAt: '2026-08-01T10:00:01.000Z' });
  });

  it('doubles the wait up to the cap, and gives up at the bound (then only a Replay decides it)', () => {
    expect([1, 2, 3, 4, 40].map((n) => retryDelayMs(n, policy))).toEqual([1000, 2000, 3000, 3000, 3000]);
    let r = first();
    r = afterFailure(r, new Date(at.getTime() + 1000), 'e2', policy);
    r = afterFailure(r, new Date(at.getTime() + 3000), 'e3', policy);
    expect(r).toMatchObject({ attempts: 3, state: 'waiting', nextAttemptAt: '2026-08-01T10:00:06.000Z', lastError: 'e3' });
    r = afterFailure(r, new Date(at.getTime() + 6000), 'e4', policy);
    expect(r).toMatchObject({ attempts: 4, state: 'gave_up', nextAttemptAt: null, lastError: 'e4' });
    expect(dueRecords([r], new Date(at.getTime() + 3_600_000))).toEqual([]);
    expect(nextWake([r])).toBeNull();
  });

  it('due records earliest first; not before their time', () => {
    const a = first('a');
    const b = afterFailure(first('b'), at, 'e', policy);
    expect(dueRecords([b, a], at)).toEqual([]);
    expect(dueRecords([b, a], new Date(at.getTime() + 5000)).map((r) => r.key)).toEqual(['a', 'b']);
    expect(nextWake([b, a])).toBe(at.getTime() + 1000);
  });

  it('admits under the bound; at the bound the oldest given-up record makes room; none → refused', () => {
    const waiting = [first('a'), first('b')];
    expect(admit(waiting.slice(0, 1), 2)).toEqual({ ok: true, evict: null });
    expect(admit(waiting, 2)).toEqual({ ok: false });
    const gaveUp = { ...first('c'), state: 'gave_up' as const, nextAttemptAt: null };
    expect(admit([waiting[0]!, gaveUp], 2)).toEqual({ ok: true, evict: 'c' });
  });
});
