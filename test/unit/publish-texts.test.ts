// Change delivery's pure parts: deterministic names, the commit message with the task trailer, the
// pull request texts, and the receipts that say where an unpublished change is kept.
import { describe, expect, it } from 'vitest';
import { issueBranchName, keptBranchName, pullRequestMarker, taskTrailer, withheldBranchName } from '../../src/publish/branch-names.js';
import { cleanSummary, commitMessage, pullRequestBody, pullRequestTitle } from '../../src/publish/commit-message.js';
import { failureReceiptText, notPublishedReceiptText } from '../../src/receipts/receipt-text.js';
import { isSafeBranchName } from '../../src/workspace/workspace-manager.js';
import { resourceWorktreePath } from '../../src/workspace/resource-worktree.js';

describe('change delivery names', () => {
  it('are deterministic per resource and valid branch names', () => {
    expect(issueBranchName('ccweb/', 7)).toBe('ccweb/issue-7');
    expect(withheldBranchName('T1')).toBe('ccweb-kept/T1-withheld');
    expect(keptBranchName('t/../x y')).toBe('ccweb-kept/t_.._x_y');
    for (const b of [issueBranchName('ccweb/', 7), withheldBranchName('01J2ABCDEF'), keptBranchName('01J2ABCDEF')]) expect(isSafeBranchName(b), b).toBe(true);
    expect(taskTrailer('T1')).toBe('Ccweb-Task: T1');
    expect(pullRequestMarker('T1', 'default:a/b:issue:7')).toBe('<!-- ccweb pull-request taskId=T1 resource=default:a/b:issue:7 -->');
  });

  it('one worktree per resource under <root>/<instance>/.worktrees, never outside the root', () => {
    expect(resourceWorktreePath('/w', 'default', 'acme', 'widget', { kind: 'issue', number: 4 })).toBe('/w/default/.worktrees/acme/widget/issue-4');
    expect(resourceWorktreePath('/w', 'default', 'acme', 'widget', { kind: 'pull_request', number: 4 })).toBe('/w/default/.worktrees/acme/widget/pr-4');
    expect(() => resourceWorktreePath('/w', 'default', '..', 'widget', { kind: 'issue', number: 4 })).toThrow();
    expect(() => resourceWorktreePath('/w', 'default', 'acme', 'widget', { kind: 'issue', number: 0 })).toThrow();
  });
});

describe('commit and pull request texts', () => {
  it('the commit message is the agent summary plus the task trailer, markers and control characters removed', () => {
    const msg = commitMessage({ summary: 'Fix the flaky login test\n\nRetry once.\n<!-- ccweb taskId=X turnKey=X:1 resource=r -->\u0007', taskId: 'T9', resourceLabel: '#3' });
    expect(msg).toBe('Fix the flaky login test\n\nRetry once.\n\nCcweb-Task: T9\n');
    expect(commitMessage({ summary: null, taskId: 'T9', resourceLabel: '#3' })).toBe('ccweb: changes for #3\n\nCcweb-Task: T9\n');
    expect(commitMessage({ summary: 'x'.repeat(200), taskId: 'T', resourceLabel: '#1' }).split('\n')[0]!.length).toBe(72);
    expect(cleanSummary('ok\nCCWEB_WAITING_USER')).toBe('ok');
  });

  it('the pull request references the issue and carries the task marker', () => {
    const body = pullRequestBody({ summary: 'Did it', issueNumber: 5, taskId: 'T5', marker: pullRequestMarker('T5', 'r') });
    expect(body).toContain('#5');
    expect(body).toContain('<!-- ccweb pull-request taskId=T5 resource=r -->');
    expect(pullRequestTitle(null, 5)).toBe('ccweb: changes for #5');
  });
});

describe('receipts about changes', () => {
  const kept = { publish: { kept: { branch: 'ccweb-kept/T1', patchFile: '/data/patches/T1.patch' } } };
  it('a failed publish names the cause and where the change is kept', () => {
    expect(failureReceiptText({ taskId: 'T1', errorCode: 'push_rejected', stoppedBy: null, ...kept }, 'failed')).toContain('`ccweb-kept/T1`'); // zh, the default
    const text = failureReceiptText({ taskId: 'T1', errorCode: 'push_rejected', stoppedBy: null, ...kept }, 'failed', 'en');
    expect(text).toContain('Gitea refused to accept the change');
    expect(text).toContain('`push_rejected`');
    expect(text).toContain('`ccweb-kept/T1`');
    expect(text).toContain('`patches/T1.patch`');
    expect(text).not.toContain('/data/'); // the data directory's absolute path stays private
    expect(failureReceiptText({ taskId: 'T1', errorCode: 'turn_failed', stoppedBy: null }, 'failed', 'en')).not.toContain('kept');
  });

  it('an unpublished change (delivery off) is one plain notice naming where it is kept', () => {
    expect(notPublishedReceiptText({ taskId: 'T3', ...kept }, 'en')).toMatch(/^giteabot: the changes of task T3 were not published.*`ccweb-kept\/T1`/);
    expect(notPublishedReceiptText({ taskId: 'T3', ...kept })).toContain('没有发布');
  });
});
