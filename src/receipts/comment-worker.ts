/**
 * The lifecycle both comment workers share (receipt outbox, receipt notices): a coalesced pass over
 * pending rows, a subscription to the runtime's transitions while started, and the retry timers
 * that kick the pass again. Stopping unsubscribes and cancels every timer: a stopped worker neither
 * reacts nor wakes.
 */
import type { ActorRuntime, TransitionNotice } from '../runtime/actor-runtime.js';
import { coalescedPass } from './coalesced-pass.js';
import { createRetryTimers, type RetryTimers } from './retry-timers.js';

export interface CommentWorker {
  readonly stopped: boolean;
  readonly timers: RetryTimers;
  /** The pass in flight, if any. */
  readonly running: Promise<void> | null;
  /** Starts a pass, or asks the running one to go round once more. */
  kick(): void;
  /** Subscribes to transitions (once) and accepts kicks again. */
  listen(): void;
  stop(): void;
}

export function createCommentWorker(
  runtime: Pick<ActorRuntime, 'onTransition'>,
  pass: () => Promise<void>,
  onTransition: (n: TransitionNotice) => void,
  onPassFailed: (error: unknown) => void,
): CommentWorker {
  let stopped = false;
  let unsubscribe: (() => void) | null = null;
  const passes = coalescedPass(pass, () => stopped, onPassFailed);
  const timers = createRetryTimers(() => passes.kick());
  return {
    get stopped() {
      return stopped;
    },
    timers,
    get running() {
      return passes.running;
    },
    kick: () => passes.kick(),
    listen() {
      stopped = false;
      unsubscribe ??= runtime.onTransition(onTransition);
    },
    stop() {
      stopped = true;
      unsubscribe?.();
      unsubscribe = null;
      timers.clear();
    },
  };
}
