// What a finished (or stopped, or failed) Codex turn means for the task, its turn record and its
// session — decided from data alone; session-manager.ts does the writing.
import type { SessionEvent } from '../../machines/session.js';
import type { CodexTurnOutcome } from '../codex/run-turn.js';
import type { TurnRecord } from '../domain/records.js';
import type { TurnOutcome } from '../domain/turn-outcome.js';
import { FINAL_TURN_ERRORS } from './session-error.js';
import { findCommentCall, requestedQuestionsText, waitingUserQuestion } from './turn-outcome.js';

export type { TurnOutcome };

/** Why a turn was stopped from our side; `limit:<code>`: a per-task budget (src/usage/) ran out. */
export type StopReason = 'interrupt' | 'timeout' | `limit:${string}`;

export function failedTurn(turnKey: string, turnId: string | null, errorCode: string, retryable: boolean): TurnOutcome {
  return { kind: 'failed', turnKey, turnId, errorCode, retryable };
}

/** The budget code a stop names, or null when no budget stopped the turn. */
export function budgetLimitOf(stopReason: StopReason | null): string | null {
  return stopReason?.startsWith('limit:') ? stopReason.slice('limit:'.length) : null;
}

/** A separate wall-time budget timer is needed only when the budget ends before the turn timeout. */
export function budgetTimerMs(budgetMs: number | null, turnTimeoutMs: number): number | null {
  return budgetMs !== null && budgetMs < turnTimeoutMs ? budgetMs : null;
}

export interface TurnEnd {
  turnKey: string;
  /** The turn id Codex gave, if it got that far. */
  turnId: string | null;
  /** What the turn threw, if it threw (then `turnErrorCode` is its code). */
  error: { code: string } | null;
  stopReason: StopReason | null;
  /** The turn's end as Codex reported it; null when we gave up waiting after a stop. */
  out: CodexTurnOutcome | null;
  resourceNumber: number;
  /** The usage hooks' reading of a failed turn's error (e.g. a provider rate limit), or null. */
  classifyFailure: (error: unknown) => string | null;
}

/**
 * The outcome, in order of precedence: a throw (retryable unless a retry cannot help), a budget stop (names the limit), a
 * timeout, a stop Codex never confirmed (`abort_timeout`), Codex's own interrupted/failed, and
 * for a completed turn: a question for the user, else a posted comment, else no comment.
 */
export function turnOutcome(end: TurnEnd): TurnOutcome {
  const { turnKey, turnId, out } = end;
  if (end.error) return failedTurn(turnKey, turnId, end.error.code, !FINAL_TURN_ERRORS.has(end.error.code));
  const limit = budgetLimitOf(end.stopReason);
  // Interrupted (or given up on) because a budget ran out: the task ends naming the limit.
  if (limit !== null) return failedTurn(turnKey, turnId, limit, false);
  if (end.stopReason === 'timeout') return failedTurn(turnKey, turnId, 'turn_timeout', false);
  if (!out) return failedTurn(turnKey, turnId, 'abort_timeout', false);
  if (out.status === 'interrupted') return { kind: 'interrupted', turnKey, turnId: out.turnId };
  if (out.status === 'failed') return failedTurn(turnKey, out.turnId, end.classifyFailure(out.error) ?? 'turn_failed', true);
  const commentCall = findCommentCall(out.items, end.resourceNumber);
  const question = waitingUserQuestion(out.finalMessage) ?? requestedQuestionsText(out.userInputRequested);
  if (question !== null) return { kind: 'waiting_user', turnKey, turnId: out.turnId, question, commentCall };
  if (commentCall) return { kind: 'replied', turnKey, turnId: out.turnId, finalMessage: out.finalMessage, commentCall };
  return { kind: 'no_comment', turnKey, turnId: out.turnId, finalMessage: out.finalMessage };
}

/** The turn record's final status; a turn a budget stopped was interrupted, whatever the task makes of it. */
export function turnRecordStatus(outcome: TurnOutcome, stopReason: StopReason | null, out: CodexTurnOutcome | null): TurnRecord['status'] {
  const budgetStopped = budgetLimitOf(stopReason) !== null && out?.status === 'interrupted';
  if (outcome.kind === 'interrupted' || budgetStopped) return 'interrupted';
  return outcome.kind === 'failed' ? 'failed' : 'completed';
}

/** What the session actor hears about the turn's end; nothing if the turn never got an id. */
export function sessionEventForTurnEnd(outcome: TurnOutcome, turnId: string | null): SessionEvent | null {
  if (turnId === null) return null;
  if (outcome.kind === 'waiting_user') return { type: 'TURN_WAITING_USER', turnId };
  if (outcome.kind === 'failed') return { type: 'TURN_FAILED', turnId, errorCode: outcome.errorCode };
  return { type: 'TURN_COMPLETED', turnId };
}

/**
 * The marker a new turn's reply must carry. A reply-retry turn re-posts the answer of the turn
 * being verified: it must carry THAT turn's marker (the last normal turn's), or verification (which
 * looks for the original marker) misses it and the REST fallback posts a second answer.
 */
export function markerForTurn(kind: 'normal' | 'reply_retry', turns: readonly TurnRecord[], fresh: () => string): string {
  const original = kind === 'reply_retry' ? turns.filter((t) => t.kind === 'normal').at(-1) : undefined;
  return original?.marker ?? fresh();
}

/**
 * Since when the user's replies count: from the start of the last normal turn that completed (the
 * one that asked), so a retry of an interrupted turn gets the same replies again.
 */
export function repliesSinceOf(turns: readonly TurnRecord[]): string | undefined {
  return turns.filter((t) => t.kind === 'normal' && t.status === 'completed').at(-1)?.startedAt;
}
