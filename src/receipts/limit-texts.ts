// The words the service says about limits and blocks (issue 18), all in one place so the message
// catalogue (CCWEB_LOCALE) can take them over as a block. Only service-made data goes in: numbers,
// codes, times, a checked login.
import type { TaskRecord } from '../domain/records.js';
import { mentionOf } from './receipt-text.js';

/** `2026-12-02 00:00 UTC` */
function utc(iso: string): string {
  return `${iso.slice(0, 10)} ${iso.slice(11, 16)} UTC`;
}

const n = (v: number) => v.toLocaleString('en-US');

export interface QuotaNotice {
  code: string;
  limit: number;
  used: number;
  retryAt: string;
}

/** The one comment a mention over a daily quota gets. */
export function refusalReceiptText(task: Pick<TaskRecord, 'taskId' | 'author'>, q: QuotaNotice): string {
  const who = mentionOf(task.author) ?? 'this user';
  const why =
    q.code === 'quota_user_tasks_per_day'
      ? `${who} has already started ${n(q.used)} tasks today (limit: ${n(q.limit)} tasks per user per day)`
      : `the tasks of this repository have used ${n(q.used)} tokens today (limit: ${n(q.limit)} tokens per repository per day)`;
  return `giteabot: not started — ${why}. It can run again after ${utc(q.retryAt)}: mention the bot again then (task ${task.taskId}, code \`${q.code}\`).`;
}

export interface BudgetNotice {
  code: string;
  limit: number | null;
  used: number | null;
}

const BUDGET_WORDS: Record<string, { what: string; unit: string; key: string }> = {
  budget_task_tokens: { what: 'tokens', unit: 'tokens per task', key: 'CCWEB_LIMIT_TASK_TOKENS' },
  budget_task_turns: { what: 'agent turns', unit: 'turns per task', key: 'CCWEB_LIMIT_TASK_TURNS' },
  budget_task_wall_time: { what: 'minutes of agent time', unit: 'minutes per task', key: 'CCWEB_LIMIT_TASK_WALL_MINUTES' },
};

/** Added to the task's receipt when a per-task limit stopped it. */
export function budgetNoticeText(b: BudgetNotice): string {
  const w = BUDGET_WORDS[b.code] ?? { what: 'resources', unit: 'its limit', key: 'the limit' };
  const used = b.used === null ? '' : ` used ${n(b.used)} ${w.what} and`;
  const limit = b.limit === null ? w.unit : `${n(b.limit)} ${w.unit}`;
  return `**Stopped by a limit:** this task${used} reached its limit of ${limit} (\`${b.code}\`), so the agent was interrupted. An operator can raise ${w.key} or the repository's limit; then mention the bot again to continue.`;
}

/** Added to the task's receipt when it parks in `blocked_workspace`. */
export function blockedNoticeText(task: Pick<TaskRecord, 'taskId'>): string {
  return `**Paused:** the repository's workspace on the bot's host has local changes, so nothing was run (\`workspace_dirty\`). An operator must clean the workspace and unblock task ${task.taskId}; it then runs.`;
}
