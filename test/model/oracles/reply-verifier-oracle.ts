/**
 * Reply verifier oracle, written from spec §5.4 and §8 ("MCP 最终回帖缺失 → 一次 reply_retry turn";
 * "REST 兜底失败 → failed_reply"):
 * 1. query Gitea for the bot's comment with the marker: found → confirmed;
 * 2. only an explicit "missing" answer leads on: one reply_retry turn (at most one), then query again;
 *    a failed or unknown query writes nothing and fails (→ failed_reply);
 * 3. still missing after the retry (or the retry turn failed) → one REST fallback comment with the
 *    same marker, then a query to confirm it: found → confirmed_via_fallback; a failed post, a
 *    fallback still not visible or a failed query → failed.
 *
 * The Gitea answers arrive as the invoked actors' done/error events; which actor is which:
 * `queryReply` (first query), `postFallback` (the only write), `checkFallback` (confirming query).
 */
import type { AnyEventObject } from 'xstate';
import type { Oracle } from './oracle.js';

export interface VerifierSpecState {
  state: string;
  retries: number;
  errorCode: string | null;
}

const FIRST_QUERY = 'queryReply';
const WRITE = 'postFallback';
const CONFIRM_QUERY = 'checkFallback';
const failure = { name: 'Error', message: 'oracle: Gitea did not answer' };

export const replyVerifierOracle: Oracle<VerifierSpecState> = {
  name: 'reply-verifier',
  source: 'spec §5.4.2–4, §8 (MCP reply missing, REST fallback failed)',
  states: ['querying', 'awaiting_retry_turn', 'fallback_posting', 'fallback_checking', 'confirmed', 'confirmed_via_fallback', 'failed'],
  initial: () => ({ state: 'querying', retries: 0, errorCode: null }),
  alphabet: () => [
    // Every Gitea answer from every invoked actor, in every state: found, explicitly missing, unknown.
    ...[FIRST_QUERY, CONFIRM_QUERY].flatMap((id) => [
      { type: `xstate.done.actor.${id}`, output: { found: true, commentId: 77 } },
      { type: `xstate.done.actor.${id}`, output: { found: false } },
      { type: `xstate.error.actor.${id}`, error: failure },
    ]),
    { type: `xstate.done.actor.${WRITE}`, output: { posted: true, commentId: 78 } },
    { type: `xstate.error.actor.${WRITE}`, error: failure },
    { type: 'RETRY_TURN_DONE' },
    { type: 'RETRY_TURN_FAILED', errorCode: 'retry_turn_failed' },
  ],
  next(s, e) {
    const to = (state: string, patch: Partial<VerifierSpecState> = {}): VerifierSpecState => ({ ...s, ...patch, state });
    const found = (e as { output?: { found?: boolean } }).output?.found;
    switch (s.state) {
      case 'querying':
        if (e.type === `xstate.done.actor.${FIRST_QUERY}`) {
          if (found) return to('confirmed');
          return s.retries < 1 ? to('awaiting_retry_turn', { retries: s.retries + 1 }) : to('fallback_posting');
        }
        if (e.type === `xstate.error.actor.${FIRST_QUERY}`) return to('failed', { errorCode: 'reply_query_failed' });
        return null;
      case 'awaiting_retry_turn':
        if (e.type === 'RETRY_TURN_DONE') return to('querying');
        if (e.type === 'RETRY_TURN_FAILED') return to('fallback_posting');
        return null;
      case 'fallback_posting':
        if (e.type === `xstate.done.actor.${WRITE}`) return to('fallback_checking');
        if (e.type === `xstate.error.actor.${WRITE}`) return to('failed', { errorCode: 'rest_fallback_failed' });
        return null;
      case 'fallback_checking':
        if (e.type === `xstate.done.actor.${CONFIRM_QUERY}`)
          return found ? to('confirmed_via_fallback') : to('failed', { errorCode: 'rest_fallback_unconfirmed' });
        if (e.type === `xstate.error.actor.${CONFIRM_QUERY}`) return to('failed', { errorCode: 'reply_query_failed' });
        return null;
      default:
        return null;
    }
  },
  value: (s) => s.state,
  key: (s) => JSON.stringify(s),
  observe: (s) => ({ replyRetries: s.retries, errorCode: s.errorCode }),
};

/** The states in which the verifier writes to Gitea: only after an explicit "missing" (§5.4.3). */
export const VERIFIER_WRITE_STATES = ['fallback_posting'];
