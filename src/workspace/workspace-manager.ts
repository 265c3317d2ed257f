// Brings a repository's workspace to the state a task needs: clone on first use, fetch later, then
// check out the task's context (issue → default branch fresh from origin; PR → refs/pull/N/head).
// A dirty or half-operated workspace is reported, never reset, cleaned or deleted.
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { lstat, mkdir, readdir, realpath, rename, rm, rmdir } from 'node:fs/promises';
import path from 'node:path';

import { inspectWorkspace } from './inspect-workspace.js';
import { describeFailure, runGit, type GitLogger, type GitResult } from './run-git.js';
import { failureResult, gitFailure, pullFetchFailure, WorkspaceFailure, type WorkspaceFailureResult } from './workspace-failure.js';
import { isInside, workspacePathFor, WorkspacePathError } from '../domain/workspace-path.js';

export type WorkspaceContext = { kind: 'issue' } | { kind: 'pull_request'; number: number };

export type { WorkspaceErrorCode } from './workspace-failure.js';

export interface PrepareWorkspaceInput {
  /** The configured workspace root. */
  root: string;
  instanceId?: string;
  owner: string;
  repo: string;
  /** Token-free http(s) clone URL, e.g. `repository.clone_url` from the webhook. */
  cloneUrl: string;
  token: string;
  context: WorkspaceContext;
  /**
   * Objects and refs only (the shared clone under per-resource worktrees, resource-worktree.ts):
   * cloned without a checkout and never checked out, so a first task writes the tree once (in its
   * worktree) instead of twice, and a later one does not `git status` a tree nobody works in. An
   * in-progress marker still blocks it. Issue context only.
   */
  objectsOnly?: boolean;
  /** `repository.default_branch`; when absent, origin's HEAD is used. */
  defaultBranch?: string;
  /** Budget for the whole preparation; each git command gets what is left. Default 120 s. */
  timeoutMs?: number;
  /** Aborts the git command in flight (reported as `timeout`, retryable). */
  signal?: AbortSignal;
  logger?: GitLogger;
  now?: () => Date;
}

export interface PrepareWorkspaceSuccess {
  ok: true;
  path: string;
  /** The checked-out commit. */
  head: string;
  /** The local branch now checked out: the default branch, or `pr-<N>`. */
  branch: string;
  defaultBranch: string;
  action: 'cloned' | 'fetched';
  /** When origin was last contacted successfully (ISO); the caller stores it on the repository. */
  lastFetchAt: string;
}

export type PrepareWorkspaceFailure = Omit<WorkspaceFailureResult, 'ownResource'>;

export type PrepareWorkspaceResult = PrepareWorkspaceSuccess | PrepareWorkspaceFailure;

export const DEFAULT_WORKSPACE_TIMEOUT_MS = 120_000;

/** Validates a branch name we are about to pass to git (also `git check-ref-format` rules). */
export function isSafeBranchName(name: string): boolean {
  if (name.length === 0 || name.length > 200) return false;
  if (name.startsWith('-') || name.startsWith('/') || name.endsWith('/') || name.endsWith('.')) return false;
  if (name.endsWith('.lock') || name.includes('..') || name.includes('//') || name.includes('@{')) return false;
  if (name === '@' || name === 'HEAD') return false;
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u0020\u007f~^:?*[\\]/.test(name)) return false;
  return name.split('/').every((part) => part.length > 0 && !part.startsWith('.'));
}

function checkCloneUrl(cloneUrl: string): void {
  let url: URL;
  try {
    url = new URL(cloneUrl);
  } catch {
    throw new WorkspaceFailure('git_failed', false, 'clone URL is not a valid URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new WorkspaceFailure('git_failed', false, `clone URL must be http(s), got ${url.protocol}`);
  }
  if (url.username !== '' || url.password !== '') {
    throw new WorkspaceFailure('git_failed', false, 'clone URL must not carry credentials');
  }
  if (url.search !== '' || url.hash !== '') throw new WorkspaceFailure('git_failed', false, 'clone URL must not have a query');
}

/** Refuses a workspace path whose existing components (below the root) include a symlink. */
async function checkNoSymlinks(root: string, target: string): Promise<void> {
  const realRoot = await realpath(root);
  const rel = path.relative(path.resolve(root), target);
  let current = realRoot;
  for (const part of rel.split(path.sep)) {
    current = path.join(current, part);
    let st;
    try {
      st = await lstat(current);
    } catch {
      return; // Does not exist yet: nothing further can be a symlink.
    }
    if (st.isSymbolicLink()) throw new WorkspaceFailure('path_invalid', false, 'workspace path contains a symbolic link');
  }
  if (!isInside(realRoot, current)) throw new WorkspaceFailure('path_invalid', false, 'workspace path escapes the root');
}

// In-process serialisation per workspace path (the scheduler's repo lease is the real guard).
const inFlight = new Map<string, Promise<unknown>>();

async function serialised<T>(key: string, fn: () => Promise<T>): Promise<T> {
  const previous = inFlight.get(key) ?? Promise.resolve();
  const run = previous.then(fn, fn);
  const tail = run.catch(() => undefined);
  inFlight.set(key, tail);
  try {
    return await run;
  } finally {
    if (inFlight.get(key) === tail) inFlight.delete(key);
  }
}

export async function prepareWorkspace(input: PrepareWorkspaceInput): Promise<PrepareWorkspaceResult> {
  let workspace: string;
  try {
    workspace = workspacePathFor(input.root, input.instanceId ?? 'default', input.owner, input.repo);
  } catch (error) {
    if (error instanceof WorkspacePathError) {
      return { ok: false, code: 'path_invalid', retryable: false, message: error.message };
    }
    throw error;
  }
  try {
    return await serialised(workspace, () => prepare(input, workspace));
  } catch (error) {
    return failureResult(error, input.token, workspace);
  }
}

async function prepare(input: PrepareWorkspaceInput, workspace: string): Promise<PrepareWorkspaceSuccess> {
  checkCloneUrl(input.cloneUrl);
  if (input.context.kind === 'pull_request') {
    const n = input.context.number;
    if (!Number.isSafeInteger(n) || n <= 0) throw new WorkspaceFailure('git_failed', false, 'pull request number is invalid');
  }
  if (input.defaultBranch !== undefined && !isSafeBranchName(input.defaultBranch)) {
    throw new WorkspaceFailure('git_failed', false, 'default branch name is not acceptable');
  }
  const objectsOnly = input.objectsOnly === true;
  if (objectsOnly && input.context.kind !== 'issue') throw new WorkspaceFailure('git_failed', false, 'an objects-only clone has no pull request checkout');
  const deadline = Date.now() + (input.timeoutMs ?? DEFAULT_WORKSPACE_TIMEOUT_MS);
  const now = input.now ?? (() => new Date());

  const remaining = (): number => {
    const left = deadline - Date.now();
    if (left <= 0) throw new WorkspaceFailure('timeout', true, 'workspace preparation ran out of time');
    return left;
  };
  const local = (args: string[], cwd = workspace): Promise<GitResult> =>
    runGit(args, { cwd, timeoutMs: remaining(), logger: input.logger, secrets: [input.token], signal: input.signal });
  const remote = (args: string[], cwd = workspace): Promise<GitResult> =>
    runGit(args, {
      cwd,
      timeoutMs: remaining(),
      logger: input.logger,
      token: input.token,
      scopeUrl: input.cloneUrl,
      signal: input.signal,
    });
  const must = async (args: string[], result: Promise<GitResult>): Promise<GitResult> => {
    const r = await result;
    if (!r.ok) throw gitFailure(args, r);
    return r;
  };

  await mkdir(input.root, { recursive: true });
  await checkNoSymlinks(input.root, workspace);

  let action: 'cloned' | 'fetched';
  const existing = await lstat(workspace).catch(() => undefined);
  const gitDir = path.join(workspace, '.git');
  if (existing && !existing.isDirectory()) {
    throw new WorkspaceFailure('workspace_dirty', false, 'something other than a directory is at the workspace path; left untouched');
  }
  const hasGit = existing !== undefined && existsSync(gitDir);
  if (hasGit) {
    const gitStat = await lstat(gitDir);
    if (!gitStat.isDirectory()) {
      throw new WorkspaceFailure('workspace_dirty', false, '.git is not a directory (a worktree or gitdir link); left untouched');
    }
    const inspection = await inspectWorkspace(workspace, { timeoutMs: remaining(), logger: input.logger, markersOnly: objectsOnly });
    if (inspection.state === 'dirty') throw new WorkspaceFailure('workspace_dirty', false, inspection.reason);
    if (inspection.state === 'error') throw gitFailure(inspection.args, inspection.result);
    // The remote URL is ours to keep right (token-free); an agent may have changed it.
    const current = await local(['remote', 'get-url', 'origin']);
    if (!current.ok) {
      await must(['remote', 'add'], local(['remote', 'add', 'origin', input.cloneUrl]));
    } else if (current.stdout.trim() !== input.cloneUrl) {
      await must(['remote', 'set-url'], local(['remote', 'set-url', 'origin', input.cloneUrl]));
    }
    const fetchArgs = ['fetch', '--quiet', '--prune', 'origin', '+refs/heads/*:refs/remotes/origin/*'];
    await must(fetchArgs, remote(fetchArgs));
    action = 'fetched';
  } else {
    if (existing) {
      const entries = await readdir(workspace);
      if (entries.length > 0) {
        throw new WorkspaceFailure('workspace_dirty', false, 'workspace directory is not empty and not a git repository; left untouched');
      }
    }
    await cloneInto(input, workspace, remaining, must, objectsOnly);
    action = 'cloned';
  }
  const lastFetchAt = now().toISOString();

  const defaultBranch = input.defaultBranch ?? (await originHead(local, remote, must));
  let branch: string;
  let startPoint: string;
  if (input.context.kind === 'pull_request') {
    const n = input.context.number;
    const tracking = `refs/remotes/origin/pr/${n}`;
    const args = ['fetch', '--quiet', 'origin', `+refs/pull/${n}/head:${tracking}`];
    const r = await remote(args);
    if (!r.ok) throw pullFetchFailure(n, args, r);
    branch = `pr-${n}`;
    startPoint = tracking;
  } else {
    branch = defaultBranch;
    startPoint = `refs/remotes/origin/${defaultBranch}`;
    const exists = await local(['rev-parse', '--verify', '--quiet', `${startPoint}^{commit}`]);
    if (!exists.ok) throw new WorkspaceFailure('git_failed', false, `default branch '${defaultBranch}' does not exist on origin`);
    // Nothing to check out: the worktrees start from the remote-tracking ref.
    if (objectsOnly) return { ok: true, path: workspace, head: exists.stdout.trim(), branch, defaultBranch, action, lastFetchAt };
  }

  // The tree was checked clean above (or is a fresh clone), so a plain checkout overwrites nothing
  // of the user's; without --force git itself refuses if that were ever untrue.
  const checkoutArgs = ['checkout', '--quiet', '--no-track', '-B', branch, startPoint, '--'];
  const co = await local(checkoutArgs);
  if (!co.ok) {
    if (/would be overwritten|untracked working tree files/i.test(co.stderr)) {
      throw new WorkspaceFailure('workspace_dirty', false, describeFailure(checkoutArgs, co));
    }
    throw gitFailure(checkoutArgs, co);
  }
  const head = (await must(['rev-parse'], local(['rev-parse', '--verify', 'HEAD^{commit}']))).stdout.trim();
  return { ok: true, path: workspace, head, branch, defaultBranch, action, lastFetchAt };
}

async function cloneInto(
  input: PrepareWorkspaceInput,
  workspace: string,
  remaining: () => number,
  must: (args: string[], r: Promise<GitResult>) => Promise<GitResult>,
  objectsOnly: boolean,
): Promise<void> {
  const parent = path.dirname(workspace);
  await mkdir(parent, { recursive: true });
  // Clone beside the target and rename on success, so a killed clone never leaves a half
  // repository at the workspace path. The temporary directory is ours to remove.
  const temp = path.join(parent, `.ccweb-clone-${path.basename(workspace)}-${randomBytes(6).toString('hex')}`);
  // A full clone (with checkout), so an interrupted later step never leaves an unborn index that
  // would look like every file was deleted — unless nobody ever looks at its tree (objectsOnly: its
  // status is never asked, and the checkout would only double the first task's writing of the tree).
  const args = ['clone', '--quiet', ...(objectsOnly ? ['--no-checkout'] : []), '--origin', 'origin', '--', input.cloneUrl, temp];
  try {
    await must(
      args,
      runGit(args, {
        cwd: parent,
        timeoutMs: remaining(),
        logger: input.logger,
        token: input.token,
        scopeUrl: input.cloneUrl,
        signal: input.signal,
      }),
    );
    if (existsSync(workspace) && (await readdir(workspace)).length > 0) {
      throw new WorkspaceFailure('workspace_dirty', false, 'workspace path was filled while cloning; left untouched');
    }
    if (existsSync(workspace)) await rmdir(workspace); // empty, checked just above
    await rename(temp, workspace);
  } finally {
    await rm(temp, { recursive: true, force: true });
  }
}

async function originHead(
  local: (args: string[]) => Promise<GitResult>,
  remote: (args: string[]) => Promise<GitResult>,
  must: (args: string[], r: Promise<GitResult>) => Promise<GitResult>,
): Promise<string> {
  const read = async (): Promise<string | undefined> => {
    const r = await local(['symbolic-ref', '--quiet', 'refs/remotes/origin/HEAD']);
    const ref = r.stdout.trim();
    return r.ok && ref.startsWith('refs/remotes/origin/') ? ref.slice('refs/remotes/origin/'.length) : undefined;
  };
  let name = await read();
  if (name === undefined) {
    await must(['remote', 'set-head'], remote(['remote', 'set-head', 'origin', '--auto']));
    name = await read();
  }
  if (name === undefined || !isSafeBranchName(name)) {
    throw new WorkspaceFailure('git_failed', false, 'cannot tell the default branch of origin');
  }
  return name;
}
