/**
 * The receipt as the task's tracking comment — pure, no I/O: which stage a task state
 * shows, what the receipt says at that stage, and whether an edit is due. The worker that edits the
 * comment is receipt-progress-worker.ts.
 *
 * Only service-made data goes in, as for every receipt: the `received` sentence, a stage word, the
 * elapsed time, a step made of a checked program/tool name or counts (domain/agent-step.ts), links
 * Gitea itself gave (the answer's and the pull request's) or built from the task's own thread URL,
 * a duration, a token count, an error code with its fixed sentence.
 */
import type { AgentStep } from '../domain/agent-step.js';
import type { ProgressMemo, ProgressStage } from '../domain/record-fields.js';
import type { TaskRecord } from '../domain/records.js';
import { DEFAULT_LOCALE, messages, type Locale } from '../messages/catalogue.js';
import { describeErrorCode, receivedReceiptText, unpublishedSentences, type UnpublishedChange } from './receipt-text.js';

const STAGE_OF_STATE: Record<string, ProgressStage> = {
  received: 'queued',
  queued: 'queued',
  preparing: 'preparing',
  running: 'working',
  waiting_user: 'waiting_user',
  retry_wait: 'retry_wait',
  blocked_workspace: 'blocked',
  publishing: 'publishing',
  verifying_reply: 'verifying',
  aborting: 'stopping',
  succeeded: 'done',
  succeeded_with_rest_fallback: 'done',
  failed: 'failed',
  failed_reply: 'failed',
  cancelled: 'cancelled',
  aborted: 'cancelled',
};

/** The stage a task state shows; null for states that have no receipt (ignored, duplicate, rejected). */
export function progressStageOf(state: string): ProgressStage | null {
  return STAGE_OF_STATE[state] ?? null;
}

export function isFinalStage(stage: ProgressStage): boolean {
  return stage === 'done' || stage === 'failed' || stage === 'cancelled';
}

/** Stages whose text changes while they last (the elapsed time): re-rendered on every tick. */
export function isTickingStage(stage: ProgressStage): boolean {
  return stage === 'queued' || stage === 'preparing' || stage === 'working' || stage === 'publishing' || stage === 'verifying' || stage === 'stopping' || stage === 'retry_wait';
}

export interface ProgressOutcome {
  /** The bot's confirmed answer on the thread. */
  answerUrl: string | null;
  branch: { name: string; url: string | null } | null;
  pullRequest: { number: number; url: string } | null;
  durationMs: number | null;
  tokens: number | null;
  /** What of the change did not reach Gitea and where it is kept (from the publish record, never from the agent). */
  unpublished?: UnpublishedChange | null;
}

export interface ProgressView {
  task: Pick<TaskRecord, 'taskId' | 'author' | 'errorCode'>;
  stage: ProgressStage;
  /** Since the task was received; shown while it is not final. */
  elapsedMs: number | null;
  step: AgentStep | null;
  outcome: ProgressOutcome | null;
  /** Notices already on the receipt (blocked, budget, resumed): kept by every later edit. */
  notices: readonly string[];
}

export function formatDuration(ms: number, locale: Locale = DEFAULT_LOCALE): string {
  const total = Math.max(0, Math.floor(ms / 1000));
  return messages(locale).progress.duration({ h: Math.floor(total / 3600), min: Math.floor((total % 3600) / 60), s: total % 60 });
}

export function stepText(step: AgentStep, locale: Locale = DEFAULT_LOCALE): string {
  const s = messages(locale).progress.step;
  switch (step.kind) {
    case 'command':
      return s.command(step.program);
    case 'tool':
      return s.tool(step.name);
    case 'file_change':
      return s.fileChange(step.files);
    case 'plan':
      return s.plan(step.done, step.total);
    case 'web_search':
      return s.webSearch;
    case 'thinking':
      return s.thinking;
  }
}

/** The receipt's text at a stage (without its marker). */
export function progressReceiptText(view: ProgressView, locale: Locale = DEFAULT_LOCALE): string {
  const p = messages(locale).progress;
  const final = isFinalStage(view.stage);
  const lines: string[] = [];
  const elapsed = !final && view.elapsedMs !== null ? formatDuration(view.elapsedMs, locale) : null;
  lines.push(p.stageLine({ stage: p.stage[view.stage], elapsed }));
  if (view.stage === 'working' && view.step) lines.push(`- ${p.stepLine(stepText(view.step, locale))}`);
  if (final && view.stage !== 'done' && view.task.errorCode) {
    lines.push(`- ${p.error({ code: view.task.errorCode, reason: describeErrorCode(view.task.errorCode, locale) })}`);
  }
  const o = view.outcome;
  if (final && o) {
    if (o.answerUrl) lines.push(`- ${p.answer(o.answerUrl)}`);
    if (o.branch) lines.push(`- ${p.branch(o.branch)}`);
    if (o.pullRequest) lines.push(`- ${p.pullRequest(o.pullRequest)}`);
    if (o.unpublished) for (const sentence of unpublishedSentences(o.unpublished, locale)) lines.push(`- ${sentence}`);
    if (o.durationMs !== null) lines.push(`- ${p.totals({ duration: formatDuration(o.durationMs, locale), tokens: o.tokens === null ? null : o.tokens.toLocaleString('en-US') })}`);
  }
  // The first line follows the stage: a finished task's receipt never still says "queued".
  return [receivedReceiptText(view.task, locale, view.stage), lines.join('\n'), ...view.notices].join('\n\n');
}

/** The web address of the task's repository, from the thread URL Gitea gave (`…/owner/repo/issues/3#…`). */
export function repositoryWebUrl(task: Pick<TaskRecord, 'commentUrl' | 'owner' | 'repo'>): string | null {
  const url = typeof task.commentUrl === 'string' ? task.commentUrl : '';
  if (!/^https?:\/\//.test(url)) return null;
  const at = url.toLowerCase().indexOf(`/${task.owner}/${task.repo}/`.toLowerCase());
  return at < 0 ? null : url.slice(0, at + task.owner.length + task.repo.length + 2);
}

/** A comment's address on the task's thread: the thread URL Gitea gave, with that comment's anchor. */
export function commentWebUrl(task: Pick<TaskRecord, 'commentUrl'>, commentId: number): string | null {
  const url = typeof task.commentUrl === 'string' ? task.commentUrl : '';
  if (!/^https?:\/\//.test(url)) return null;
  return `${url.split('#')[0]}#issuecomment-${commentId}`;
}

/** A branch's page: in the task's repository, or the fork it went to (`owner/name`). */
export function branchWebUrl(task: Pick<TaskRecord, 'commentUrl' | 'owner' | 'repo'>, branch: string, repository?: string | null): string | null {
  const own = repositoryWebUrl(task);
  if (!own) return null;
  const base = repository && /^[A-Za-z0-9._-]+\/[A-Za-z0-9._-]+$/.test(repository) ? `${own.slice(0, own.length - task.owner.length - task.repo.length - 1)}${repository}` : own;
  return `${base}/src/branch/${branch.split('/').map(encodeURIComponent).join('/')}`;
}

// Stored on the receipt row (`CommentRecord.progress`), so declared with it.
export type { ProgressMemo };

export type EditDecision = { kind: 'skip' } | { kind: 'wait'; ms: number } | { kind: 'edit' };

/**
 * Whether to edit now: never the same body twice (restarts re-render without an edit). The interval
 * after the last edit holds progress edits only: the final edit (`final`) goes out as soon as the
 * task ends, since the answer is already on the thread and the receipt must not lag behind it.
 */
export function editDecision(memo: ProgressMemo | null | undefined, bodyHash: string, nowMs: number, intervalMs: number, final = false): EditDecision {
  if (memo?.bodyHash === bodyHash) return { kind: 'skip' };
  if (!memo || final) return { kind: 'edit' };
  const since = nowMs - Date.parse(memo.at);
  return since >= intervalMs ? { kind: 'edit' } : { kind: 'wait', ms: intervalMs - since };
}
