// The publisher's decisions (src/publish/publish-decisions.ts), without git or Gitea. The I/O shell
// (publisher.ts, pull-requests.ts, keep-change.ts) is covered by test/e2e/publish.e2e.test.ts.
import { describe, expect, it } from 'vitest';
import type { TurnRecord } from '../../src/domain/records.js';
import { GiteaPullsError } from '../../src/publish/gitea-pulls.js';
import {
  commitIdentity,
  containsSecret,
  isSameRepoPull,
  nextSettleDelay,
  nothingNew,
  owedFromBefore,
  patchFileName,
  publishErrorCode,
  publishTarget,
  pullCreateRetryDelay,
  pullRequestStep,
  pushFailureCode,
  standingRefusal,
  summaryFor,
  trackingRefFor,
} from '../../src/publish/publish-decisions.js';
import { PublishError, type PublishRecord } from '../../src/publish/publish-types.js';

const pull = (
  headRef: string,
  head: { id?: number; repo_id?: number; full_name?: string },
  base: { id?: number; repo_id?: number },
  allow_maintainer_edit?: boolean | null,
) => ({
  head: { ref: headRef, sha: 's', repo_id: head.repo_id ?? null, repo: head.id === undefined ? null : { id: head.id, full_name: head.full_name ?? 'x/y' } },
  base: { ref: 'main', repo_id: base.repo_id ?? null, repo: base.id === undefined ? null : { id: base.id, full_name: 'x/y' } },
  ...(allow_maintainer_edit === undefined ? {} : { allow_maintainer_edit }),
});
const code = (fn: () => unknown) => {
  try {
    fn();
    return null;
  } catch (e) {
    return e instanceof PublishError ? e.errorCode : 'other';
  }
};

describe('publish target', () => {
  it('an issue goes to its own branch', () => {
    expect(publishTarget({ resource: { kind: 'issue', number: 4 }, pull: null, prefix: 'ccweb/', defaultBranch: 'main' })).toEqual({ kind: 'issue', target: 'ccweb/issue-4', fork: null });
  });
  it('a same-repository pull request goes to its head branch', () => {
    const resource = { kind: 'pull_request' as const, number: 9 };
    expect(publishTarget({ resource, pull: pull('feature', { id: 1 }, { id: 1 }), prefix: 'p/', defaultBranch: 'main' })).toEqual({ kind: 'same_repo_pull', target: 'feature', fork: null });
  });
  it('a fork pull request goes to its head branch in the fork, only with maintainer edits; never to a branch of the base repository', () => {
    const resource = { kind: 'pull_request' as const, number: 9 };
    const fork = (edit: boolean | null | undefined, headRef = 'feature', full_name = 'bob/widget') =>
      publishTarget({ resource, pull: pull(headRef, { id: 2, full_name }, { id: 1 }, edit), prefix: 'p/', defaultBranch: 'main' });
    expect(fork(true)).toEqual({ kind: 'fork_pull', target: 'feature', fork: { owner: 'bob', name: 'widget' } });
    // The fork's own main is the branch its author opened for edits: allowed (it is not the base's).
    expect(fork(true, 'main')).toEqual({ kind: 'fork_pull', target: 'main', fork: { owner: 'bob', name: 'widget' } });
    for (const edit of [false, null, undefined]) expect(code(() => fork(edit)), String(edit)).toBe('fork_edits_not_allowed');
    expect(code(() => fork(true, '-x'))).toBe('publish_target_invalid');
    // A deleted fork (no head repository) or a name that is no owner/name is not guessed at.
    expect(code(() => publishTarget({ resource, pull: pull('f', { repo_id: 2 }, { repo_id: 1 }, true), prefix: 'p/', defaultBranch: 'main' }))).toBe('publish_target_missing');
    for (const bad of ['bob', 'bob/widget/x', '../widget', 'bob/wid get']) expect(code(() => fork(true, 'f', bad)), bad).toBe('publish_target_missing');
  });
  it("fetches a fork's branch into a namespace of its own, never over origin's refs", () => {
    expect(trackingRefFor('main', null)).toBe('refs/remotes/origin/main');
    expect(trackingRefFor('main', { owner: 'bob', name: 'widget' })).toBe('refs/ccweb-forks/bob/widget/main');
  });
  it('tells same-repository pull requests by repo.id, else by repo_id', () => {
    expect(isSameRepoPull(pull('f', { id: 1, repo_id: 5 }, { id: 1, repo_id: 6 }))).toBe(true);
    expect(isSameRepoPull(pull('f', { repo_id: 5 }, { repo_id: 5 }))).toBe(true);
    expect(isSameRepoPull(pull('f', { repo_id: 5 }, { id: 5, repo_id: 6 }))).toBe(false);
    // Only one side has repo.id: compare repo_id.
    expect(isSameRepoPull(pull('f', { id: 1, repo_id: 5 }, { repo_id: 5 }))).toBe(true);
  });
  it('never the default branch, never an unsafe name', () => {
    const resource = { kind: 'pull_request' as const, number: 9 };
    expect(code(() => publishTarget({ resource, pull: pull('main', { id: 1 }, { id: 1 }), prefix: 'p/', defaultBranch: 'main' }))).toBe('publish_target_default');
    expect(code(() => publishTarget({ resource, pull: pull('-x', { id: 1 }, { id: 1 }), prefix: 'p/', defaultBranch: 'main' }))).toBe('publish_target_invalid');
    expect(code(() => publishTarget({ resource, pull: pull('a..b', { id: 1 }, { id: 1 }), prefix: 'p/', defaultBranch: 'main' }))).toBe('publish_target_invalid');
  });
});

describe('what is owed', () => {
  const rec = (over: Partial<PublishRecord>) => ({ status: 'published', commits: [], ...over }) as PublishRecord;
  it('a stored intent or recorded commits mean a delivery may be owed', () => {
    expect(owedFromBefore(undefined)).toBe(false);
    expect(owedFromBefore(rec({ status: 'pushing' }))).toBe(true);
    expect(owedFromBefore(rec({ commits: ['a'] }))).toBe(true);
    expect(owedFromBefore(rec({ status: 'nothing_to_publish' }))).toBe(false);
  });
  it('nothing new only when nothing is ahead and nothing is owed to this same branch', () => {
    expect(nothingNew({ ahead: 0, owedBefore: false, previousBranch: null, target: 'b' })).toBe(true);
    expect(nothingNew({ ahead: 1, owedBefore: false, previousBranch: null, target: 'b' })).toBe(false);
    expect(nothingNew({ ahead: 0, owedBefore: true, previousBranch: 'b', target: 'b' })).toBe(false);
    expect(nothingNew({ ahead: 0, owedBefore: true, previousBranch: 'other', target: 'b' })).toBe(true);
  });
  it('a refusal earlier in the task (the agent\'s tool) still stands when nothing new was made since', () => {
    expect(standingRefusal(rec({ status: 'kept', errorCode: 'fork_edits_not_allowed', message: 'pull request #2 comes from the fork bob/widget' }))).toEqual({ errorCode: 'fork_edits_not_allowed', message: 'pull request #2 comes from the fork bob/widget' });
    expect(standingRefusal(rec({ status: 'kept', errorCode: 'fork_unreachable', message: null }))).toEqual({ errorCode: 'fork_unreachable', message: 'fork_unreachable' });
    expect(standingRefusal(undefined)).toBeNull();
    for (const status of ['published', 'nothing_to_publish', 'not_published', 'pushing'] as const) expect(standingRefusal(rec({ status, errorCode: null, message: null }))).toBeNull();
  });
  it('the pull request step follows the mode and the kind of target', () => {
    expect(pullRequestStep('pull_request', 'issue')).toBe('ensure_pull');
    expect(pullRequestStep('pull_request', 'same_repo_pull')).toBe('use_resource_pull');
    expect(pullRequestStep('pull_request', 'fork_pull')).toBe('use_resource_pull');
    expect(pullRequestStep('branch', 'issue')).toBe('none');
    expect(pullRequestStep('branch', 'fork_pull')).toBe('none');
  });
});

describe('failure codes', () => {
  const r = (stderr: string) => ({ stderr, stdout: '' });
  it('codes a refused push', () => {
    expect(pushFailureCode(r(' ! [rejected] x -> x (non-fast-forward)'), false)).toBe('push_conflict');
    expect(pushFailureCode(r('Updates were rejected because the remote contains work'), true)).toBe('push_conflict');
    expect(pushFailureCode(r('remote: protected branch hook declined'), false)).toBe('push_rejected');
    expect(pushFailureCode(r('fatal: unable to access: The requested URL returned error: 403'), false)).toBe('push_rejected');
    expect(pushFailureCode(r('fatal: Authentication failed'), true)).toBe('push_rejected');
    expect(pushFailureCode(r('fatal: unable to connect'), false)).toBe('push_failed');
  });
  it('codes what a publish threw', () => {
    expect(publishErrorCode(new PublishError('push_conflict', 'm'))).toBe('push_conflict');
    expect(publishErrorCode(new GiteaPullsError({ code: 'gitea_server_error', message: 'm', status: 500, method: 'POST', endpoint: '/repos/{owner}/{repo}/pulls', attempts: 1 }))).toBe('publish_gitea_failed');
    expect(publishErrorCode(new Error('m'))).toBe('publish_failed');
  });
  it('retries a pull request creation only on transient answers, at most five times, waiting longer each time', () => {
    expect(pullCreateRetryDelay(undefined, 1)).toBe(300);
    expect(pullCreateRetryDelay(404, 2)).toBe(600);
    expect(pullCreateRetryDelay(409, 1)).toBe(300);
    expect(pullCreateRetryDelay(502, 4)).toBe(1200);
    expect(pullCreateRetryDelay(502, 5)).toBeNull();
    expect(pullCreateRetryDelay(422, 1)).toBeNull();
    expect(pullCreateRetryDelay(403, 1)).toBeNull();
  });
  it('waits for Gitea with a doubling delay capped at one second', () => {
    expect(nextSettleDelay(100)).toBe(200);
    expect(nextSettleDelay(800)).toBe(1000);
    expect(nextSettleDelay(1000)).toBe(1000);
  });
});

describe('texts and names', () => {
  it('finds the token, raw or base64, and ignores secrets too short to search for', () => {
    const token = 'abcdef0123456789';
    expect(containsSecret(`+ const t = "${token}"`, [token])).toBe(true);
    expect(containsSecret(`Authorization: Basic ${Buffer.from(token).toString('base64')}`, [token])).toBe(true);
    expect(containsSecret('nothing here', [token])).toBe(false);
    expect(containsSecret('abc appears', ['abc'])).toBe(false);
  });
  it('commits as the bot with a noreply address on the Gitea host', () => {
    expect(commitIdentity('bot', 'https://git.example.org:3000/')).toEqual(['-c', 'user.name=bot', '-c', 'user.email=bot@noreply.git.example.org']);
    expect(commitIdentity('bot', 'not a url')).toEqual(['-c', 'user.name=bot', '-c', 'user.email=bot@noreply.localhost']);
  });
  it('summarises with the given text, else the last normal turn\'s answer', () => {
    const turns = [{ kind: 'normal', finalMessage: 'first' }, { kind: 'normal', finalMessage: 'second' }, { kind: 'reply_retry', finalMessage: 'retry' }] as TurnRecord[];
    expect(summaryFor('given', turns)).toBe('given');
    expect(summaryFor(undefined, turns)).toBe('second');
    expect(summaryFor(null, [])).toBeNull();
  });
  it('names patch files safely', () => {
    expect(patchFileName('t-1.a_b')).toBe('t-1.a_b.patch');
    expect(patchFileName('../x/y')).toBe('.._x_y.patch');
  });
});
