/**
 * Following a verifier actor to its verdict: callers of `verify`/`resume` attach to the actor, the
 * first one to see `awaiting_retry_turn` runs the one `reply_retry` turn (however many callers follow
 * the actor), and all resolve with the outcome of its final state. The decisions (`followStep`,
 * `attachStart`, `retryTurnEvent`, `outcomeOf`) are pure; `createVerifierFollower` does the waiting.
 */
import { verifierAwaitsRetryTurn, type ReplyVerifierContext, type ReplyVerifierEvent } from '../../machines/reply-verifier.js';
import type { ActorRuntime } from '../runtime/actor-runtime.js';
import type { AuditEventInput, Store } from '../store/types.js';
import { messageOf, VerificationStepError } from './verification-errors.js';
import { FINAL_VERIFIER_STATES } from './verifier-keys.js';

export interface VerificationOutcome {
  result: 'confirmed' | 'confirmed_via_fallback' | 'failed';
  commentId?: number;
  errorCode?: string;
  mcpFailureReason?: string;
}

export type RunReplyRetryTurn = () => Promise<{ ok: boolean }>;

/** The outcome a caller gets from the verifier's final context (absent fields left out). */
export function outcomeOf(ctx: ReplyVerifierContext): VerificationOutcome {
  const out: VerificationOutcome = { result: ctx.result ?? 'failed' };
  if (ctx.commentId !== null) out.commentId = ctx.commentId;
  if (ctx.errorCode !== null) out.errorCode = ctx.errorCode;
  if (ctx.mcpFailureReason !== null) out.mcpFailureReason = ctx.mcpFailureReason;
  return out;
}

/** What a follower does on seeing the verifier in `state`. */
export function followStep(state: string, retryStarted: boolean): 'resolve' | 'run_retry' | 'wait' {
  if (FINAL_VERIFIER_STATES.has(state)) return 'resolve';
  if (verifierAwaitsRetryTurn(state) && !retryStarted) return 'run_retry';
  return 'wait';
}

/**
 * On attaching: no stored verifier is an error; one stored but not running (not final) has not been
 * restored yet — or another caller's create is between its transaction and `start()`; else follow it.
 */
export function attachStart(current: { state: string } | undefined, running: boolean): 'missing' | 'not_running' | 'follow' {
  if (!current) return 'missing';
  if (!FINAL_VERIFIER_STATES.has(current.state) && !running) return 'not_running';
  return 'follow';
}

/** The event the retry turn's end sends the verifier. */
export function retryTurnEvent(ok: boolean, errorCode: string | undefined): ReplyVerifierEvent {
  return ok ? { type: 'RETRY_TURN_DONE' } : { type: 'RETRY_TURN_FAILED', errorCode: errorCode ?? 'retry_turn_failed' };
}

export interface VerifierFollower {
  /** Follows the actor to a final state, running the retry turn when it asks for one. */
  attach(actorId: string, runReplyRetryTurn: RunReplyRetryTurn): Promise<VerificationOutcome>;
  /** One follow per turn at a time: a second caller gets the first one's promise. */
  follow(turnKey: string, start: () => Promise<VerificationOutcome>): Promise<VerificationOutcome>;
  /** Rejects every attach to the actor with `error` (its copy here was let go: no verdict comes here). */
  drop(actorId: string, error: unknown): void;
}

export function createVerifierFollower(deps: {
  store: Store;
  runtime: () => ActorRuntime;
  log: (msg: string, fields: Record<string, unknown>) => void;
}): VerifierFollower {
  const { store, runtime: rt, log } = deps;
  const inflight = new Map<string, Promise<VerificationOutcome>>();
  const retryRuns = new Map<string, Promise<void>>();
  /** How to reject each live attach, per actor. */
  const attached = new Map<string, Set<(err: unknown) => void>>();

  async function audit(event: AuditEventInput): Promise<void> {
    await store.transact((tx) => tx.appendAudit(event));
  }

  async function runRetry(actorId: string, ctx: ReplyVerifierContext, runReplyRetryTurn: RunReplyRetryTurn): Promise<void> {
    await audit({ action: 'reply.retry_turn_intent', actor: 'system', actorId, taskId: ctx.taskId, metadata: { turnKey: ctx.turnKey } });
    let ok = false;
    let errorCode: string | undefined;
    try {
      ok = (await runReplyRetryTurn()).ok;
    } catch (error) {
      errorCode = 'retry_turn_error';
      log('reply retry turn threw', { actorId, error: messageOf(error) });
    }
    await audit({
      action: 'reply.retry_turn_result',
      actor: 'system',
      actorId,
      taskId: ctx.taskId,
      errorCode: ok ? null : (errorCode ?? 'retry_turn_failed'),
      metadata: { turnKey: ctx.turnKey, ok },
    });
    const event = retryTurnEvent(ok, errorCode);
    const sent = await rt().send(actorId, event, { by: 'system' });
    if (!sent.ok && !FINAL_VERIFIER_STATES.has(sent.state ?? '')) {
      throw new VerificationStepError('verifier_rejected_event', `${actorId} rejected ${event.type} in ${String(sent.state)}`);
    }
  }

  /** One retry turn per verifier, however many callers follow it. */
  function retryOnce(actorId: string, ctx: ReplyVerifierContext, runReplyRetryTurn: RunReplyRetryTurn): Promise<void> {
    let run = retryRuns.get(actorId);
    if (!run) {
      run = runRetry(actorId, ctx, runReplyRetryTurn);
      retryRuns.set(actorId, run);
      const forget = () => retryRuns.delete(actorId);
      run.then(forget, forget);
    }
    return run;
  }

  function attach(actorId: string, runReplyRetryTurn: RunReplyRetryTurn): Promise<VerificationOutcome> {
    return new Promise<VerificationOutcome>((resolve, reject) => {
      let retryStarted = false;
      let done = false;
      const finish = (fn: () => void) => {
        if (done) return;
        done = true;
        unsubscribe();
        const live = attached.get(actorId);
        live?.delete(fail);
        if (live?.size === 0) attached.delete(actorId);
        fn();
      };
      const consider = (state: string, context: unknown) => {
        if (done) return;
        const step = followStep(state, retryStarted);
        if (step === 'resolve') finish(() => resolve(outcomeOf(context as ReplyVerifierContext)));
        if (step !== 'run_retry') return;
        retryStarted = true;
        retryOnce(actorId, context as ReplyVerifierContext, runReplyRetryTurn).catch((err: unknown) => finish(() => reject(err)));
      };
      const unsubscribe = rt().onTransition((n) => {
        if (n.actorId === actorId) consider(n.toState, n.context);
      });
      const fail = (err: unknown) => finish(() => reject(err));
      if (!attached.has(actorId)) attached.set(actorId, new Set());
      attached.get(actorId)!.add(fail);
      const check = async (settle: boolean): Promise<void> => {
        if (done) return;
        const current = await rt().stateOf(actorId);
        // Hosted here from the store if it is not yet (on a shared store: by the node that follows it).
        const running = await rt().ensureHosted(actorId);
        // A transition seen meanwhile may have settled it already.
        if (done) return;
        const start = attachStart(current, running);
        if (start === 'missing') {
          finish(() => reject(new VerificationStepError('verifier_missing', `no verifier ${actorId}`)));
          return;
        }
        if (start === 'not_running') {
          // Another caller's create may be between its transaction and `start()`: look once more later.
          if (settle) {
            void store.sync().then(() => setImmediate(() => void check(false).catch(fail)), fail);
            return;
          }
          finish(() => reject(new VerificationStepError('verifier_not_restored', `${actorId} is stored but not running: call runtime.restoreAll() first`)));
          return;
        }
        consider(current!.state, current!.context);
      };
      check(true).catch(fail);
    });
  }

  function follow(turnKey: string, start: () => Promise<VerificationOutcome>): Promise<VerificationOutcome> {
    const running = inflight.get(turnKey);
    if (running) return running;
    const p = start();
    inflight.set(turnKey, p);
    const clear = () => {
      if (inflight.get(turnKey) === p) inflight.delete(turnKey);
    };
    p.then(clear, clear);
    return p;
  }

  function drop(actorId: string, error: unknown): void {
    for (const fail of [...(attached.get(actorId) ?? [])]) fail(error);
    attached.delete(actorId);
  }

  return { attach, follow, drop };
}
