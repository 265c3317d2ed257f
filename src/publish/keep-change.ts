import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { redactSecrets } from '../workspace/git-credentials.js';
import type { GitResult } from '../workspace/run-git.js';
import { keptBranchName } from './branch-names.js';
import { commitMessage } from './commit-message.js';
import { patchFileName } from './publish-decisions.js';
import type { PublishRecord } from './publish-types.js';

export interface WorktreeGit {
  /** Runs git in the worktree; the result says whether it worked. */
  git: (args: string[]) => Promise<GitResult>;
  /** Runs git in the worktree; throws a PublishError when it fails. */
  must: (args: string[]) => Promise<GitResult>;
  /** The commit a ref names, or null. */
  resolve: (ref: string) => Promise<string | null>;
}

/**
 * Keeps an unpublished change as a local branch `ccweb-kept/<taskId>` and a patch file, and leaves
 * the worktree clean at `upstream`: the change is safe in two places, and the resource's next task
 * starts from the remote state again.
 */
export async function keepChange(
  deps: WorktreeGit & { identity: string[]; patchDir: string; secrets: readonly string[] },
  taskId: string,
  upstream: string | null,
): Promise<PublishRecord['kept']> {
  const { git, must, resolve } = deps;
  // Anything still uncommitted is committed first, so the kept branch has all of it.
  const status = await git(['--no-optional-locks', 'status', '--porcelain=v1', '-z', '--untracked-files=all']);
  if (status.ok && status.stdout.length > 0) {
    await must(['add', '--all', '--', '.']);
    await git([...deps.identity, 'commit', '--quiet', '--no-verify', '--no-gpg-sign', '-m', commitMessage({ summary: null, taskId, resourceLabel: 'kept change' })]);
  }
  const head = await resolve('HEAD');
  const base = upstream ?? (await resolve('@{upstream}')) ?? null;
  if (!head || (base && head === base)) return null;
  const branch = keptBranchName(taskId);
  await must(['branch', '--force', branch, head]);
  const patch = base ? await git(['format-patch', '--stdout', '--no-color', `${base}..${head}`]) : await git(['show', '--no-color', head]);
  await mkdir(deps.patchDir, { recursive: true });
  const patchFile = path.join(deps.patchDir, patchFileName(taskId));
  await writeFile(patchFile, redactSecrets(patch.stdout, deps.secrets), { mode: 0o600 });
  if (base) await must(['reset', '--quiet', '--hard', base]);
  return { branch, patchFile };
}
