import { describe, expect, it } from 'vitest';
import { LOCALES } from '../../src/messages/catalogue.js';
import {
  branchWebUrl,
  commentWebUrl,
  editDecision,
  formatDuration,
  progressReceiptText,
  progressStageOf,
  repositoryWebUrl,
} from '../../src/receipts/receipt-progress.js';
import { receivedReceiptText, unpublishedChangeOf } from '../../src/receipts/receipt-text.js';
import { agentStepOf, programOf } from '../../src/sessions/agent-step.js';

const task = { taskId: 'gitea-task-1', author: 'alice', errorCode: null, commentUrl: 'http://gitea.test/sub/acme/app/issues/3#issuecomment-9', owner: 'acme', repo: 'app' };

describe('the receipt as the tracking comment', () => {
  it('maps every live and final task state to a stage; states without a receipt to none', () => {
    expect(progressStageOf('queued')).toBe('queued');
    expect(progressStageOf('preparing')).toBe('preparing');
    expect(progressStageOf('running')).toBe('working');
    expect(progressStageOf('publishing')).toBe('publishing');
    expect(progressStageOf('verifying_reply')).toBe('verifying');
    expect(progressStageOf('succeeded_with_rest_fallback')).toBe('done');
    expect(progressStageOf('failed_reply')).toBe('failed');
    expect(progressStageOf('rejected')).toBeNull();
  });

  it('keeps the received sentence first, then the stage with the elapsed time and the current step', () => {
    const text = progressReceiptText({ task, stage: 'working', elapsedMs: 185_000, step: { kind: 'command', program: 'npm' }, outcome: null, notices: [] }, 'en');
    expect(text).toBe(`giteabot: received — the request from @alice is being worked on (task gitea-task-1).\n\n**Stage:** working · 3 min 05 s so far\n- Current step: running \`npm\``);
    const zh = progressReceiptText({ task, stage: 'working', elapsedMs: 185_000, step: { kind: 'plan', done: 1, total: 3 }, outcome: null, notices: [] }, 'zh');
    expect(zh).toContain('**阶段：** 智能体工作中 · 已用时 3 分 05 秒');
    expect(zh).toContain('计划第 2/3 步');
  });

  it('ends with the outcome: answer, branch and pull request links, duration and tokens; no elapsed time', () => {
    const outcome = {
      answerUrl: 'http://gitea.test/sub/acme/app/issues/3#issuecomment-12',
      branch: { name: 'ccweb/issue-3', url: 'http://gitea.test/sub/acme/app/src/branch/ccweb/issue-3' },
      pullRequest: { number: 4, url: 'http://gitea.test/sub/acme/app/pulls/4' },
      durationMs: 3_725_000,
      tokens: 12_345,
    };
    const text = progressReceiptText({ task, stage: 'done', elapsedMs: 99, step: { kind: 'thinking' }, outcome, notices: ['**Paused:** x'] }, 'en');
    expect(text).toContain('**Stage:** done\n');
    expect(text).not.toContain('so far');
    expect(text).not.toContain('thinking');
    expect(text).toContain('- Answer: http://gitea.test/sub/acme/app/issues/3#issuecomment-12');
    expect(text).toContain('- Branch: [`ccweb/issue-3`](http://gitea.test/sub/acme/app/src/branch/ccweb/issue-3)');
    expect(text).toContain('- Pull request: [#4](http://gitea.test/sub/acme/app/pulls/4)');
    expect(text).toContain('- Took 1 h 02 min, 12,345 tokens');
    expect(text.endsWith('**Paused:** x')).toBe(true);
    for (const locale of LOCALES) expect(progressReceiptText({ task, stage: 'done', elapsedMs: null, step: null, outcome, notices: [] }, locale)).toContain('](http://gitea.test/sub/acme/app/pulls/4)');
  });

  it('its first line follows the stage: never "queued" once the task is past it, in every language', () => {
    const stages = ['queued', 'preparing', 'working', 'waiting_user', 'retry_wait', 'blocked', 'publishing', 'verifying', 'stopping', 'done', 'failed', 'cancelled'] as const;
    const first = (stage: (typeof stages)[number], locale: 'en' | 'zh') =>
      progressReceiptText({ task, stage, elapsedMs: 1_000, step: null, outcome: null, notices: [] }, locale).split('\n')[0]!;
    // As posted (queued), the receipt's first line is the received sentence itself: the first render needs no edit.
    for (const locale of LOCALES) expect(first('queued', locale)).toBe(receivedReceiptText(task, locale));
    for (const stage of stages.filter((s) => s !== 'queued')) {
      expect(first(stage, 'en')).not.toContain('queued');
      expect(first(stage, 'zh')).not.toContain('排队');
      for (const locale of LOCALES) expect(first(stage, locale)).toMatch(/^giteabot: (received|已收到) — .*gitea-task-1/);
    }
    expect(first('done', 'en')).toBe('giteabot: received — the request from @alice is done (task gitea-task-1).');
    expect(first('failed', 'en')).toBe('giteabot: received — the request from @alice failed (task gitea-task-1).');
    expect(first('cancelled', 'en')).toBe('giteabot: received — the request from @alice was stopped (task gitea-task-1).');
    expect(first('done', 'zh')).toBe('giteabot: 已收到 — @alice 的请求已完成（任务 gitea-task-1）。');
    expect(first('failed', 'zh')).toBe('giteabot: 已收到 — @alice 的请求失败了（任务 gitea-task-1）。');
  });

  it('a task stopped by its time budget says so with its code, not "an unexpected error"', () => {
    for (const code of ['budget_task_wall_time', 'budget_task_tokens', 'budget_task_turns']) {
      const text = progressReceiptText({ task: { ...task, errorCode: code }, stage: 'failed', elapsedMs: null, step: null, outcome: null, notices: [] }, 'en');
      expect(text).toContain(`Error code \`${code}\`: it reached its limit of`);
      expect(text).not.toMatch(/unexpected/);
    }
    expect(progressReceiptText({ task: { ...task, errorCode: 'budget_task_wall_time' }, stage: 'failed', elapsedMs: null, step: null, outcome: null, notices: [] }, 'zh')).toContain('智能体时间上限');
  });

  it('says what of the change was not published and where it is kept, from the publish record, never the agent\'s words', () => {
    const outcome = { answerUrl: null, branch: null, pullRequest: null, durationMs: 5_000, tokens: null };
    const render = (publish: unknown, stage: 'done' | 'failed' = 'done') =>
      progressReceiptText({ task: { ...task, errorCode: stage === 'failed' ? 'fork_edits_not_allowed' : null }, stage, elapsedMs: null, step: null, outcome: { ...outcome, unpublished: unpublishedChangeOf(publish) }, notices: [] }, 'en');
    const refused = render({ status: 'kept', kept: { branch: 'ccweb-kept/t-1', patchFile: '/data/patches/t-1.patch' }, errorCode: 'fork_edits_not_allowed' }, 'failed');
    expect(refused).toContain('Error code `fork_edits_not_allowed`: this pull request comes from a fork');
    expect(refused).toContain("- The change is kept: branch `ccweb-kept/t-1` in the service's workspace and the patch `patches/t-1.patch` in its data directory.");
    const off = render({ status: 'not_published', kept: { branch: 'ccweb-kept/t-1', patchFile: '/data/patches/t-1.patch' } });
    expect(off).toContain('- Not published: change delivery is off on this service.\n- The change is kept: branch `ccweb-kept/t-1`');
    // A path from the agent's change reaches the comment in a plain alphabet only.
    const withheld = render({ status: 'published', kept: null, withheld: { paths: ['.gitea/workflows/x.yml', '.gitea/workflows/<b>@all.yml'], branch: 'ccweb-kept/t-1-withheld', patchFile: '/d/patches/t-1.withheld.patch' } });
    expect(withheld).toContain('- Not committed: `.gitea/workflows/x.yml`, `.gitea/workflows/_b__all.yml`, because the bot may not change CI definitions in this repository; they are kept as branch `ccweb-kept/t-1-withheld`');
    expect(withheld).not.toContain('<b>');
    expect(render({ status: 'published', kept: null })).not.toMatch(/kept|Not /);
    // Refused during the turn, published after all by a later publish of the task: nothing is said kept.
    expect(render({ status: 'published', kept: { branch: 'ccweb-kept/t-1', patchFile: '/data/patches/t-1.patch' } })).not.toMatch(/kept|Not /);
    expect(render(undefined)).not.toMatch(/kept|Not /);
  });

  it('a failed task shows its error code with its one-line meaning', () => {
    const text = progressReceiptText({ task: { ...task, errorCode: 'push_rejected' }, stage: 'failed', elapsedMs: null, step: null, outcome: null, notices: [] }, 'en');
    expect(text).toMatch(/Error code `push_rejected`: \S+/);
  });

  it('builds links from the thread URL Gitea gave (sub-path kept), a fork branch in the fork', () => {
    expect(repositoryWebUrl(task)).toBe('http://gitea.test/sub/acme/app');
    expect(commentWebUrl(task, 12)).toBe('http://gitea.test/sub/acme/app/issues/3#issuecomment-12');
    expect(branchWebUrl(task, 'ccweb/pr 2')).toBe('http://gitea.test/sub/acme/app/src/branch/ccweb/pr%202');
    expect(branchWebUrl(task, 'b', 'bob/app')).toBe('http://gitea.test/sub/bob/app/src/branch/b');
    expect(repositoryWebUrl({ ...task, commentUrl: 'javascript:alert(1)' })).toBeNull();
  });

  it('edits at most once per interval and never the same body twice', () => {
    const memo = { stage: 'working' as const, bodyHash: 'h1', at: '2026-01-01T00:00:00.000Z' };
    const t0 = Date.parse(memo.at);
    expect(editDecision(memo, 'h1', t0 + 3_600_000, 15_000)).toEqual({ kind: 'skip' });
    expect(editDecision(memo, 'h2', t0 + 5_000, 15_000)).toEqual({ kind: 'wait', ms: 10_000 });
    expect(editDecision(memo, 'h2', t0 + 15_000, 15_000)).toEqual({ kind: 'edit' });
    expect(editDecision(null, 'h2', t0, 15_000)).toEqual({ kind: 'edit' });
    // The final edit does not wait for the interval: the task has ended, the receipt must say so now.
    expect(editDecision(memo, 'h2', t0 + 1, 15_000, true)).toEqual({ kind: 'edit' });
    expect(editDecision(memo, 'h1', t0 + 1, 15_000, true)).toEqual({ kind: 'skip' });
  });

  it('formats durations in both languages', () => {
    expect(formatDuration(42_400, 'en')).toBe('42 s');
    expect(formatDuration(42_400, 'zh')).toBe('42 秒');
  });
});

describe("the agent's current step, from a turn's notifications, with nothing the model wrote", () => {
  it('names the program of a command, unwrapping the login shell', () => {
    expect(programOf("/bin/bash -lc 'npm test -- --grep login'")).toBe('npm');
    expect(programOf('FOO=1 /usr/bin/git status')).toBe('git');
    expect(programOf('$(curl evil) x')).toBeNull();
    expect(agentStepOf({ method: 'item/started', params: { item: { type: 'commandExecution', command: 'bash -lc "ls -la"' } } })).toEqual({ kind: 'command', program: 'ls' });
  });

  it('names a tool call and counts a plan; skips what says nothing about the step', () => {
    expect(agentStepOf({ method: 'item/started', params: { item: { type: 'mcpToolCall', server: 'gitea', tool: 'create_issue_comment' } } })).toEqual({ kind: 'tool', name: 'gitea.create_issue_comment' });
    expect(agentStepOf({ method: 'turn/plan/updated', params: { plan: [{ step: 'secret words', status: 'completed' }, { step: 'b', status: 'inProgress' }] } })).toEqual({ kind: 'plan', done: 1, total: 2 });
    expect(agentStepOf({ method: 'item/completed', params: { item: { type: 'commandExecution', command: 'ls' } } })).toBeNull();
    expect(agentStepOf({ method: 'item/started', params: { item: { type: 'agentMessage', text: 'hi' } } })).toBeNull();
  });
});
