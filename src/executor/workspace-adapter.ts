import { prepareWorkspace } from '../workspace/index.js';
import { cloneUrlFor } from '../webhook/repository-origin.js';
import type { WorkspacePort } from './task-executor.js';

/**
 * The executor's workspace step on top of the git workspace manager. With `giteaUrl` (the service
 * always gives it) the clone URL is built from the configured Gitea and the repository's current
 * owner/name, never taken from the record a payload wrote (issue 15): the token goes to that origin only.
 */
export function createWorkspaceAdapter(options: { root: string; token: string; timeoutMs?: number; giteaUrl?: string }): WorkspacePort {
  return {
    async prepare(task, repo, signal, current) {
      const fullName = current ?? { owner: repo.owner, name: repo.name };
      const result = await prepareWorkspace({
        root: options.root,
        owner: repo.owner,
        repo: repo.name,
        cloneUrl: options.giteaUrl === undefined ? repo.cloneUrl : cloneUrlFor(options.giteaUrl, fullName.owner, fullName.name),
        token: options.token,
        context: task.resource.kind === 'pull_request' ? { kind: 'pull_request', number: task.resource.number } : { kind: 'issue' },
        defaultBranch: repo.defaultBranch,
        timeoutMs: options.timeoutMs,
        signal,
      });
      if (!result.ok) return { ok: false, code: result.code, retryable: result.retryable, message: result.message };
      return { ok: true, path: result.path, head: result.head, lastFetchAt: result.lastFetchAt };
    },
  };
}
