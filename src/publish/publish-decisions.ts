// The publisher's decisions from data alone (issue 14): which branch a change goes to, whether
// anything is owed, how a refusal is coded, when to try a pull request again. publisher.ts runs git
// and the Gitea API around them.
import type { TaskRecord, TurnRecord } from '../domain/records.js';
import type { GitResult } from '../workspace/run-git.js';
import { isSafeBranchName } from '../workspace/workspace-manager.js';
import { forkPullBranchName, issueBranchName } from './branch-names.js';
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

/**
 * Where the change goes: an issue's own branch; a same-repository pull request's head branch; for a
 * fork's pull request a branch of ours in the base repository. Never the default branch, never an
 * unsafe name (both throw a PublishError).
 */
export function publishTarget(input: {
  resource: TaskRecord['resource'];
  pull: Pick<GiteaPull, 'head' | 'base'> | null;
  prefix: string;
  defaultBranch: string;
}): { kind: TargetKind; target: string } {
  const { resource, pull, prefix } = input;
  let kind: TargetKind;
  let target: string;
  if (resource.kind === 'issue' || !pull) {
    kind = 'issue';
    target = issueBranchName(prefix, resource.number);
  } else {
    kind = isSameRepoPull(pull) ? 'same_repo_pull' : 'fork_pull';
    target = kind === 'same_repo_pull' ? pull.head.ref : forkPullBranchName(prefix, resource.number);
  }
  if (!isSafeBranchName(target)) throw new PublishError('publish_target_invalid', `branch name ${JSON.stringify(target)} is not acceptable`);
  if (target === input.defaultBranch) {
    throw new PublishError('publish_target_default', `the change would go to the default branch ${input.defaultBranch}; the bot never pushes there`);
  }
  return { kind, target };
}

/** Nothing new on top of the remote, and no delivery to this same branch owed from before a restart. */
export function nothingNew(input: { ahead: number; owedBefore: boolean; previousBranch: string | null | undefined; target: string }): boolean {
  return input.ahead === 0 && !(input.owedBefore && input.previousBranch === input.target);
}

/** The pull request step: none (mode), the PR itself (same repository), one to ensure (issue), or a link comment (fork). */
export function pullRequestStep(mode: DeliveryMode, kind: TargetKind): 'none' | 'use_resource_pull' | 'ensure_pull' | 'link_fork_branch' {
  if (mode !== 'pull_request') return 'none';
  if (kind === 'same_repo_pull') return 'use_resource_pull';
  return kind === 'issue' ? 'ensure_pull' : 'link_fork_branch';
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

/** The bot already linked this fork branch in the pull request (its marker in one of its comments). */
export function forkBranchLinked(comments: readonly { user: { login: string }; body: string }[], botLogin: string, marker: string): boolean {
  return comments.some((c) => c.user.login.toLowerCase() === botLogin.toLowerCase() && c.body.includes(marker));
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
