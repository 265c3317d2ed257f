// Is an existing workspace safe to switch? Reads only: never resets, cleans or deletes anything.
import { existsSync } from 'node:fs';
import path from 'node:path';

import { runGit, type GitLogger, type GitResult } from './run-git.js';

/** Files and directories whose presence means an operation is half done (or a git process died). */
export const IN_PROGRESS_MARKERS = [
  'index.lock',
  'HEAD.lock',
  'MERGE_HEAD',
  'CHERRY_PICK_HEAD',
  'REVERT_HEAD',
  'rebase-merge',
  'rebase-apply',
  'BISECT_LOG',
] as const;

export type WorkspaceInspection =
  | { state: 'clean' }
  | { state: 'dirty'; reason: string }
  | { state: 'error'; result: GitResult; args: string[] };

export async function inspectWorkspace(
  workspace: string,
  options: { timeoutMs: number; logger?: GitLogger; markersOnly?: boolean },
): Promise<WorkspaceInspection> {
  const gitDir = path.join(workspace, '.git');
  for (const marker of IN_PROGRESS_MARKERS) {
    if (existsSync(path.join(gitDir, marker))) {
      return { state: 'dirty', reason: `.git/${marker} exists (an interrupted or running git operation)` };
    }
  }
  // A clone without a working tree (objects and refs only) has nothing for status to look at.
  if (options.markersOnly) return { state: 'clean' };
  // --no-optional-locks: status must not take index.lock or rewrite the index.
  const args = ['--no-optional-locks', 'status', '--porcelain=v1', '-z', '--untracked-files=normal', '--ignore-submodules=none'];
  const result = await runGit(args, { cwd: workspace, timeoutMs: options.timeoutMs, logger: options.logger });
  if (!result.ok) return { state: 'error', result, args };
  const entries = result.stdout.split('\0').filter((e) => e.length > 0);
  if (entries.length === 0) return { state: 'clean' };
  const shown = entries.slice(0, 5).map((e) => JSON.stringify(e)).join(', ');
  const more = entries.length > 5 ? ` and ${entries.length - 5} more` : '';
  return { state: 'dirty', reason: `working tree has ${entries.length} uncommitted change(s): ${shown}${more}` };
}
