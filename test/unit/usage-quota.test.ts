// Daily quotas, per-repository overrides and the words users read, on a real store.
import { describe, expect, it } from 'vitest';
import { blockedNoticeText, budgetNoticeText, refusalReceiptText, resumedNoticeText } from '../../src/receipts/limit-texts.js';
import { configuredLimits, effectiveLimits } from '../../src/usage/limits.js';
import { createQuotaCheck } from '../../src/usage/quota-check.js';
import { dayKey, diffSize, emptyDay, limitsKey, nextUtcDay, utcDay, type RepoLimitsRecord } from '../../src/domain/usage-records.js';
import { usageReport } from '../../src/usage/usage-report.js';
import { storeForTest } from '../support/test-runtime.js';

const REPO = 'default:acme/widget';
const who = { repoKey: REPO, login: 'alice' };
const at = new Date('2026-12-01T22:15:00Z');

describe('daily quotas', () => {
  it('tasks per user per day: the (n+1)th task of the UTC day is refused until the next midnight', async () => {
    const s = await storeForTest();
    const quota = createQuotaCheck({ limits: { userTasksPerDay: 2 } });
    for (let i = 0; i < 2; i++) {
      expect(await quota.check(s, who, at)).toBeNull();
      await s.transact((tx) => quota.countAccepted(tx, who, at));
    }
    expect(await quota.check(s, who, at)).toEqual({ code: 'quota_user_tasks_per_day', limit: 2, used: 2, retryAt: '2026-12-02T00:00:00.000Z' });
    // Another user is not affected; the next day starts from zero.
    expect(await quota.check(s, { ...who, login: 'carol' }, at)).toBeNull();
    expect(await quota.check(s, who, new Date('2026-12-02T00:00:01Z'))).toBeNull();
  });

  it('tokens per repository per day; an operator override lifts it for one repository', async () => {
    const s = await storeForTest();
    const quota = createQuotaCheck({ limits: configuredLimits({ limitRepoTokensPerDay: 1000 }) });
    await s.transact((tx) => tx.put('usage', dayKey(utcDay(at), 'repo', REPO), { ...emptyDay(utcDay(at), 'repo', REPO, at), totalTokens: 1000 }));
    expect(await quota.check(s, who, at)).toMatchObject({ code: 'quota_repo_tokens_per_day', limit: 1000, used: 1000 });
    const override: RepoLimitsRecord = { key: limitsKey(REPO), repoKey: REPO, limits: { repoTokensPerDay: null }, updatedBy: 'admin:ops', updatedAt: at.toISOString(), version: 1 };
    await s.transact((tx) => tx.put('usage', override.key, override));
    expect(await quota.check(s, who, at)).toBeNull();
    expect(await effectiveLimits({ repoTokensPerDay: 1000, taskTokens: 5 }, s, REPO)).toEqual({ taskTokens: 5 });
    expect(await effectiveLimits({ repoTokensPerDay: 1000 }, s, 'default:other/repo')).toEqual({ repoTokensPerDay: 1000 });
  });

  it('refusals are counted and reported; the report sums the last days per repository and user', async () => {
    const s = await storeForTest();
    const quota = createQuotaCheck({ limits: {} });
    await s.transact(async (tx) => {
      await quota.countAccepted(tx, who, at);
      await quota.countRefused(tx, who, at);
      await quota.countAccepted(tx, who, new Date(at.getTime() - 8 * 86_400_000)); // outside 7 days
    });
    const r = await usageReport(s, at, 7);
    expect(r.days).toHaveLength(7);
    expect(r.to).toBe('2026-12-01');
    expect(r.byRepository).toEqual([expect.objectContaining({ subject: REPO, tasks: 1, refused: 1 })]);
    expect(r.byUser).toEqual([expect.objectContaining({ subject: 'alice', tasks: 1, refused: 1 })]);
    expect(r.totals.tasks).toBe(1);
  });
});

describe('helpers and texts', () => {
  it('UTC days and diff sizes', () => {
    expect(utcDay(at)).toBe('2026-12-01');
    expect(nextUtcDay(at).toISOString()).toBe('2026-12-02T00:00:00.000Z');
    const diff = 'diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1,2 @@\n-old\n+new\n+more\n';
    expect(diffSize(diff)).toEqual({ bytes: Buffer.byteLength(diff), files: 1, added: 2, removed: 1 });
  });

  it('the refusal says who, the limit and when it can run again; notices name the code (en)', () => {
    const text = refusalReceiptText({ taskId: 't-1', author: 'alice' }, { code: 'quota_user_tasks_per_day', limit: 2, used: 2, retryAt: '2026-12-02T00:00:00.000Z' }, 'en');
    expect(text).toBe('giteabot: not started — @alice has already started 2 tasks today (limit: 2 tasks per user per day). It can run again after 2026-12-02 00:00 UTC: mention the bot again then (task t-1, code `quota_user_tasks_per_day`).');
    expect(refusalReceiptText({ taskId: 't-4', author: 'bob' }, { code: 'quota_repo_tokens_per_day', limit: 50_000, used: 51_234, retryAt: '2026-12-02T00:00:00.000Z' }, 'en')).toContain('used 51,234 tokens today (limit: 50,000 tokens per repository per day)');
    expect(budgetNoticeText({ code: 'budget_task_tokens', limit: 1000, used: 1200 }, 'en')).toContain('used 1,200 tokens and reached its limit of 1,000 tokens per task (`budget_task_tokens`)');
    expect(budgetNoticeText({ code: 'budget_task_wall_time', limit: 60_000, used: 61_000 }, 'en')).toContain('CCWEB_LIMIT_TASK_WALL_MINUTES');
    // Agent time as the duration it was: a 5 s limit is not "1 minutes".
    expect(budgetNoticeText({ code: 'budget_task_wall_time', limit: 5_000, used: 6_200 }, 'en')).toContain('this task used 6 s of agent time and reached its limit of 5 s of agent time per task (`budget_task_wall_time`)');
    expect(budgetNoticeText({ code: 'budget_task_wall_time', limit: 90 * 60_000, used: null }, 'en')).toContain('reached its limit of 1 h 30 min of agent time per task');
    expect(budgetNoticeText({ code: 'budget_task_wall_time', limit: null, used: null }, 'en')).toContain('reached its limit of agent time per task');
    expect(budgetNoticeText({ code: 'budget_task_turns', limit: 3, used: null }, 'en')).toContain('this task reached its limit of 3 turns per task (`budget_task_turns`)');
    expect(blockedNoticeText({ taskId: 't-2' }, 'en')).toContain('unblock task t-2');
    expect(resumedNoticeText({ taskId: 't-2' }, 'en')).toBe('**Resumed:** an operator unblocked task t-2; it is queued again.');
    // A login that is not a plain Gitea login is not echoed.
    expect(refusalReceiptText({ taskId: 't-3', author: '<img>' }, { code: 'quota_repo_tokens_per_day', limit: 5, used: 9, retryAt: '2026-12-02T00:00:00.000Z' }, 'en')).not.toContain('<img>');
  });

  it('says the same in Chinese by default (zh): limits, numbers and UTC times as in English, no English words', () => {
    const text = refusalReceiptText({ taskId: 't-1', author: 'alice' }, { code: 'quota_user_tasks_per_day', limit: 2, used: 2, retryAt: '2026-12-02T00:00:00.000Z' });
    expect(text).toBe('giteabot: 未开始 — 已达每日任务上限：@alice 今天已启动 2 个任务（上限：每位用户每天 2 个任务）。2026-12-02 00:00 UTC 之后可以再次运行，届时请重新提及机器人（任务 t-1，代码 `quota_user_tasks_per_day`）。');
    const repo = refusalReceiptText({ taskId: 't-4', author: 'bob' }, { code: 'quota_repo_tokens_per_day', limit: 50_000, used: 51_234, retryAt: '2026-12-02T00:00:00.000Z' }, 'zh');
    expect(repo).toContain('已达仓库每日 token 上限：本仓库的任务今天已使用 51,234 个 token（上限：每个仓库每天 50,000 个 token）');
    expect(budgetNoticeText({ code: 'budget_task_tokens', limit: 1000, used: 1200 })).toBe(
      '**因达到上限而停止：** 本任务已使用 1,200 个 token，达到了每个任务 1,000 个 token 的上限（`budget_task_tokens`），智能体已被中断。管理员可以提高 CCWEB_LIMIT_TASK_TOKENS 或该仓库的上限，之后请再次提及机器人以继续。',
    );
    expect(budgetNoticeText({ code: 'budget_task_wall_time', limit: 5_000, used: 6_200 }, 'zh')).toContain('已耗用 6 秒智能体时间，达到了每个任务 5 秒智能体时间的上限');
    expect(budgetNoticeText({ code: 'budget_task_wall_time', limit: 61 * 60_000, used: 61 * 60_000 + 5_000 }, 'zh')).toContain('已耗用 1 小时 01 分智能体时间，达到了每个任务 1 小时 01 分智能体时间的上限');
    expect(budgetNoticeText({ code: 'budget_task_turns', limit: null, used: null }, 'zh')).toContain('本任务达到了每个任务的轮次上限');
    expect(blockedNoticeText({ taskId: 't-2' })).toContain('**已暂停：**');
    expect(blockedNoticeText({ taskId: 't-2' })).toContain('解除任务 t-2 的阻塞');
    expect(resumedNoticeText({ taskId: 't-2' })).toBe('**已恢复：** 管理员已解除任务 t-2 的阻塞，任务已重新排队。');
    // Only the code, the configuration key, the login and the fixed `giteabot:`/`token`/`UTC` are Latin.
    const latin = (s: string) => s.replace(/`[^`]*`|CCWEB_[A-Z_]+|@\w+|giteabot|token|UTC|t-\d/g, '').match(/[A-Za-z]{2,}/g);
    for (const s of [text, repo, budgetNoticeText({ code: 'budget_task_turns', limit: 3, used: 4 }), blockedNoticeText({ taskId: 't-2' }), resumedNoticeText({ taskId: 't-2' })]) {
      expect(latin(s)).toBeNull();
    }
  });
});
