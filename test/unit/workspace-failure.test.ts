// The failure answers of workspace preparation (src/workspace/workspace-failure.ts): pure, on
// hand-made git results.
import { describe, expect, it } from 'vitest';
import type { GitResult } from '../../src/workspace/run-git.js';
import { failureResult, gitFailure, pullFetchFailure, WorkspaceFailure } from '../../src/workspace/workspace-failure.js';

const failed = (stderr: string, over: Partial<GitResult> = {}): GitResult =>
  ({ ok: false, exitCode: 128, stdout: '', stderr, timedOut: false, durationMs: 5, ...over });

describe('workspace failures', () => {
  it('a failed git command keeps its class and says what git said', () => {
    const auth = gitFailure(['fetch', '--quiet', 'origin'], failed('fatal: Authentication failed for http://127.0.0.1/acme/widget.git'));
    expect(auth).toMatchObject({ code: 'auth_failed', retryable: true, ownResource: false });
    expect(auth.message).toMatch(/^git fetch failed \(exit 128\): fatal: Authentication failed/);
    expect(gitFailure(['fetch'], failed('', { timedOut: true }))).toMatchObject({ code: 'timeout', retryable: true });
  });

  it('a missing refs/pull/N/head is named; a timed-out or other fetch failure is classified as usual', () => {
    const args = ['fetch', '--quiet', 'origin', '+refs/pull/5/head:refs/remotes/origin/pr/5'];
    expect(pullFetchFailure(5, args, failed("fatal: couldn't find remote ref refs/pull/5/head"))).toMatchObject({
      code: 'git_failed',
      retryable: false,
      message: 'pull request #5 has no refs/pull/5/head on origin',
    });
    expect(pullFetchFailure(5, args, failed("fatal: couldn't find remote ref refs/pull/5/head", { timedOut: true }))).toMatchObject({ code: 'timeout' });
    expect(pullFetchFailure(5, args, failed('fatal: unable to access: Could not resolve host: gitea'))).toMatchObject({ retryable: true });
  });

  it('the answer: a WorkspaceFailure as it is (ownResource only when set), anything else git_failed without the token', () => {
    expect(failureResult(new WorkspaceFailure('workspace_dirty', false, 'dirty', true), 'tok', '/w')).toEqual({
      ok: false,
      code: 'workspace_dirty',
      retryable: false,
      message: 'dirty',
      path: '/w',
      ownResource: true,
    });
    expect(failureResult(new WorkspaceFailure('path_invalid', false, 'escapes'), 'tok', '/w')).toEqual({ ok: false, code: 'path_invalid', retryable: false, message: 'escapes', path: '/w' });
    expect(failureResult(new Error('EACCES at http://x:tok_secret@h/'), 'tok_secret', '/w')).toEqual({
      ok: false,
      code: 'git_failed',
      retryable: false,
      message: 'EACCES at http://x:[REDACTED]@h/',
      path: '/w',
    });
    expect(failureResult('plain', '', '/w')).toMatchObject({ code: 'git_failed', message: 'plain' });
  });
});
