// How preparing a workspace fails, for the shared clone (workspace-manager.ts) and a resource's
// worktree (resource-worktree.ts) alike: a WorkspaceFailure thrown anywhere in a git sequence becomes
// the `{ ok: false, ... }` answer, so a caller never sees an exception for an expected failure.
import { classifyGitFailure } from './classify-git-failure.js';
import { describeFailure, type GitResult } from './run-git.js';

export type WorkspaceErrorCode = 'workspace_dirty' | 'auth_failed' | 'git_failed' | 'timeout' | 'path_invalid';

export interface WorkspaceFailureResult {
  ok: false;
  code: WorkspaceErrorCode;
  retryable: boolean;
  /** Redacted; safe to store and show. */
  message: string;
  path?: string;
  /** The resource's own worktree is in the way (a worktree, not the shared clone). */
  ownResource?: boolean;
}

export class WorkspaceFailure extends Error {
  constructor(
    readonly code: WorkspaceErrorCode,
    readonly retryable: boolean,
    message: string,
    readonly ownResource = false,
  ) {
    super(message);
  }
}

/** A failed git command: its class (auth, timeout, transient…) and what git said (runGit has redacted it). */
export function gitFailure(args: readonly string[], result: GitResult): WorkspaceFailure {
  const { code, retryable } = classifyGitFailure(result);
  return new WorkspaceFailure(code, retryable, describeFailure(args, result));
}

/** A failed fetch of `refs/pull/<n>/head`: a pull request Gitea has no head ref for is said so, not retried. */
export function pullFetchFailure(n: number, args: readonly string[], result: GitResult): WorkspaceFailure {
  if (!result.timedOut && /couldn't find remote ref/i.test(result.stderr)) {
    return new WorkspaceFailure('git_failed', false, `pull request #${n} has no refs/pull/${n}/head on origin`);
  }
  return gitFailure(args, result);
}

/**
 * The answer for an error thrown while preparing `path`: a WorkspaceFailure as it is; anything else
 * (a bug, a file system error) as `git_failed`, with the token cut out of its message.
 */
export function failureResult(error: unknown, token: string, path: string): WorkspaceFailureResult {
  if (error instanceof WorkspaceFailure) {
    return { ok: false, code: error.code, retryable: error.retryable, message: error.message, path, ...(error.ownResource ? { ownResource: true } : {}) };
  }
  const message = error instanceof Error ? error.message : String(error);
  return { ok: false, code: 'git_failed', retryable: false, message: token ? message.split(token).join('[REDACTED]') : message, path };
}
