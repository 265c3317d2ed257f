// Deterministic names: the same task, after any crash, pushes to the same branch and looks
// for the same pull request, which is what makes check-then-act on Gitea possible.

export const DEFAULT_BRANCH_PREFIX = 'ccweb/';

/** The branch of an issue's changes: `<prefix>issue-<N>`; every task of that issue continues it. */
export function issueBranchName(prefix: string, issueNumber: number): string {
  return `${prefix}issue-${issueNumber}`;
}

/** Where a change that could not be published is kept in the shared clone: `ccweb-kept/<taskId>`. */
export function keptBranchName(taskId: string): string {
  return `ccweb-kept/${taskId.replace(/[^A-Za-z0-9._-]/g, '_')}`;
}

/** The trailer naming the task in every commit the service makes (`git interpret-trailers` syntax). */
export function taskTrailer(taskId: string): string {
  return `Ccweb-Task: ${taskId}`;
}

/** The marker in a pull request body the service opened: which task opened it. */
export function pullRequestMarker(taskId: string, resourceKey: string): string {
  return `<!-- ccweb pull-request taskId=${taskId} resource=${resourceKey} -->`;
}

/** Where the paths the publisher refused to commit (CI definitions) are kept: `ccweb-kept/<taskId>-withheld`. */
export function withheldBranchName(taskId: string): string {
  return `${keptBranchName(taskId)}-withheld`;
}
