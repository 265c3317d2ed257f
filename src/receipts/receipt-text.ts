// The words of the service's own status comments (spec §6.4). Only data the service produced goes
// in: the task id, a Gitea login (checked against Gitea's login alphabet) and a fixed sentence per
// error code. Nothing from the untrusted comment text is ever echoed back.
import type { TaskRecord } from '../domain/records.js';

/** Task states that get one failure receipt; running/waiting/success states get none (§5.2.5). */
export const FAILURE_RECEIPT_STATES = ['failed', 'failed_reply', 'aborted', 'cancelled'] as const;
export type FailureReceiptState = (typeof FAILURE_RECEIPT_STATES)[number];

/**
 * A task blocked by its own resource's dirty worktree tells its user once (issue 14: never wait
 * silently): one notice per task, keyed like every receipt (`<taskId>:status:blocked_workspace`).
 */
export const BLOCKED_NOTICE_STATE = 'blocked_workspace';

export function blockedWorkspaceReceiptText(task: Pick<TaskRecord, 'taskId'>): string {
  return `giteabot: task ${task.taskId} is waiting: the workspace of this issue/pull request has changes left from an earlier run that were not published, so nothing was run. An operator can clean it up and unblock the task, or cancel it.`;
}

/** CCWEB_DELIVERY=off: the task's changes were not published; the user is told once where they are. */
export const NOT_PUBLISHED_NOTICE_STATE = 'changes_not_published';

export function notPublishedReceiptText(task: Pick<TaskRecord, 'taskId'> & { publish?: unknown }): string {
  return `giteabot: the changes of task ${task.taskId} were not published (change delivery is off on this service).${keptText(task)}`;
}

export function isFailureReceiptState(state: string): state is FailureReceiptState {
  return (FAILURE_RECEIPT_STATES as readonly string[]).includes(state);
}

const ERROR_SENTENCES: Record<string, string> = {
  mcp_command_missing: 'the Gitea tool server could not be started (command not found)',
  mcp_start_failed: 'the Gitea tool server exited right after it was started',
  mcp_initialize_failed: 'the Gitea tool server did not complete its start-up handshake',
  app_server_unavailable: 'the Codex app-server could not be reached',
  app_server_exited: 'the Codex app-server stopped unexpectedly',
  app_server_timeout: 'the Codex app-server did not answer in time',
  auth_failed: 'the repository could not be fetched (authentication failed)',
  git_failed: 'a git operation on the workspace failed',
  workspace_dirty: 'the workspace has local changes, so nothing was run',
  path_invalid: 'the workspace path is not valid',
  timeout: 'an operation timed out',
  turn_timeout: 'the agent did not finish in time',
  turn_failed: 'the agent run failed',
  turn_interrupted: 'the agent run was interrupted',
  interrupted_by_restart: 'the service restarted while the task was running',
  retry_limit_exceeded: 'it failed again after its one retry',
  abort_timeout: 'the running agent did not confirm the stop in time',
  executor_error: 'an internal error stopped it',
  turn_record_missing: 'the record of the agent run was missing',
  mcp_reply_missing: 'the agent\'s answer never appeared as a comment',
  reply_query_failed: 'Gitea could not be asked whether the answer was posted, so nothing was re-posted',
  rest_fallback_failed: 'the answer could not be posted as a comment',
  rest_fallback_unconfirmed: 'the answer was sent but could not be found on this issue afterwards',
  reply_unconfirmed: 'the agent\'s answer could not be confirmed on this issue',
  push_rejected: 'Gitea refused to accept the change (a protected branch or missing push permission)',
  push_conflict: 'the branch moved on Gitea and the change does not apply on top of it',
  push_failed: 'the change could not be pushed to Gitea',
  pull_request_refused: 'Gitea refused to open the pull request',
  publish_unverified: 'the pushed change could not be confirmed on Gitea',
  publish_target_default: 'the change would have gone to the default branch, which the bot never pushes to',
  publish_target_missing: 'the branch of this pull request no longer exists',
  publish_target_invalid: 'the branch name for the change is not acceptable',
  publish_secret_in_change: 'the change contained a secret of the service, so it was not pushed',
  publish_git_failed: 'a git operation while publishing the change failed',
  publish_gitea_failed: 'Gitea could not be asked about the branch or pull request',
  publish_failed: 'the change could not be published',
};

/** A plain sentence for an error code; unknown codes get a generic one (the code is shown beside it). */
export function describeErrorCode(code: string | null | undefined): string {
  if (!code) return 'an unexpected error stopped it';
  return ERROR_SENTENCES[code] ?? 'an unexpected error stopped it';
}

const LOGIN_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$/;

/** `@alice` for a Gitea login, or null when the text is not a plain login. */
export function mentionOf(login: string | null | undefined): string | null {
  return login && LOGIN_RE.test(login) ? `@${login}` : null;
}

/** Who stopped a task, from the runtime's `by` (`admin:alice`, `gitea:user:bob`, `bob`). */
export function describeStopper(by: string | null | undefined): string {
  if (!by) return 'someone';
  if (by.startsWith('admin:')) {
    const name = by.slice('admin:'.length);
    return LOGIN_RE.test(name) ? `operator ${name}` : 'an operator';
  }
  if (by === 'system') return 'the service';
  const login = by.startsWith('gitea:user:') ? by.slice('gitea:user:'.length) : by;
  return mentionOf(login) ?? 'someone';
}

export function receivedReceiptText(task: Pick<TaskRecord, 'taskId' | 'author'>): string {
  const who = mentionOf(task.author);
  return `giteabot: 已收到 — the request${who ? ` from ${who}` : ''} is queued (task ${task.taskId}).`;
}

/** Where an unpublished change was kept (change delivery), in the service's own words: nothing is lost. */
function keptText(task: { publish?: unknown }): string {
  const kept = (task.publish as { kept?: { branch?: unknown; patchFile?: unknown } | null } | undefined)?.kept;
  if (!kept || typeof kept.branch !== 'string' || typeof kept.patchFile !== 'string') return '';
  const name = (s: string) => s.replace(/[^A-Za-z0-9._/-]/g, '_');
  const file = kept.patchFile.split('/').at(-1) ?? '';
  return ` The change is kept: branch \`${name(kept.branch)}\` in the service's workspace and the patch \`patches/${name(file)}\` in its data directory.`;
}

export function failureReceiptText(
  task: Pick<TaskRecord, 'taskId' | 'errorCode' | 'stoppedBy'> & { publish?: unknown },
  state: FailureReceiptState,
): string {
  const code = task.errorCode ? ` (error code: \`${task.errorCode}\`)` : '';
  switch (state) {
    case 'cancelled':
      return `giteabot: task ${task.taskId} was cancelled by ${describeStopper(task.stoppedBy)} before it ran to the end.`;
    case 'aborted':
      return `giteabot: task ${task.taskId} was stopped by ${describeStopper(task.stoppedBy)} while it was running.`;
    case 'failed_reply':
      return `giteabot: task ${task.taskId} finished, but its answer is not on this issue: ${describeErrorCode(task.errorCode)}${code}.`;
    case 'failed':
      return `giteabot: task ${task.taskId} failed: ${describeErrorCode(task.errorCode)}${code}.${keptText(task)}`;
  }
}
