// The session manager's decisions, without an app-server, store or runtime: which thread step to
// take (thread-plan.ts), how failures are coded (session-error.ts), what a finished turn means
// (turn-result.ts), and the per-key serial lock (keyed-lock.ts). The I/O shell around them is
// covered by test/integration/session-manager.test.ts.
import { describe, expect, it } from 'vitest';
import { CodexRpcError } from '../../src/codex/jsonrpc-connection.js';
import type { CodexTurnOutcome } from '../../src/codex/run-turn.js';
import type { TurnRecord } from '../../src/domain/records.js';
import { keyedLock } from '../../src/sessions/keyed-lock.js';
import { SessionError, threadFailure, turnErrorCode } from '../../src/sessions/session-error.js';
import { isDefinitiveResumeFailure, newThreadApprovedAutomatically, planThread, turnSessionReady, type ThreadPlanInput } from '../../src/sessions/thread-plan.js';
import {
  budgetLimitOf,
  budgetTimerMs,
  markerForTurn,
  repliesSinceOf,
  sessionEventForTurnEnd,
  turnOutcome,
  turnRecordStatus,
  type TurnEnd,
} from '../../src/sessions/turn-result.js';

const plan = (over: Partial<ThreadPlanInput>) =>
  planThread({ state: 'idle', threadId: 'th', lastErrorCode: null, loadedIn: 3, generation: 3, restarted: false, ...over });

describe('thread plan', () => {
  it('reuses a resting thread loaded in this app-server generation', () => {
    for (const state of ['idle', 'waiting_user', 'turn_in_flight']) expect(plan({ state })).toEqual({ kind: 'reuse', threadId: 'th' });
  });
  it('restarts a resting thread loaded elsewhere, then resumes it', () => {
    expect(plan({ loadedIn: 2 })).toEqual({ kind: 'restart' });
    expect(plan({ loadedIn: undefined })).toEqual({ kind: 'restart' });
    expect(plan({ state: 'resuming', restarted: true })).toEqual({ kind: 'resume', threadId: 'th' });
    // A rejected RESTARTED (still resting) must not loop: the session is not ready.
    expect(plan({ loadedIn: 2, restarted: true })).toEqual({ kind: 'not_ready' });
  });
  it('approves a new thread after resume_failed, naming the last error', () => {
    expect(plan({ state: 'resume_failed', lastErrorCode: 'thread_resume_failed' })).toEqual({ kind: 'approve_new', reason: 'resume_failed (thread_resume_failed)' });
    expect(plan({ state: 'resume_failed' })).toEqual({ kind: 'approve_new', reason: 'resume_failed (unknown)' });
  });
  it('starts a thread from no_thread (announcing it) or thread_starting (already announced)', () => {
    expect(plan({ state: 'no_thread', threadId: null })).toEqual({ kind: 'start', announce: true });
    expect(plan({ state: 'thread_starting', threadId: null })).toEqual({ kind: 'start', announce: false });
  });
  it('refuses a closed session and any other state', () => {
    expect(plan({ state: 'closed' })).toEqual({ kind: 'closed' });
    expect(plan({ state: 'idle', threadId: null })).toEqual({ kind: 'not_ready' });
  });
  it('starts a turn only on an idle/waiting session whose thread is loaded here', () => {
    const ready = { state: 'idle', threadId: 'th', loadedIn: 1, generation: 1 };
    expect(turnSessionReady(ready)).toBe(true);
    expect(turnSessionReady({ ...ready, state: 'waiting_user' })).toBe(true);
    expect(turnSessionReady({ ...ready, state: 'turn_in_flight' })).toBe(false);
    expect(turnSessionReady({ ...ready, loadedIn: 0 })).toBe(false);
    expect(turnSessionReady({ ...ready, threadId: null })).toBe(false);
    expect(turnSessionReady(undefined)).toBe(false);
  });
  it('only a refused resume is definitive; a new thread is approved unless turned off', () => {
    expect(isDefinitiveResumeFailure('thread_resume_failed')).toBe(true);
    expect(isDefinitiveResumeFailure('app_server_timeout')).toBe(false);
    expect(isDefinitiveResumeFailure('mcp_start_failed')).toBe(false);
    expect(newThreadApprovedAutomatically({})).toBe(true);
    expect(newThreadApprovedAutomatically({ autoApproveNewThread: false })).toBe(false);
  });
});

describe('failure codes', () => {
  const id = (s: string) => s;
  it('codes thread failures: MCP (final), transport (retryable), else the fallback', () => {
    const mcp = threadFailure(new CodexRpcError('thread/start', -32603, 'MCP server gitea: No such file or directory'), 'thread_start_failed', id);
    expect([mcp.errorCode, mcp.retryable]).toEqual(['mcp_command_missing', false]);
    const exited = threadFailure(new CodexRpcError('thread/start', 'app_server_exited', 'gone'), 'x', id);
    expect([exited.errorCode, exited.retryable]).toEqual(['app_server_exited', true]);
    expect(threadFailure(new CodexRpcError('m', 'request_timeout', 't'), 'x', id).errorCode).toBe('app_server_timeout');
    expect(threadFailure(new CodexRpcError('m', 'app_server_unavailable', 't'), 'x', id).errorCode).toBe('app_server_timeout');
    const refused = threadFailure(new CodexRpcError('thread/resume', -32600, 'no such thread'), 'thread_resume_failed', id);
    expect(refused).toBeInstanceOf(SessionError);
    expect([refused.errorCode, refused.retryable]).toEqual(['thread_resume_failed', true]);
  });
  it('redacts the reason and keeps it short', () => {
    const f = threadFailure(new Error(`token SECRET ${'x'.repeat(900)}`), 'f', (s) => s.replaceAll('SECRET', '***'));
    expect(f.message).not.toContain('SECRET');
    expect(f.message.length).toBe(500);
  });
  it('codes turn failures', () => {
    expect(turnErrorCode(new CodexRpcError('turn/start', 'app_server_exited', 'x'))).toBe('app_server_exited');
    expect(turnErrorCode(new CodexRpcError('turn/start', 'request_timeout', 'x'))).toBe('app_server_timeout');
    expect(turnErrorCode(new CodexRpcError('turn/start', -32600, 'x'))).toBe('turn_start_failed');
    expect(turnErrorCode(new Error('x'))).toBe('turn_start_failed');
  });
});

const commentItem = (index: number) =>
  ({ type: 'mcpToolCall', server: 'gitea', tool: 'create_issue_comment', arguments: { index }, status: 'completed', result: { isError: false } }) as never;
const codexOut = (over: Partial<CodexTurnOutcome>): CodexTurnOutcome => ({
  turnId: 'T',
  status: 'completed',
  items: [],
  finalMessage: null,
  error: null,
  userInputRequested: [],
  usedPlainFallback: false,
  durationMs: 1,
  ...over,
});
const end = (over: Partial<TurnEnd>): TurnEnd => ({
  turnKey: 'K',
  turnId: 'T',
  error: null,
  stopReason: null,
  out: codexOut({}),
  resourceNumber: 7,
  classifyFailure: () => null,
  ...over,
});

describe('turn outcome', () => {
  it('a turn whose input Codex refused for its size fails at once, not retried, naming input_too_large', () => {
    const refused = new CodexRpcError('turn/start', -32602, 'Input exceeds the maximum length of 1048576 characters.', { input_error_code: 'input_too_large', max_chars: 1_048_576, actual_chars: 1_200_000 });
    expect(turnErrorCode(refused)).toBe('input_too_large');
    expect(turnOutcome(end({ error: { code: turnErrorCode(refused) } }))).toMatchObject({ kind: 'failed', errorCode: 'input_too_large', retryable: false });
    // Any other -32602 stays a retryable turn_start_failed.
    expect(turnErrorCode(new CodexRpcError('turn/start', -32602, 'bad params'))).toBe('turn_start_failed');
  });

  it('a throw wins and stays retryable', () => {
    expect(turnOutcome(end({ error: { code: 'app_server_exited' }, stopReason: 'timeout' }))).toEqual({ kind: 'failed', turnKey: 'K', turnId: 'T', errorCode: 'app_server_exited', retryable: true });
  });
  it('a budget stop names the limit, before a timeout or Codex\'s own end', () => {
    expect(turnOutcome(end({ stopReason: 'limit:budget_task_tokens', out: codexOut({ status: 'interrupted' }) }))).toMatchObject({ kind: 'failed', errorCode: 'budget_task_tokens', retryable: false });
    expect(turnOutcome(end({ stopReason: 'timeout', out: codexOut({ status: 'failed' }) }))).toMatchObject({ kind: 'failed', errorCode: 'turn_timeout', retryable: false });
  });
  it('a stop Codex never confirmed is an abort timeout; a confirmed one is interrupted', () => {
    expect(turnOutcome(end({ stopReason: 'interrupt', out: null }))).toMatchObject({ kind: 'failed', errorCode: 'abort_timeout', retryable: false });
    expect(turnOutcome(end({ stopReason: 'interrupt', out: codexOut({ status: 'interrupted', turnId: 'T2' }) }))).toEqual({ kind: 'interrupted', turnKey: 'K', turnId: 'T2' });
  });
  it('a failed turn is retryable, coded by the usage hooks if they know the error', () => {
    expect(turnOutcome(end({ out: codexOut({ status: 'failed' }) }))).toMatchObject({ kind: 'failed', errorCode: 'turn_failed', retryable: true });
    expect(turnOutcome(end({ out: codexOut({ status: 'failed', error: 'rate' }), classifyFailure: (e) => (e === 'rate' ? 'provider_rate_limited' : null) }))).toMatchObject({
      errorCode: 'provider_rate_limited',
    });
  });
  it('a completed turn: a question first, then a comment on this resource, else no comment', () => {
    const asked = turnOutcome(end({ out: codexOut({ finalMessage: 'Which branch?\nCCWEB_WAITING_USER', items: [commentItem(7)] }) }));
    expect(asked).toMatchObject({ kind: 'waiting_user', question: 'Which branch?', commentCall: { index: 7, accepted: true } });
    expect(turnOutcome(end({ out: codexOut({ finalMessage: 'done', items: [commentItem(7)] }) }))).toMatchObject({ kind: 'replied', finalMessage: 'done' });
    expect(turnOutcome(end({ out: codexOut({ finalMessage: 'done', items: [commentItem(8)] }) }))).toEqual({ kind: 'no_comment', turnKey: 'K', turnId: 'T', finalMessage: 'done' });
  });
  it('records a budget-stopped turn as interrupted and tells the session how the turn ended', () => {
    const failedByBudget = turnOutcome(end({ stopReason: 'limit:x', out: codexOut({ status: 'interrupted' }) }));
    expect(turnRecordStatus(failedByBudget, 'limit:x', codexOut({ status: 'interrupted' }))).toBe('interrupted');
    expect(turnRecordStatus(failedByBudget, 'limit:x', null)).toBe('failed');
    expect(turnRecordStatus({ kind: 'interrupted', turnKey: 'K', turnId: 'T' }, 'interrupt', null)).toBe('interrupted');
    expect(turnRecordStatus({ kind: 'no_comment', turnKey: 'K', turnId: 'T', finalMessage: null }, null, null)).toBe('completed');
    expect(sessionEventForTurnEnd(failedByBudget, 'T')).toEqual({ type: 'TURN_FAILED', turnId: 'T', errorCode: 'x' });
    expect(sessionEventForTurnEnd({ kind: 'waiting_user', turnKey: 'K', turnId: 'T', question: 'q', commentCall: null }, 'T')).toEqual({ type: 'TURN_WAITING_USER', turnId: 'T' });
    expect(sessionEventForTurnEnd({ kind: 'interrupted', turnKey: 'K', turnId: 'T' }, 'T')).toEqual({ type: 'TURN_COMPLETED', turnId: 'T' });
    expect(sessionEventForTurnEnd(failedByBudget, null)).toBeNull();
  });
  it('budget helpers', () => {
    expect(budgetLimitOf('limit:budget_task_wall_time')).toBe('budget_task_wall_time');
    expect(budgetLimitOf('timeout')).toBeNull();
    expect(budgetLimitOf(null)).toBeNull();
    expect(budgetTimerMs(100, 200)).toBe(100);
    expect(budgetTimerMs(200, 200)).toBeNull();
    expect(budgetTimerMs(null, 200)).toBeNull();
  });
});

describe('turn inputs', () => {
  const turn = (kind: TurnRecord['kind'], status: TurnRecord['status'], marker: string, startedAt: string) => ({ kind, status, marker, startedAt }) as TurnRecord;
  const turns = [turn('normal', 'completed', 'm1', 't1'), turn('normal', 'interrupted', 'm2', 't2'), turn('reply_retry', 'completed', 'm3', 't3')];
  it('a reply retry carries the last normal turn\'s marker; a normal turn a fresh one', () => {
    expect(markerForTurn('reply_retry', turns, () => 'fresh')).toBe('m2');
    expect(markerForTurn('normal', turns, () => 'fresh')).toBe('fresh');
    expect(markerForTurn('reply_retry', [], () => 'fresh')).toBe('fresh');
  });
  it('replies count from the last completed normal turn', () => {
    expect(repliesSinceOf(turns)).toBe('t1');
    expect(repliesSinceOf([])).toBeUndefined();
  });
});

describe('keyed lock', () => {
  it('runs one function at a time per key, in call order, past failures; other keys run alongside', async () => {
    const lock = keyedLock();
    const log: string[] = [];
    const step = (name: string, ms: number, fail = false) => async () => {
      log.push(`${name}>`);
      await new Promise((r) => setTimeout(r, ms));
      log.push(`<${name}`);
      if (fail) throw new Error(name);
      return name;
    };
    const a = lock.run('k', step('a', 20, true));
    const b = lock.run('k', step('b', 1));
    const c = lock.run('other', step('c', 1));
    await expect(a).rejects.toThrow('a');
    await expect(b).resolves.toBe('b');
    await c;
    expect(log.filter((x) => x.includes('a') || x.includes('b'))).toEqual(['a>', '<a', 'b>', '<b']);
    expect(log.indexOf('<c')).toBeLessThan(log.indexOf('<a'));
    await new Promise((r) => setTimeout(r, 0));
    expect(lock.size()).toBe(0);
  });
});
