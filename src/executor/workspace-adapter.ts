import { prepareWorkspace } from '../workspace/index.js';
import { prepareResourceWorktree, resourceWorktreePath } from '../workspace/resource-worktree.js';
import { issueBranchName } from '../publish/branch-names.js';
import { cloneUrlFor } from '../gitea/clone-url.js';
import type { WorkspacePort } from './ports.js';

/**
 * The executor's workspace step on top of the git workspace manager. With `worktrees` (change
 * delivery), every resource gets its own git worktree over the repository's shared clone, so one
 * resource's leftovers never block another's tasks; without it, the repository's single checkout.
 * With `giteaUrl` (the service always gives it) the clone URL is built from the configured Gitea and
 * the repository's current owner/name, never taken from the record a payload wrote: the
 * token goes to that origin only.
 */
export function createWorkspaceAdapter(options: {
  root: string;
  token: string;
  timeoutMs?: number;
  giteaUrl?: string;
  worktrees?: { branchPrefix: string };
}): WorkspacePort {
  const worktrees = options.worktrees;
  return {
    async prepare(task, repo, signal, current) {
      const fullName = current ?? { owner: repo.owner, name: repo.name };
      const cloneUrl = options.giteaUrl === undefined ? repo.cloneUrl : cloneUrlFor(options.giteaUrl, fullName.owner, fullName.name);
      if (worktrees) {
        const result = await prepareResourceWorktree({
          root: options.root,
          instanceId: repo.instanceId,
          owner: repo.owner,
          repo: repo.name,
          cloneUrl,
          token: options.token,
          defaultBranch: repo.defaultBranch,
          resource: task.resource,
          issueBranch: issueBranchName(worktrees.branchPrefix, task.resource.number),
          timeoutMs: options.timeoutMs,
          signal,
          // Back from waiting_user: while a task waits, the resource's new mentions join it, so the
          // worktree's changes are this task's own.
          continueDirty: (task.followUps?.length ?? 0) > 0,
        });
        if (!result.ok) return { ok: false, code: result.code, retryable: result.retryable, message: result.message };
        return { ok: true, path: result.path, head: result.head, lastFetchAt: result.lastFetchAt };
      }
      const result = await prepareWorkspace({
        root: options.root,
        owner: repo.owner,
        repo: repo.name,
        cloneUrl,
        token: options.token,
        context: task.resource.kind === 'pull_request' ? { kind: 'pull_request', number: task.resource.number } : { kind: 'issue' },
        defaultBranch: repo.defaultBranch,
        timeoutMs: options.timeoutMs,
        signal,
      });
      if (!result.ok) return { ok: false, code: result.code, retryable: result.retryable, message: result.message };
      return { ok: true, path: result.path, head: result.head, lastFetchAt: result.lastFetchAt };
    },
    ...(worktrees
      ? { pathFor: (task, repo) => resourceWorktreePath(options.root, repo.instanceId, repo.owner, repo.name, task.resource) }
      : {}),
  };
}
