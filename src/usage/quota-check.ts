// Daily quotas at intake: tasks per user per UTC day and tokens per repository per UTC
// day. Intake calls this inside its one transaction, so the count it checks and the count it
// raises cannot race another webhook. A refused mention becomes a task in `rejected` with ONE
// comment saying when it can run again (the receipt outbox posts it); it never runs.
import type { Tx } from '../store/types.js';
import { effectiveLimits } from './limits.js';
import { dayKey, emptyDay, nextUtcDay, utcDay, type UsageDayRecord, type UsageLimits, type UsageScope } from '../domain/usage-records.js';

export const QUOTA_CODES = ['quota_user_tasks_per_day', 'quota_repo_tokens_per_day'] as const;
export type QuotaCode = (typeof QUOTA_CODES)[number];

export interface QuotaRefusal {
  code: QuotaCode;
  limit: number;
  used: number;
  /** When the quota is free again (the next UTC day). */
  retryAt: string;
}

export interface QuotaSubject {
  repoKey: string;
  login: string;
}

export interface QuotaPort {
  /** A refusal when a new task would exceed a daily quota, else null. Reads only. */
  check(tx: Pick<Tx, 'get'>, who: QuotaSubject, at: Date): Promise<QuotaRefusal | null>;
  /** Counts a task accepted now (same transaction as the task). */
  countAccepted(tx: Tx, who: QuotaSubject, at: Date): Promise<void>;
  /** Counts a refused mention (same transaction as the refusal). */
  countRefused(tx: Tx, who: QuotaSubject, at: Date): Promise<void>;
}

async function day(tx: Pick<Tx, 'get'>, scope: UsageScope, subject: string, at: Date): Promise<UsageDayRecord> {
  const d = utcDay(at);
  return (await tx.get<UsageDayRecord>('usage', dayKey(d, scope, subject))) ?? emptyDay(d, scope, subject, at);
}

async function bump(tx: Tx, scope: UsageScope, subject: string, at: Date, field: 'tasks' | 'refused'): Promise<void> {
  const cur = await day(tx, scope, subject, at);
  await tx.put<UsageDayRecord>('usage', cur.key, { ...cur, [field]: cur[field] + 1, updatedAt: at.toISOString() });
}

export function createQuotaCheck(options: { limits: UsageLimits }): QuotaPort {
  return {
    async check(tx, who, at) {
      const limits = await effectiveLimits(options.limits, tx, who.repoKey);
      const retryAt = nextUtcDay(at).toISOString();
      if (limits.userTasksPerDay !== undefined) {
        const used = (await day(tx, 'user', who.login, at)).tasks;
        if (used >= limits.userTasksPerDay) return { code: 'quota_user_tasks_per_day', limit: limits.userTasksPerDay, used, retryAt };
      }
      if (limits.repoTokensPerDay !== undefined) {
        const used = (await day(tx, 'repo', who.repoKey, at)).totalTokens;
        if (used >= limits.repoTokensPerDay) return { code: 'quota_repo_tokens_per_day', limit: limits.repoTokensPerDay, used, retryAt };
      }
      return null;
    },
    async countAccepted(tx, who, at) {
      await bump(tx, 'user', who.login, at, 'tasks');
      await bump(tx, 'repo', who.repoKey, at, 'tasks');
    },
    async countRefused(tx, who, at) {
      await bump(tx, 'user', who.login, at, 'refused');
      await bump(tx, 'repo', who.repoKey, at, 'refused');
    },
  };
}
