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
import { receivedReceiptText } from '../../src/receipts/receipt-text.js';
import { agentStepOf, programOf } from '../../src/sessions/agent-step.js';

const task = { taskId: 'gitea-task-1', author: 'alice', errorCode: null, commentUrl: 'http://gitea.test/sub/acme/app/issues/3#issuecomment-9', owner: 'acme', repo: 'app' };

describe('the receipt as the tracking comment (issue 30)', () => {
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
    expect(text).toBe(`${receivedReceiptText(task, 'en')}\n\n**Stage:** working · 3 min 05 s so far\n- Current step: running \`npm\``);
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
