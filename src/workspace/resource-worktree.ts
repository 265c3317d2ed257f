// One git worktree per resource (issue / pull request) over the repository's shared clone: the
// agent working on one issue has its own directory, so whatever it leaves there can never block the
// tasks of another. The shared clone (prepareWorkspace, context issue, objectsOnly) holds the objects
// and the remote-tracking refs and has no working tree (a 10⁵-file tree is written once per
// resource, not once more for nobody); nobody works in it. A shared clone that has a checkout is
// left as it is.
//
// Layout: <root>/<instance>/<owner>/<repo> (the shared clone, unchanged) and
// <root>/<instance>/.worktrees/<owner>/<repo>/<issue-N|pr-N> (Gitea owner names never start with '.',
// so `.worktrees` cannot collide with an owner).
//
// Branches in a worktree: an issue works on `<prefix>issue-<N>` — from origin's branch of that name
// when it exists (a follow-up continues the same pull request), else from the default branch; a pull
// request works on `pr-<N>` from `refs/pull/<N>/head`. Local commits not yet on the remote (a task that
// asked its user something and comes back) are kept: the branch is only moved forward, never back.
// A dirty worktree is reported (`workspace_dirty`, `ownResource: true`), never reset.
import { existsSync } from 'node:fs';
import { lstat, mkdir, realpath } from 'node:fs/promises';
import path from 'node:path';

import { inspectWorkspace } from './inspect-workspace.js';
import { describeFailure, runGit, type GitLogger, type GitResult } from './run-git.js';
import { failureResult, gitFailure, pullFetchFailure, WorkspaceFailure, type WorkspaceFailureResult } from './workspace-failure.js';
import { isSafeBranchName, prepareWorkspace, type PrepareWorkspaceInput } from './workspace-manager.js';
import { assertSafeSegment, isInside, WorkspacePathError } from '../domain/workspace-path.js';

export type ResourceRef = { kind: 'issue' | 'pull_request'; number: number };

/** The shared clone's input (which repository, how to reach it, time budget) and the resource's worktree. */
export interface ResourceWorktreeInput extends Omit<PrepareWorkspaceInput, 'context'> {
  resource: ResourceRef;
  /** The branch an issue's changes go to (`<prefix>issue-<N>`). */
  issueBranch: string;
  /**
   * The task coming back after asking its user something (waiting_user): uncommitted changes in the
   * worktree are its own from before the question (no other task of the resource ran meanwhile), so it
   * continues on them instead of being blocked. A half-done git operation still blocks.
   */
  continueDirty?: boolean;
}

export type ResourceWorktreeResult =
  | {
      ok: true;
      path: string;
      /** The shared clone. */
      repoPath: string;
      head: string;
      /** The local branch checked out in the worktree. */
      branch: string;
      /** The remote-tracking ref the branch was started from or moved to. */
      upstream: string;
      defaultBranch: string;
      lastFetchAt: string;
      /** Local commits kept because they are not on the remote yet. */
      keptLocalCommits: number;
    }
  | WorkspaceFailureResult;

/** `<root>/<instance>/.worktrees/<owner>/<repo>/<issue-N|pr-N>`; throws WorkspacePathError when unsafe. */
export function resourceWorktreePath(root: string, instanceId: string, owner: string, repo: string, resource: ResourceRef): string {
  assertSafeSegment('instance id', instanceId);
  assertSafeSegment('owner', owner);
  assertSafeSegment('repo', repo);
  if (!Number.isSafeInteger(resource.number) || resource.number <= 0) throw new WorkspacePathError('resource number is invalid');
  const base = path.resolve(root);
  const full = path.resolve(base, instanceId, '.worktrees', owner, repo, `${resource.kind === 'issue' ? 'issue' : 'pr'}-${resource.number}`);
  if (!isInside(base, full) || full === base) throw new WorkspacePathError('worktree path escapes the root');
  return full;
}

export async function prepareResourceWorktree(input: ResourceWorktreeInput): Promise<ResourceWorktreeResult> {
  if (!isSafeBranchName(input.issueBranch)) return { ok: false, code: 'git_failed', retryable: false, message: 'issue branch name is not acceptable' };
  let wtPath: string;
  try {
    wtPath = resourceWorktreePath(input.root, input.instanceId ?? 'default', input.owner, input.repo, input.resource);
  } catch (error) {
    if (error instanceof WorkspacePathError) return { ok: false, code: 'path_invalid', retryable: false, message: error.message };
    throw error;
  }
  // The shared clone: clone or fetch; objects and refs only (nobody works in it, every resource has
  // its worktree). Its own failures are the repository's.
  const shared = await prepareWorkspace({
    objectsOnly: true,
    root: input.root,
    owner: input.owner,
    repo: input.repo,
    cloneUrl: input.cloneUrl,
    token: input.token,
    context: { kind: 'issue' },
    timeoutMs: input.timeoutMs,
    ...(input.instanceId ? { instanceId: input.instanceId } : {}),
    ...(input.defaultBranch ? { defaultBranch: input.defaultBranch } : {}),
    ...(input.signal ? { signal: input.signal } : {}),
    ...(input.logger ? { logger: input.logger } : {}),
    ...(input.now ? { now: input.now } : {}),
  });
  if (!shared.ok) return shared;
  try {
    return await worktree(input, shared.path, shared.defaultBranch, shared.lastFetchAt, wtPath);
  } catch (error) {
    return failureResult(error, input.token, wtPath);
  }
}

async function worktree(input: ResourceWorktreeInput, repoPath: string, defaultBranch: string, lastFetchAt: string, wtPath: string) {
  const timeoutMs = input.timeoutMs ?? 120_000;
  const git = (args: string[], cwd: string): Promise<GitResult> =>
    runGit(args, { cwd, timeoutMs, logger: input.logger, secrets: [input.token], signal: input.signal });
  const must = async (args: string[], cwd: string): Promise<GitResult> => {
    const r = await git(args, cwd);
    if (!r.ok) throw gitFailure(args, r);
    return r;
  };
  const resolve = async (ref: string, cwd: string): Promise<string | null> => {
    const r = await git(['rev-parse', '--verify', '--quiet', `${ref}^{commit}`], cwd);
    return r.ok ? r.stdout.trim() : null;
  };

  let branch: string;
  let upstream: string;
  if (input.resource.kind === 'pull_request') {
    const n = input.resource.number;
    upstream = `refs/remotes/origin/pr/${n}`;
    const args = ['fetch', '--quiet', 'origin', `+refs/pull/${n}/head:${upstream}`];
    const r = await runGit(args, { cwd: repoPath, timeoutMs, logger: input.logger, token: input.token, scopeUrl: input.cloneUrl, signal: input.signal });
    if (!r.ok) throw pullFetchFailure(n, args, r);
    branch = `pr-${n}`;
  } else {
    branch = input.issueBranch;
    const remoteBranch = `refs/remotes/origin/${input.issueBranch}`;
    upstream = (await resolve(remoteBranch, repoPath)) ? remoteBranch : `refs/remotes/origin/${defaultBranch}`;
  }
  const upstreamSha = await resolve(upstream, repoPath);
  if (!upstreamSha) throw new WorkspaceFailure('git_failed', false, `${upstream} does not exist`);

  await mkdir(path.dirname(wtPath), { recursive: true });
  const realRoot = await realpath(input.root);
  const realParent = await realpath(path.dirname(wtPath));
  if (!isInside(realRoot, realParent)) throw new WorkspaceFailure('path_invalid', false, 'worktree path escapes the root (symbolic link)');

  const existing = await lstat(wtPath).catch(() => undefined);
  let keptLocalCommits = 0;
  if (!existing) {
    // A worktree directory removed by hand leaves a registration behind: prune it first.
    await must(['worktree', 'prune'], repoPath);
    // The branch may exist locally from an earlier worktree of this resource: keep its unpublished commits.
    const local = await resolve(`refs/heads/${branch}`, repoPath);
    const startPoint = local && !(await isAncestor(git, local, upstreamSha, repoPath)) ? local : upstreamSha;
    if (startPoint === local) keptLocalCommits = await countAhead(git, upstreamSha, local!, repoPath);
    await must(['worktree', 'add', '--quiet', '--no-track', '-B', branch, wtPath, startPoint], repoPath);
  } else {
    if (!existing.isDirectory() || existing.isSymbolicLink()) throw new WorkspaceFailure('workspace_dirty', false, 'something other than a directory is at the worktree path; left untouched', true);
    const dotGit = path.join(wtPath, '.git');
    const st = await lstat(dotGit).catch(() => undefined);
    if (!st || !st.isFile()) throw new WorkspaceFailure('workspace_dirty', false, 'the worktree path is not a git worktree of this repository; left untouched', true);
    const inspection = await inspectWorktree(wtPath, timeoutMs, input.logger);
    if (inspection && !(inspection.kind === 'changes' && input.continueDirty)) throw new WorkspaceFailure('workspace_dirty', false, inspection.reason, true);
    const head = await resolve('HEAD', wtPath);
    const current = (await git(['symbolic-ref', '--quiet', '--short', 'HEAD'], wtPath)).stdout.trim();
    if (inspection) {
      // Its own unfinished work (continueDirty): left exactly as it is.
    } else if (head === upstreamSha && current === branch) {
      // Already there (the resource's last task pushed this very commit): a checkout would only
      // re-read a 10⁵-file index to change nothing.
    } else if (head && current === branch && !(await isAncestor(git, head, upstreamSha, wtPath))) {
      // Unpublished local commits: keep them; publishing brings them onto the remote branch.
      keptLocalCommits = await countAhead(git, upstreamSha, head, wtPath);
    } else {
      // Clean tree, nothing unpublished: move (forward, or onto the resource's branch) without --force.
      await must(['checkout', '--quiet', '--no-track', '-B', branch, upstreamSha, '--'], wtPath);
    }
  }
  const head = (await must(['rev-parse', '--verify', 'HEAD^{commit}'], wtPath)).stdout.trim();
  return { ok: true as const, path: wtPath, repoPath, head, branch, upstream, defaultBranch, lastFetchAt, keptLocalCommits };
}

/** Why the worktree is not clean, or null. The worktree's git dir is `.git/worktrees/<name>` in the shared clone. */
async function inspectWorktree(wtPath: string, timeoutMs: number, logger?: GitLogger): Promise<{ kind: 'operation' | 'changes'; reason: string } | null> {
  const gitDir = await runGit(['rev-parse', '--git-dir'], { cwd: wtPath, timeoutMs, logger });
  if (gitDir.ok) {
    const dir = path.resolve(wtPath, gitDir.stdout.trim());
    for (const marker of ['index.lock', 'HEAD.lock', 'MERGE_HEAD', 'CHERRY_PICK_HEAD', 'REVERT_HEAD', 'rebase-merge', 'rebase-apply']) {
      if (existsSync(path.join(dir, marker))) return { kind: 'operation', reason: `${marker} exists in the worktree's git directory (an interrupted or running git operation)` };
    }
  }
  // inspectWorkspace looks for markers under <path>/.git/ (a file here) and runs status.
  const inspection = await inspectWorkspace(wtPath, { timeoutMs, logger });
  if (inspection.state === 'dirty') return { kind: 'changes', reason: inspection.reason };
  if (inspection.state === 'error') return { kind: 'operation', reason: describeFailure(inspection.args, inspection.result) };
  return null;
}

async function isAncestor(git: (a: string[], cwd: string) => Promise<GitResult>, a: string, b: string, cwd: string): Promise<boolean> {
  return (await git(['merge-base', '--is-ancestor', a, b], cwd)).ok;
}

async function countAhead(git: (a: string[], cwd: string) => Promise<GitResult>, from: string, to: string, cwd: string): Promise<number> {
  const r = await git(['rev-list', '--count', `${from}..${to}`], cwd);
  return r.ok ? Number(r.stdout.trim()) || 0 : 0;
}
