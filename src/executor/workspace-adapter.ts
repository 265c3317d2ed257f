import { prepareWorkspace } from '../workspace/index.js';
import type { WorkspacePort } from './task-executor.js';

/** The executor's workspace step on top of the git workspace manager. */
export function createWorkspaceAdapter(options: { root: string; token: string; timeoutMs?: number }): WorkspacePort {
  return {
    async prepare(task, repo, signal) {
      const result = await prepareWorkspace({
        root: options.root,
        owner: repo.owner,
        repo: repo.name,
        cloneUrl: repo.cloneUrl,
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
