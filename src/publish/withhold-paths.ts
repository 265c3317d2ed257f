// The git side of refused paths (the decisions are in protected-paths.ts): what the agent changed
// under a CI folder is left out of the published commit, kept — a local branch
// `ccweb-kept/<taskId>-withheld` and a patch `<taskId>.withheld.patch`, as for other refusals — and
// then removed from the worktree, so the resource's next task does not find it as leftovers.
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { redactSecrets } from '../workspace/git-credentials.js';
import { withheldBranchName } from './branch-names.js';
import { commitMessage } from './commit-message.js';
import type { WorktreeGit } from './keep-change.js';
import { patchFileName } from './publish-decisions.js';
import { literalPathspec, nulList, refusedPaths, type PublishPathSettings } from './protected-paths.js';

export interface Withheld {
  paths: string[];
  branch: string;
  patchFile: string;
}

/** The staged paths (everything `git add --all` took) that may not be committed here. */
export async function stagedRefusedPaths(deps: Pick<WorktreeGit, 'must'>, settings: PublishPathSettings): Promise<string[]> {
  // --no-renames: a rename out of (or into) a CI folder shows both its paths.
  const staged = await deps.must(['diff', '--cached', '--name-only', '--no-renames', '-z']);
  return refusedPaths(nulList(staged.stdout), settings);
}

/** Takes the refused paths out of the index; the publisher then commits the rest. */
export async function unstage(deps: Pick<WorktreeGit, 'must'>, paths: readonly string[]): Promise<void> {
  await deps.must(['reset', '--quiet', '--', ...paths.map(literalPathspec)]);
}

/**
 * After the publisher's commit: the refused paths become one commit of their own on the withheld
 * branch, are written to the patch file, and the worktree goes back to the published commit.
 */
export async function setAside(
  deps: WorktreeGit & { identity: string[]; patchDir: string; secrets: readonly string[] },
  taskId: string,
  paths: readonly string[],
): Promise<Withheld> {
  const { must, resolve } = deps;
  const published = await resolve('HEAD');
  await must(['add', '--all', '--', ...paths.map(literalPathspec)]);
  await must([...deps.identity, 'commit', '--quiet', '--no-verify', '--no-gpg-sign', '-m', commitMessage({ summary: 'Withheld: CI definitions the bot does not publish', taskId, resourceLabel: 'withheld paths' })]);
  const branch = withheldBranchName(taskId);
  await must(['branch', '--force', branch, 'HEAD']);
  const patch = await must(['format-patch', '--stdout', '--no-color', 'HEAD~1..HEAD']);
  await mkdir(deps.patchDir, { recursive: true });
  const patchFile = path.join(deps.patchDir, patchFileName(taskId).replace(/\.patch$/, '.withheld.patch'));
  await writeFile(patchFile, redactSecrets(patch.stdout, deps.secrets), { mode: 0o600 });
  await must(['reset', '--quiet', '--hard', published ?? 'HEAD~1']);
  return { paths: [...paths], branch, patchFile };
}
