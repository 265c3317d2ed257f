/**
 * The verifier's `retryTurn` effect (its `awaiting_retry_turn` state invokes it): asks the task for
 * the one `reply_retry` turn, through the runner the task's verification step offered for that turn
 * (it moves the task to `running` under its lease and resolves once the turn ended), and reports how
 * it went as RETRY_TURN_DONE or RETRY_TURN_FAILED. One run per verifier: a copy of the verifier hosted
 * again meanwhile (its verification stopped while the task runs the turn) joins the run in flight. A
 * runner whose lease is gone is dropped and the next offer (the next lease holder's) runs the turn.
 * The effect never fails the verifier: what it could not do (the store did not answer) fails the
 * verification that follows it (`failed`), as a step that threw.
 */
import type { ReplyVerifierEvent, RetryTurnInput } from '../../machines/reply-verifier.js';
import type { ActorRuntime } from '../runtime/actor-runtime.js';
import { isLeaseRefusal, type Store } from '../store/types.js';
import { sharedWhileRunning } from './shared-while-running.js';
import { messageOf } from './verification-errors.js';
import { verifierActorId } from './verifier-keys.js';

export type RunReplyRetryTurn = () => Promise<{ ok: boolean }>;

/** The event the retry turn's end sends the verifier. */
export function retryTurnEvent(ok: boolean, errorCode: string | undefined): ReplyVerifierEvent {
  return ok ? { type: 'RETRY_TURN_DONE' } : { type: 'RETRY_TURN_FAILED', errorCode: errorCode ?? 'retry_turn_failed' };
}

export interface RetryTurns {
  /** The verification step of `turnKey` offers how to run its retry turn (the latest offer counts). */
  offer(turnKey: string, run: RunReplyRetryTurn): void;
  /** Forgets the offer once the turn's verification ended. */
  withdraw(turnKey: string, run: RunReplyRetryTurn): void;
  /** The effect: waits for an offer (none before the task's verification runs here), runs it once, reports. */
  effect(input: RetryTurnInput): Promise<void>;
}

export function createRetryTurns(deps: {
  store: Store;
  runtime: () => ActorRuntime;
  log: (msg: string, fields: Record<string, unknown>) => void;
  /** The run could not finish: whoever follows the verifier hears of `error`. */
  failed: (actorId: string, error: unknown) => void;
}): RetryTurns {
  const { store, runtime: rt, log } = deps;
  const offers = new Map<string, RunReplyRetryTurn>();
  const waiting = new Map<string, Array<(run: RunReplyRetryTurn) => void>>();

  function offered(turnKey: string): Promise<RunReplyRetryTurn> {
    const run = offers.get(turnKey);
    if (run) return Promise.resolve(run);
    return new Promise((resolve) => waiting.set(turnKey, [...(waiting.get(turnKey) ?? []), resolve]));
  }

  async function runOnce({ taskId, turnKey }: RetryTurnInput): Promise<void> {
    const actorId = verifierActorId(turnKey);
    let ok = false;
    let errorCode: string | undefined;
    for (let attempt = 0; ; attempt++) {
      const run = await offered(turnKey);
      if (attempt === 0) await store.transact((tx) => tx.appendAudit({ action: 'reply.retry_turn_intent', actor: 'system', actorId, taskId, metadata: { turnKey } }));
      try {
        ok = (await run()).ok;
      } catch (error) {
        if (isLeaseRefusal(error)) {
          if (offers.get(turnKey) === run) offers.delete(turnKey);
          log('retry turn offered under a lease that is gone: waiting for the next offer', { actorId });
          continue;
        }
        errorCode = 'retry_turn_error';
        log('reply retry turn threw', { actorId, error: messageOf(error) });
      }
      break;
    }
    await store.transact((tx) =>
      tx.appendAudit({ action: 'reply.retry_turn_result', actor: 'system', actorId, taskId, errorCode: ok ? null : (errorCode ?? 'retry_turn_failed'), metadata: { turnKey, ok } }),
    );
    // A refusal is alerted by the runtime: the verifier moved on without the turn it asked for.
    const sent = await rt().send(actorId, retryTurnEvent(ok, errorCode), { by: 'system' });
    if (!sent.ok) log('retry turn outcome refused', { actorId, state: sent.state });
  }

  return {
    offer(turnKey, run) {
      offers.set(turnKey, run);
      for (const resolve of waiting.get(turnKey) ?? []) resolve(run);
      waiting.delete(turnKey);
    },
    withdraw(turnKey, run) {
      if (offers.get(turnKey) === run) offers.delete(turnKey);
    },
    effect: sharedWhileRunning(
      (input) => verifierActorId(input.turnKey),
      (input) =>
        runOnce(input).catch((error: unknown) => {
          log('retry turn could not finish', { actorId: verifierActorId(input.turnKey), error: messageOf(error) });
          deps.failed(verifierActorId(input.turnKey), error);
        }),
    ),
  };
}
