/**
 * Following a verifier actor to its verdict: callers of `verify`/`resume` attach to the actor and
 * all resolve with the outcome of its final state (the verifier asks for its retry turn itself). The
 * decisions (`followStep`, `attachStart`, `outcomeOf`) are pure; `createVerifierFollower` does the waiting.
 */
import type { ReplyVerifierContext } from '../../machines/reply-verifier.js';
import type { ActorRuntime } from '../runtime/actor-runtime.js';
import type { Store } from '../store/types.js';
import { inFlightByKey } from './shared-while-running.js';
import { VerificationStepError } from './verification-errors.js';
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
export function followStep(state: string): 'resolve' | 'wait' {
  return FINAL_VERIFIER_STATES.has(state) ? 'resolve' : 'wait';
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

export interface VerifierFollower {
  /** Follows the actor to a final state. */
  attach(actorId: string): Promise<VerificationOutcome>;
  /** One follow per turn at a time: a second caller gets the first one's promise. */
  follow(turnKey: string, start: () => Promise<VerificationOutcome>): Promise<VerificationOutcome>;
  /** Rejects every attach to the actor with `error` (its copy here was let go: no verdict comes here). */
  drop(actorId: string, error: unknown): void;
}

export function createVerifierFollower(deps: {
  store: Store;
  runtime: () => ActorRuntime;
}): VerifierFollower {
  const { store, runtime: rt } = deps;
  /** One follow per turn at a time. */
  const follow = inFlightByKey<VerificationOutcome>();
  /** How to reject each live attach, per actor. */
  const attached = new Map<string, Set<(err: unknown) => void>>();

  function attach(actorId: string): Promise<VerificationOutcome> {
    return new Promise<VerificationOutcome>((resolve, reject) => {
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
        if (!done && followStep(state) === 'resolve') finish(() => resolve(outcomeOf(context as ReplyVerifierContext)));
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

  function drop(actorId: string, error: unknown): void {
    for (const fail of [...(attached.get(actorId) ?? [])]) fail(error);
    attached.delete(actorId);
  }

  return { attach, follow, drop };
}
