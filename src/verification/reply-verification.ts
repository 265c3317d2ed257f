/**
 * Reply verification (spec §5.4, §6.4): one `verifier` actor per task turn, hosted by the runtime,
 * running `machines/reply-verifier.ts` with its three effects injected here:
 *
 * - `queryReply` (reply-lookup.ts) reads the bot's comments back since the turn started and looks
 *   for exactly this attempt's marker. A Gitea error throws, which the machine turns into `failed` —
 *   no write ever follows a failed or unknown query.
 * - `postFallback` (post-fallback.ts) is check-then-act by marker: it adopts a comment that is
 *   already there, and only when Gitea answered "absent" POSTs the turn's final message.
 * - `retryTurn` (retry-turn.ts) asks the task for the one reply_retry turn, through the runner its
 *   verification step offers, and reports how it went.
 *
 * All wait for `runtime.committed` (the transition that started them is durable), and the runtime
 * re-invokes an in-flight effect when it restores the actor, so every step is idempotent by marker. When the agent posted the reply twice,
 * the first comment is confirmed and the others are recorded as `reply.extra_comment` audit events;
 * they are left on Gitea (deleting a user-visible answer is worse than a duplicate). The verdict is
 * written by the projection (verifier-projection.ts); callers follow the actor (verifier-follower.ts).
 */
import { fromPromise } from 'xstate';
import {
  REPLY_VERIFIER_MACHINE_VERSION,
  replyVerifierMachine,
  type PostFallbackInput,
  type RetryTurnInput,
  type PostFallbackOutput,
  type QueryReplyInput,
  type QueryReplyOutput,
  type ReplyVerifierContext,
  type ReplyVerifierInput,
} from '../../machines/reply-verifier.js';
import type { TaskRecord, TurnRecord } from '../domain/records.js';
import { taskActorId } from '../tasks/task-actor.js';
import { TASK_EFFECTS } from '../../machines/task-lifecycle.js';
import type { GiteaClient } from '../gitea/gitea-client.js';
import { BOT_COMMENT_SINCE_MARGIN_MS } from '../gitea/bot-comments.js';
import type { ActorKind, ActorRuntime } from '../runtime/actor-runtime.js';
import type { LeaseFence } from '../leases/lease-fence.js';
import { isLeaseRefusal, type Store } from '../store/types.js';
import { postFallbackReply } from './post-fallback.js';
import { questionRetryPrompt, replyRetryPrompt } from './reply-body.js';
import { lookUpReply } from './reply-lookup.js';
import { VerificationStepError } from './verification-errors.js';
import { verifiedTurnOf } from './verified-turn.js';
import { createRetryTurns, type RunReplyRetryTurn } from './retry-turn.js';
import { sharedWhileRunning } from './shared-while-running.js';
import { createVerifierFollower, type VerificationOutcome } from './verifier-follower.js';
import { VERIFIER_KIND, verifierActorId } from './verifier-keys.js';
import { projectVerifier } from './verifier-projection.js';

export { VERIFIER_KIND, replyCommentKey, verifierActorId } from './verifier-keys.js';
export { VerificationStepError } from './verification-errors.js';
export type { VerificationOutcome } from './verifier-follower.js';

export type VerificationLogger = (msg: string, fields: Record<string, unknown>) => void;

export interface ReplyVerificationOptions {
  store: Store;
  /** The runtime, or a getter for it: the kind must exist before the runtime that hosts it. */
  runtime: ActorRuntime | (() => ActorRuntime);
  gitea: GiteaClient;
  botLogin: string;
  logger?: VerificationLogger;
  /** Subtracted from the turn's start for the `since` filter (1 s resolution, clock skew). */
  sinceMarginMs?: number;
}

export interface VerifyInput {
  task: TaskRecord;
  turn: TurnRecord;
  /** Runs the one `reply_retry` turn; `ok` means the turn completed (the query decides the rest). */
  runReplyRetryTurn: RunReplyRetryTurn;
  /**
   * The lease of the worker that runs the task, checked in the fallback post's writes. Once it is gone
   * the verifier's copy here stops where it is (its stored state stays for the next holder's worker) and
   * `verify` rejects with LeaseLostError.
   */
  fence?: LeaseFence;
}

export interface ReplyVerification {
  kind: ActorKind;
  /** Creates the turn's verifier (or attaches to it) and resolves with its final outcome. */
  verify(input: VerifyInput): Promise<VerificationOutcome>;
  /** Attaches to a verifier restored by `runtime.restoreAll()` (or already finished). */
  resume(turnKey: string, runReplyRetryTurn: RunReplyRetryTurn): Promise<VerificationOutcome>;
  replyRetryPrompt(previousFinalMessage: string | null, marker: string): string;
  /** The retry turn's prompt after a question that did not land (the task waits only once it is on Gitea). */
  questionRetryPrompt(question: string, marker: string): string;
}

/** What the verifier of `turn` starts from. */
export function verifierInput(task: TaskRecord, turn: TurnRecord, botLogin: string): ReplyVerifierInput {
  return {
    taskId: task.taskId,
    turnKey: turn.turnKey,
    resourceKey: task.resourceKey,
    marker: turn.marker,
    botLogin,
    turnStartedAt: Date.parse(turn.startedAt),
    mcpFailureReason: turn.commentCall?.error ?? task.mcpFailureReason ?? null,
  };
}

export function createReplyVerification(options: ReplyVerificationOptions): ReplyVerification {
  const { store, gitea, botLogin } = options;
  const rt: () => ActorRuntime = typeof options.runtime === 'function' ? options.runtime : (() => options.runtime) as () => ActorRuntime;
  const log: VerificationLogger = options.logger ?? (() => undefined);
  const lookupDeps = { store, gitea, sinceMarginMs: options.sinceMarginMs ?? BOT_COMMENT_SINCE_MARGIN_MS };
  const follower = createVerifierFollower({ store, runtime: rt });
  const retryTurns = createRetryTurns({ store, runtime: rt, log, failed: (actorId, error) => follower.drop(actorId, error) });

  async function taskOf(taskId: string): Promise<TaskRecord> {
    const task = await store.get<TaskRecord>('tasks', taskId);
    if (!task) throw new VerificationStepError('task_missing', `task ${taskId} not found`);
    return task;
  }

  async function queryReply(input: QueryReplyInput): Promise<QueryReplyOutput> {
    const step = (await rt().stateOf(verifierActorId(input.turnKey)))?.state ?? 'query';
    const match = await lookUpReply(lookupDeps, await taskOf(input.taskId), input, step);
    return match.first ? { found: true, commentId: match.first.id } : { found: false };
  }

  async function turnStartOf(turnKey: string): Promise<number> {
    const ctx = (await rt().stateOf(verifierActorId(turnKey)))?.context as ReplyVerifierContext | undefined;
    if (ctx) return ctx.turnStartedAt;
    const turn = await store.get<TurnRecord>('turns', turnKey);
    return turn ? Date.parse(turn.startedAt) : Number.NaN;
  }

  /** The fence of the worker following each task's verifier here (the latest caller's). */
  const fences = new Map<string, LeaseFence>();

  async function postFallback(input: PostFallbackInput): Promise<PostFallbackOutput> {
    const fence = fences.get(input.taskId);
    try {
      return await postFallbackReply({ store, gitea, botLogin, lookUp: (task, query, step) => lookUpReply(lookupDeps, task, query, step), turnStartOf, ...(fence ? { fence } : {}) }, input);
    } catch (error) {
      if (!isLeaseRefusal(error)) throw error;
      // This node no longer runs the task: its copy of the verifier stops here without persisting the
      // failure, so the stored verifier stays in fallback_posting for the worker that holds the lease
      // now; whoever followed it here hears of the lost lease instead of a verdict.
      const actorId = verifierActorId(input.turnKey);
      log('fallback post refused: the lease is gone', { actorId, taskId: input.taskId });
      rt().release((a) => a.actorId === actorId);
      follower.drop(actorId, error);
      throw error;
    }
  }

  // Effects run only once the transition that started them is durable (the verifier's own commit).
  const durable =
    <I extends { turnKey: string }, O>(effect: (input: I) => Promise<O>) =>
    async ({ input }: { input: I }) => {
      await rt().committed(verifierActorId(input.turnKey));
      return effect(input);
    };

  const machine = replyVerifierMachine.provide({
    actors: {
      queryReply: fromPromise<QueryReplyOutput, QueryReplyInput>(durable(queryReply)),
      postFallback: fromPromise<PostFallbackOutput, PostFallbackInput>(durable(sharedWhileRunning((input) => input.turnKey, postFallback))),
      retryTurn: fromPromise<void, RetryTurnInput>(durable(retryTurns.effect)),
    },
  });

  const kind: ActorKind = {
    kind: VERIFIER_KIND,
    machine,
    machineVersion: REPLY_VERIFIER_MACHINE_VERSION,
    project: projectVerifier,
    // The verifier belongs to its task's verification (the effect of verifying_reply) while that runs here.
    // A verifier stored in awaiting_retry_turn before that state invoked anything gets its effect on restore.
    invokesOnRestore: true,
    hostedUnder: (taskId) => (taskId === null ? null : { actorId: taskActorId(taskId), child: TASK_EFFECTS.verifying_reply }),
  };

  return {
    kind,
    replyRetryPrompt,
    questionRetryPrompt,
    async verify({ task, turn: given, runReplyRetryTurn, fence }) {
      // Only a retry turn needs the task's other turns; a normal turn follows at once, before any read,
      // so a re-attachment asked for in the same turn of the event loop joins this follow.
      const turn = given.kind === 'reply_retry' ? verifiedTurnOf(given, await store.byIndex<TurnRecord>('turns', 'taskId', given.taskId)) : given;
      if (fence) fences.set(task.taskId, fence);
      retryTurns.offer(turn.turnKey, runReplyRetryTurn);
      const followed = follower.follow(turn.turnKey, async () => {
        const actorId = verifierActorId(turn.turnKey);
        if (!(await rt().stateOf(actorId))) {
          try {
            await rt().create(VERIFIER_KIND, actorId, verifierInput(task, turn, botLogin), { taskId: task.taskId, by: 'system' });
          } catch (error) {
            // Another caller created it first: follow that one.
            if (!(await rt().stateOf(actorId))) throw error;
          }
          log('verifier started', { actorId, taskId: task.taskId });
        }
        return follower.attach(actorId);
      });
      const forget = () => {
        retryTurns.withdraw(turn.turnKey, runReplyRetryTurn);
        if (fence && fences.get(task.taskId) === fence) fences.delete(task.taskId);
      };
      followed.then(forget, forget);
      return followed;
    },
    resume(turnKey, runReplyRetryTurn) {
      retryTurns.offer(turnKey, runReplyRetryTurn);
      const followed = follower.follow(turnKey, () => follower.attach(verifierActorId(turnKey)));
      const forget = () => retryTurns.withdraw(turnKey, runReplyRetryTurn);
      followed.then(forget, forget);
      return followed;
    },
  };
}
