// The reply verification's pure decisions, each apart from the store, the runtime and Gitea:
// the verdict row and event (verifier-projection.ts), the fallback's intent row and failure event
// (post-fallback.ts), which extra copies are new (reply-lookup.ts), how a follower reacts to a state
// (verifier-follower.ts), which turn is verified (verified-turn.ts), the verifier's input.
import { describe, expect, it } from 'vitest';
import type { ReplyVerifierContext } from '../../machines/reply-verifier.js';
import { formatMarker } from '../../src/domain/marker.js';
import type { CommentRecord } from '../../src/domain/records.js';
import { GiteaError, type GiteaComment } from '../../src/gitea/gitea-client.js';
import { fallbackFailedAudit, fallbackIntentRecord } from '../../src/verification/post-fallback.js';
import { unrecordedExtras } from '../../src/verification/reply-lookup.js';
import { verifierInput } from '../../src/verification/reply-verification.js';
import { VerificationStepError, verificationErrorCodeOf } from '../../src/verification/verification-errors.js';
import { verifiedTurnOf } from '../../src/verification/verified-turn.js';
import { retryTurnEvent } from '../../src/verification/retry-turn.js';
import { sharedWhileRunning } from '../../src/verification/shared-while-running.js';
import { attachStart, followStep, outcomeOf } from '../../src/verification/verifier-follower.js';
import { verdictAudit, verdictRecord } from '../../src/verification/verifier-projection.js';
import { taskRecord, turnRecord } from '../support/verification-world.js';

const AT = '2026-03-10T08:00:00.000Z';
const task = taskRecord(3, { taskId: 't3' });
const turn = turnRecord(task, { turnKey: 't3:1', turnId: 'codex-1', startedAt: '2026-03-10T07:59:00.000Z' });

function ctx(over: Partial<ReplyVerifierContext> = {}): ReplyVerifierContext {
  return {
    taskId: 't3',
    turnKey: 't3:1',
    resourceKey: task.resourceKey,
    marker: turn.marker,
    botLogin: 'giteabot',
    turnStartedAt: Date.parse(turn.startedAt),
    replyRetries: 0,
    mcpFailureReason: null,
    commentId: null,
    fallbackCommentId: null,
    errorCode: null,
    errorMessage: null,
    lastRetryTurnError: null,
    result: null,
    ...over,
  };
}

function row(over: Partial<CommentRecord> = {}): CommentRecord {
  return {
    commentKey: 't3:1:reply',
    taskId: 't3',
    kind: 'rest_fallback',
    resourceKey: task.resourceKey,
    turnId: 'codex-0',
    commentId: 77,
    marker: turn.marker,
    bodyHash: 'sha256:abc',
    status: 'sent',
    errorCode: null,
    createdAt: '2026-03-10T07:59:30.000Z',
    updatedAt: '2026-03-10T07:59:30.000Z',
    ...over,
  };
}

describe('the verdict row and event', () => {
  it('a confirmed agent reply: mcp_final, the confirmed comment, no error', () => {
    const rec = verdictRecord(ctx({ commentId: 5 }), 'confirmed', undefined, turn, AT);
    expect(rec).toEqual({
      commentKey: 't3:1:reply',
      taskId: 't3',
      kind: 'mcp_final',
      resourceKey: task.resourceKey,
      turnId: 'codex-1',
      commentId: 5,
      marker: turn.marker,
      bodyHash: '',
      status: 'confirmed',
      errorCode: null,
      createdAt: AT,
      updatedAt: AT,
    });
    expect(verdictAudit(ctx({ commentId: 5 }), 'confirmed', 'verifier:t3:1')).toEqual({
      level: 'info',
      action: 'reply.confirmed',
      actor: 'system',
      actorId: 'verifier:t3:1',
      taskId: 't3',
      commentId: 5,
      errorCode: null,
      metadata: { turnKey: 't3:1', result: 'confirmed', mcpFailureReason: null },
    });
  });

  it('a confirmed fallback keeps the row the fallback wrote (hash, creation) and says rest_fallback', () => {
    const rec = verdictRecord(ctx({ commentId: 77, fallbackCommentId: 77 }), 'confirmed_via_fallback', row(), undefined, AT);
    expect(rec).toMatchObject({ kind: 'rest_fallback', status: 'confirmed', commentId: 77, bodyHash: 'sha256:abc', createdAt: '2026-03-10T07:59:30.000Z', turnId: 'codex-0', updatedAt: AT });
  });

  it('a failure is rest_fallback when a fallback was tried, and keeps the fallback comment id', () => {
    const failed = ctx({ errorCode: 'reply_query_failed', errorMessage: `boom ${'x'.repeat(300)}` });
    expect(verdictRecord(failed, 'failed', undefined, turn, AT)).toMatchObject({ kind: 'mcp_final', status: 'failed', commentId: null, errorCode: 'reply_query_failed' });
    expect(verdictRecord(failed, 'failed', row({ commentId: null }), turn, AT)).toMatchObject({ kind: 'rest_fallback', commentId: null });
    expect(verdictRecord({ ...failed, fallbackCommentId: 9 }, 'failed', undefined, turn, AT)).toMatchObject({ kind: 'rest_fallback', commentId: 9 });
    expect(verdictRecord({ ...failed, fallbackCommentId: 9 }, 'failed', row({ kind: 'mcp_final', commentId: 4 }), turn, AT)).toMatchObject({ commentId: 4 });
    const audit = verdictAudit(failed, 'failed', 'verifier:t3:1');
    expect(audit).toMatchObject({ level: 'alert', action: 'reply.failed', errorCode: 'reply_query_failed' });
    expect((audit.metadata?.['message'] as string).length).toBe(200);
  });
});

describe('the fallback POST', () => {
  const input = { taskId: 't3', turnKey: 't3:1', resourceKey: task.resourceKey, marker: turn.marker, mcpFailureReason: 'mcp_reply_missing' };

  it('writes a pending rest_fallback row with the body hash, keeping an earlier creation time', () => {
    expect(fallbackIntentRecord(input, turn, 'sha256:h', undefined, AT)).toEqual({
      commentKey: 't3:1:reply',
      taskId: 't3',
      kind: 'rest_fallback',
      resourceKey: task.resourceKey,
      turnId: 'codex-1',
      commentId: null,
      marker: turn.marker,
      bodyHash: 'sha256:h',
      status: 'pending',
      errorCode: null,
      createdAt: AT,
      updatedAt: AT,
    });
    expect(fallbackIntentRecord(input, turn, 'sha256:h', { createdAt: '2026-01-01T00:00:00.000Z' }, AT).createdAt).toBe('2026-01-01T00:00:00.000Z');
  });

  it('audits a failed POST as an alert with its status and whether Gitea answered', () => {
    const answered = new GiteaError({ code: 'gitea_locked', message: 'locked', status: 423, method: 'POST', endpoint: '/x', attempts: 1 });
    expect(fallbackFailedAudit(input, answered)).toEqual({
      level: 'alert',
      action: 'reply.fallback_result',
      actor: 'system',
      actorId: 'verifier:t3:1',
      taskId: 't3',
      errorCode: 'gitea_locked',
      metadata: { turnKey: 't3:1', ok: false, status: 423, answered: true, message: 'locked' },
    });
    expect(fallbackFailedAudit(input, new Error('socket hang up')).metadata).toMatchObject({ status: null, answered: false });
    expect(fallbackFailedAudit(input, new Error('socket hang up')).errorCode).toBe('verification_error');
  });

  it('names step errors by their code', () => {
    expect(verificationErrorCodeOf(new VerificationStepError('task_stopped', 'x'))).toBe('task_stopped');
  });
});

describe('extra copies of the reply', () => {
  const c = (id: number) => ({ id }) as GiteaComment;
  it('are audited once: ids already in a reply.extra_comment event are left out', () => {
    const known = [
      { action: 'reply.extra_comment', commentId: 8 },
      { action: 'reply.query_result', commentId: 9 },
    ];
    expect(unrecordedExtras([c(8), c(9), c(10)], known).map((x) => x.id)).toEqual([9, 10]);
    expect(unrecordedExtras([], known)).toEqual([]);
  });
});

describe('a write shared while it runs', () => {
  it('a caller with the same key joins the run in flight; another key, or a call after it ended, runs anew', async () => {
    const runs: string[] = [];
    let finish!: (v: string) => void;
    const post = sharedWhileRunning(
      (input: { turnKey: string }) => input.turnKey,
      (input) => {
        runs.push(input.turnKey);
        return input.turnKey === 'a' ? new Promise<string>((resolve) => (finish = resolve)) : Promise.resolve('other');
      },
    );
    const first = post({ turnKey: 'a' });
    const joined = post({ turnKey: 'a' });
    await post({ turnKey: 'b' });
    expect(runs).toEqual(['a', 'b']);
    finish('posted');
    expect(await Promise.all([first, joined])).toEqual(['posted', 'posted']);
    void post({ turnKey: 'a' });
    expect(runs).toEqual(['a', 'b', 'a']);
  });
});

describe('following a verifier', () => {
  it('resolves in a final state, waits otherwise (the verifier asks for its retry turn itself)', () => {
    for (const s of ['confirmed', 'confirmed_via_fallback', 'failed']) expect(followStep(s)).toBe('resolve');
    for (const s of ['querying', 'awaiting_retry_turn', 'fallback_posting']) expect(followStep(s)).toBe('wait');
  });

  it('refuses a missing verifier and one stored but not running; follows a running or finished one', () => {
    expect(attachStart(undefined, false)).toBe('missing');
    expect(attachStart({ state: 'querying' }, false)).toBe('not_running');
    expect(attachStart({ state: 'querying' }, true)).toBe('follow');
    expect(attachStart({ state: 'failed' }, false)).toBe('follow');
  });

  it('tells the verifier how the retry turn ended', () => {
    expect(retryTurnEvent(true, undefined)).toEqual({ type: 'RETRY_TURN_DONE' });
    expect(retryTurnEvent(true, 'retry_turn_error')).toEqual({ type: 'RETRY_TURN_DONE' });
    expect(retryTurnEvent(false, undefined)).toEqual({ type: 'RETRY_TURN_FAILED', errorCode: 'retry_turn_failed' });
    expect(retryTurnEvent(false, 'retry_turn_error')).toEqual({ type: 'RETRY_TURN_FAILED', errorCode: 'retry_turn_error' });
  });

  it('hands out the final context as an outcome without empty fields', () => {
    expect(outcomeOf(ctx({ result: 'confirmed', commentId: 5 }))).toEqual({ result: 'confirmed', commentId: 5 });
    expect(outcomeOf(ctx())).toEqual({ result: 'failed' });
    expect(outcomeOf(ctx({ result: 'failed', errorCode: 'reply_query_failed', mcpFailureReason: 'mcp_reply_missing' }))).toEqual({
      result: 'failed',
      errorCode: 'reply_query_failed',
      mcpFailureReason: 'mcp_reply_missing',
    });
  });
});

describe('which turn is verified', () => {
  const normal1 = turnRecord(task, { turnKey: 't3:1', startedAt: '2026-03-10T07:00:00.000Z' });
  const normal2 = turnRecord(task, { turnKey: 't3:2', startedAt: '2026-03-10T07:10:00.000Z' });
  const retry = turnRecord(task, { turnKey: 't3:3', kind: 'reply_retry', startedAt: '2026-03-10T07:20:00.000Z' });
  const later = turnRecord(task, { turnKey: 't3:4', startedAt: '2026-03-10T07:30:00.000Z' });

  it('a normal turn is its own; a reply_retry turn belongs to the latest normal turn before it', () => {
    expect(verifiedTurnOf(normal2, [normal1, normal2, retry, later])).toBe(normal2);
    expect(verifiedTurnOf(retry, [normal1, normal2, retry, later])).toBe(normal2);
    expect(verifiedTurnOf(retry, [retry])).toBe(retry);
  });

  it('starts the verifier from the turn marker and start, and the MCP failure of the turn before the task one', () => {
    expect(verifierInput(task, turn, 'giteabot')).toEqual({
      taskId: 't3',
      turnKey: 't3:1',
      resourceKey: task.resourceKey,
      marker: formatMarker({ taskId: 't3', turnKey: 't3:1', resourceKey: task.resourceKey }),
      botLogin: 'giteabot',
      turnStartedAt: Date.parse('2026-03-10T07:59:00.000Z'),
      mcpFailureReason: null,
    });
    const failedCall = { tool: 'issue_write', index: 1, accepted: false, error: 'mcp_tool_error' };
    expect(verifierInput({ ...task, mcpFailureReason: 'mcp_reply_missing' }, { ...turn, commentCall: failedCall }, 'b').mcpFailureReason).toBe('mcp_tool_error');
    expect(verifierInput({ ...task, mcpFailureReason: 'mcp_reply_missing' }, { ...turn, commentCall: null }, 'b').mcpFailureReason).toBe('mcp_reply_missing');
  });
});
