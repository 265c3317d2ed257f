// The notices about limits and blocks, in the language of CCWEB_LOCALE: the words are in
// the message catalogue (src/messages/catalogue.ts); this module only shapes the service-made data
// they take (numbers, codes, UTC times, a checked login) the same way for every language.
import type { InputTooLargeNotice, QuotaNotice } from '../domain/record-fields.js';
import type { TaskRecord } from '../domain/records.js';
import { DEFAULT_LOCALE, messages, type Locale, type QuotaCode } from '../messages/catalogue.js';
import type { BudgetCode } from '../usage/usage-accounting.js';
import { formatDuration } from './receipt-progress.js';
import { mentionOf } from './receipt-text.js';

/** `2026-12-02 00:00 UTC` */
function utc(iso: string): string {
  return `${iso.slice(0, 10)} ${iso.slice(11, 16)} UTC`;
}

const n = (v: number) => v.toLocaleString('en-US');

// Stored on the refusal's receipt row (CommentRecord), so declared with it.
export type { InputTooLargeNotice, QuotaNotice };

/** The one comment a mention over a daily quota gets. */
export function refusalReceiptText(task: Pick<TaskRecord, 'taskId' | 'author'>, q: QuotaNotice, locale: Locale = DEFAULT_LOCALE): string {
  // Stored rows carry the code as a string; anything but the user quota is the repository's.
  const code: QuotaCode = q.code === 'quota_user_tasks_per_day' ? 'quota_user_tasks_per_day' : 'quota_repo_tokens_per_day';
  return messages(locale).limits.refused({ taskId: task.taskId, mention: mentionOf(task.author), code, used: n(q.used), limit: n(q.limit), retryAt: utc(q.retryAt) });
}

/** The one comment a mention longer than the agent can take gets. */
export function tooLongReceiptText(task: Pick<TaskRecord, 'taskId' | 'author'>, t: InputTooLargeNotice, locale: Locale = DEFAULT_LOCALE): string {
  return messages(locale).limits.tooLong({ taskId: task.taskId, mention: mentionOf(task.author), chars: n(t.chars), limit: n(t.limit) });
}

/** The one answer to a `stop` that found nothing to stop. */
export function nothingToStopReceiptText(task: Pick<TaskRecord, 'author'>, locale: Locale = DEFAULT_LOCALE): string {
  return messages(locale).limits.nothingToStop({ mention: mentionOf(task.author) });
}

/** The one notice per thread and day of a mention in a disabled repository. */
export function repositoryDisabledReceiptText(task: Pick<TaskRecord, 'author'>, locale: Locale = DEFAULT_LOCALE): string {
  return messages(locale).limits.repositoryDisabled({ mention: mentionOf(task.author) });
}

/** The one notice per thread and day of a mention by someone without write access. */
export function readerNoticeReceiptText(task: Pick<TaskRecord, 'author'>, locale: Locale = DEFAULT_LOCALE): string {
  return messages(locale).limits.readerNotice({ mention: mentionOf(task.author) });
}

/** A per-task budget's figures: tokens or turns as counts, agent time (`budget_task_wall_time`) in milliseconds. */
export interface BudgetNotice {
  code: BudgetCode;
  limit: number | null;
  used: number | null;
}

/** The configuration key an operator raises for each per-task budget. */
const BUDGET_KEYS = {
  budget_task_tokens: 'CCWEB_LIMIT_TASK_TOKENS',
  budget_task_turns: 'CCWEB_LIMIT_TASK_TURNS',
  budget_task_wall_time: 'CCWEB_LIMIT_TASK_WALL_MINUTES',
} as const satisfies Record<BudgetCode, string>;

/** Added to the task's receipt when a per-task limit stopped it. */
export function budgetNoticeText(b: BudgetNotice, locale: Locale = DEFAULT_LOCALE): string {
  const code = b.code;
  // Agent time as the duration it was (`5 s`, `2 min 30 s`): whole minutes rounded up said "1 minutes" of a 5 s limit.
  const figure = (v: number) => (code === 'budget_task_wall_time' ? formatDuration(v, locale) : n(v));
  return messages(locale).limits.budget({
    code,
    used: b.used === null ? null : figure(b.used),
    limit: b.limit === null ? null : figure(b.limit),
    key: BUDGET_KEYS[code],
  });
}

/** Added to the task's receipt when it parks in `blocked_workspace`. */
export function blockedNoticeText(task: Pick<TaskRecord, 'taskId'>, locale: Locale = DEFAULT_LOCALE): string {
  return messages(locale).limits.blocked({ taskId: task.taskId });
}

/** Replaces the blocked notice once an operator unblocked the task (it is queued again). */
export function resumedNoticeText(task: Pick<TaskRecord, 'taskId'>, locale: Locale = DEFAULT_LOCALE): string {
  return messages(locale).limits.resumed({ taskId: task.taskId });
}

/** A notice posted as a comment of its own, when the task has no receipt to edit. */
export function standaloneNoticeText(task: Pick<TaskRecord, 'taskId'>, text: string, locale: Locale = DEFAULT_LOCALE): string {
  return messages(locale).limits.standalone({ taskId: task.taskId, text });
}
