// The publisher's decisions from data alone: which branch a change goes to, whether
// anything is owed, how a refusal is coded, when to try a pull request again. publisher.ts runs git
// and the Gitea API around them.
import type { TaskRecord, TurnRecord } from '../domain/records.js';
import type { GitResult } from '../workspace/run-git.js';
import { isSafeBranchName } from '../workspace/workspace-manager.js';
import { issueBranchName } from './branch-names.js';
import { GiteaPullsError, type GiteaPull } from './gitea-pulls.js';
import { PublishError, type DeliveryMode, type PublishRecord } from './publish-types.js';

/** `git -c` arguments making the bot the author and committer (`<login>@noreply.<gitea host>`). */
export function commitIdentity(botLogin: string, giteaUrl: string): string[] {
  let host = 'localhost';
  try {
    host = new URL(giteaUrl).hostname || 'localhost';
  } catch {
    // keep localhost: the address is only cosmetic here
  }
  return ['-c', `user.name=${botLogin}`, '-c', `user.email=${botLogin}@noreply.${host}`];
}

/** The summary the commit and pull request texts are made from: the given one, else the last normal turn's answer. */
export function summaryFor(given: string | null | undefined, turns: readonly TurnRecord[]): string | null {
  return given ?? turns.filter((t) => t.kind === 'normal').at(-1)?.finalMessage ?? null;
}

/** A delivery was under way before (intent stored, or commits recorded): a push or pull request may still be owed. */
export function owedFromBefore(previous: PublishRecord | undefined): boolean {
  return previous?.status === 'pushing' || (previous?.commits.length ?? 0) > 0;
}

/** Pull requests whose head and base live in the same repository (Gitea fills either `repo.id` or `repo_id`). */
export function isSameRepoPull(pull: Pick<GiteaPull, 'head' | 'base'>): boolean {
  const headId = pull.head.repo?.id;
  const baseId = pull.base.repo?.id;
  return headId !== undefined && baseId !== undefined ? headId === baseId : pull.head.repo_id === pull.base.repo_id;
}

export type TargetKind = 'issue' | 'same_repo_pull' | 'fork_pull';

/** The repository a fork pull request's head branch lives in (`head.repo.full_name`). */
export interface ForkRepository {
  owner: string;
  name: string;
}

// Gitea's owner and repository alphabet; `.` and `..` would walk the clone URL's path elsewhere.
const REPO_SEGMENT = /^(?!\.{1,2}$)[A-Za-z0-9_.-]{1,100}$/;

/**
 * Where the change goes: an issue's own branch; a same-repository pull request's head branch; a
 * fork's pull request its head branch IN THE FORK, and only when its author allows edits by
 * maintainers. Never a branch of the base repository for a fork: that would carry the
 * fork's commits (its workflow files among them) into the base repository, where they run with its
 * secrets. Never the base's default branch, never an unsafe name (all throw a PublishError). A fork's
 * head may be the fork's own default branch: that is the branch its author opened for edits.
 */
export function publishTarget(input: {
  resource: TaskRecord['resource'];
  pull: (Pick<GiteaPull, 'head' | 'base'> & { allow_maintainer_edit?: boolean | null | undefined }) | null;
  prefix: string;
  defaultBranch: string;
}): { kind: TargetKind; target: string; fork: ForkRepository | null } {
  const { resource, pull, prefix } = input;
  if (resource.kind === 'issue' || !pull) {
    return checked({ kind: 'issue', target: issueBranchName(prefix, resource.number), fork: null }, input.defaultBranch);
  }
  if (isSameRepoPull(pull)) return checked({ kind: 'same_repo_pull', target: pull.head.ref, fork: null }, input.defaultBranch);
  const [owner, name, ...rest] = (pull.head.repo?.full_name ?? '').split('/');
  if (!owner || !name || rest.length > 0 || !REPO_SEGMENT.test(owner) || !REPO_SEGMENT.test(name)) {
    throw new PublishError('publish_target_missing', `the fork of pull request #${resource.number} is gone (Gitea names no head repository)`);
  }
  if (pull.allow_maintainer_edit !== true) {
    throw new PublishError(
      'fork_edits_not_allowed',
      `pull request #${resource.number} comes from the fork ${owner}/${name}, whose author does not allow edits by maintainers; the bot does not push a fork's commits into this repository, so the change was not published`,
    );
  }
  if (!isSafeBranchName(pull.head.ref)) throw new PublishError('publish_target_invalid', `branch name ${JSON.stringify(pull.head.ref)} is not acceptable`);
  return { kind: 'fork_pull', target: pull.head.ref, fork: { owner, name } };
}

function checked<T extends { target: string }>(t: T, defaultBranch: string): T {
  if (!isSafeBranchName(t.target)) throw new PublishError('publish_target_invalid', `branch name ${JSON.stringify(t.target)} is not acceptable`);
  if (t.target === defaultBranch) {
    throw new PublishError('publish_target_default', `the change would go to the default branch ${defaultBranch}; the bot never pushes there`);
  }
  return t;
}

/**
 * The local ref a target branch is fetched into. A fork's branch gets a namespace of its own: under
 * `refs/remotes/origin/` a fork's `main` would overwrite the base repository's `origin/main` in the
 * shared clone, and the next issue would start from (and push) the fork's commits.
 */
export function trackingRefFor(target: string, fork: ForkRepository | null): string {
  return fork ? `refs/ccweb-forks/${fork.owner}/${fork.name}/${target}` : `refs/remotes/origin/${target}`;
}

/**
 * A refusal of this task's change that still stands: an earlier publish of the task (the agent's
 * tool, during its turn) was refused and kept the change, and nothing new was made since. The later
 * publish finds a clean worktree, but that is not "nothing to publish": the change was refused, and
 * the task must end with that refusal rather than as a plain success.
 */
export function standingRefusal(previous: Pick<PublishRecord, 'status' | 'errorCode' | 'message'> | undefined): { errorCode: string; message: string } | null {
  if (previous?.status !== 'kept' || !previous.errorCode) return null;
  return { errorCode: previous.errorCode, message: previous.message ?? previous.errorCode };
}

/** Nothing new on top of the remote, and no delivery to this same branch owed from before a restart. */
export function nothingNew(input: { ahead: number; owedBefore: boolean; previousBranch: string | null | undefined; target: string }): boolean {
  return input.ahead === 0 && !(input.owedBefore && input.previousBranch === input.target);
}

/** The pull request step: none (mode), the PR itself (any pull request, a fork's too), or one to ensure (issue). */
export function pullRequestStep(mode: DeliveryMode, kind: TargetKind): 'none' | 'use_resource_pull' | 'ensure_pull' {
  if (mode !== 'pull_request') return 'none';
  return kind === 'issue' ? 'ensure_pull' : 'use_resource_pull';
}

const REJECTED_PUSH = [/protected branch/i, /pre-receive hook declined/i, /not allowed to push/i, /permission/i, /denied/i, /returned error: 403/i, /forbidden/i];
const NON_FAST_FORWARD = [/non-fast-forward/i, /\(fetch first\)/i, /rejected.*stale info/i, /Updates were rejected/i];

/** A refused push: not fast-forward (someone pushed meanwhile), rejected by Gitea's rules or auth, or failed otherwise. */
export function pushFailureCode(r: Pick<GitResult, 'stderr' | 'stdout'>, authFailed: boolean): 'push_conflict' | 'push_rejected' | 'push_failed' {
  const text = `${r.stderr}\n${r.stdout}`;
  if (NON_FAST_FORWARD.some((re) => re.test(text))) return 'push_conflict';
  if (REJECTED_PUSH.some((re) => re.test(text)) || authFailed) return 'push_rejected';
  return 'push_failed';
}

/** The error code a failed publish carries, by what threw. */
export function publishErrorCode(error: unknown): string {
  if (error instanceof PublishError) return error.errorCode;
  if (error instanceof GiteaPullsError) return 'publish_gitea_failed';
  return 'publish_failed';
}

export const PULL_CREATE_ATTEMPTS = 5;

/**
 * After a failed pull-request creation (and no open one found): wait this long and try again, or null
 * to give up. A lost answer, a conflict or a branch Gitea has not registered yet (404/409/5xx) is
 * worth another try; any other refusal is final.
 */
export function pullCreateRetryDelay(status: number | undefined, attempt: number): number | null {
  const transient = status === undefined || status === 404 || status === 409 || status >= 500;
  return transient && attempt < PULL_CREATE_ATTEMPTS ? 300 * attempt : null;
}

/** The service token, or its base64 form (as in an HTTP auth header), appears in the text. */
export function containsSecret(text: string, secrets: readonly string[]): boolean {
  return secrets.some((secret) => {
    if (secret.length < 4) return false;
    const b64 = Buffer.from(secret).toString('base64').replace(/=+$/, '');
    return text.includes(secret) || (b64.length >= 8 && text.includes(b64));
  });
}

/** The patch file of a kept change: one per task, a safe file name. */
export function patchFileName(taskId: string): string {
  return `${taskId.replace(/[^A-Za-z0-9._-]/g, '_')}.patch`;
}

/** Backoff while waiting for Gitea to show a write: 100 ms doubling, at most 1 s. */
export function nextSettleDelay(delay: number): number {
  return Math.min(delay * 2, 1_000);
}
