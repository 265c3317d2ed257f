/**
 * Reply verification (spec §5.4, §6.4): one `verifier` actor per task turn, hosted by the runtime,
 * running `machines/reply-verifier.ts` with its two effects injected here:
 *
 * - `queryReply` lists the resource's comments updated since the turn started (minus a margin: Gitea
 *   compares whole seconds of its own clock) and looks for the bot's comment with exactly this
 *   attempt's marker. A Gitea error throws, which the machine turns into `failed` — no write ever
 *   follows a failed or unknown query.
 * - `postFallback` is check-then-act by marker: it queries first and adopts a comment that is already
 *   there (a retry turn that posted late, or our own POST before a restart), and only when Gitea
 *   answered "absent" POSTs the turn's final message with the full marker. Intent and result audit
 *   events surround the POST; the `<turnKey>:reply` comments row follows it.
 *
 * Both are wrapped in `runtime.durableFirst`, and the runtime re-invokes an in-flight effect when it
 * restores the actor, so every step is idempotent by marker. When the agent posted the reply twice,
 * the first comment is confirmed and the others are recorded as `reply.extra_comment` audit events;
 * they are left on Gitea (deleting a user-visible answer is worse than a duplicate).
 */
import { fromPromise } from 'xstate';
import {
  REPLY_VERIFIER_MACHINE_VERSION,
  replyVerifierMachine,
  type PostFallbackInput,
  type PostFallbackOutput,
  type QueryReplyInput,
  type QueryReplyOutput,
  type ReplyVerifierContext,
  type ReplyVerifierInput,
} from '../../machines/reply-verifier.js';
import { isTerminalTaskState } from '../../machines/task-lifecycle.js';
import type { CommentRecord, TaskRecord, TurnRecord } from '../domain/records.js';
import { isGiteaError, type GiteaClient } from '../gitea/gitea-client.js';
import { bodyHashOf } from '../receipts/receipt-record.js';
import type { ActorKind, ActorRuntime, PersistedChange } from '../runtime/actor-runtime.js';
import type { Store, Tx } from '../store/types.js';
import { findReplyComments, type ReplyMatch } from './find-reply.js';
import { replyBodyWithMarker, replyRetryPrompt } from './reply-body.js';

export const VERIFIER_KIND = 'verifier';

export function verifierActorId(turnKey: string): string {
  return `verifier:${turnKey}`;
}

export function replyCommentKey(turnKey: string): string {
  return `${turnKey}:reply`;
}

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
  runReplyRetryTurn: () => Promise<{ ok: boolean }>;
}

export interface VerificationOutcome {
  result: 'confirmed' | 'confirmed_via_fallback' | 'failed';
  commentId?: number;
  errorCode?: string;
  mcpFailureReason?: string;
}

export interface ReplyVerification {
  kind: ActorKind;
  /** Creates the turn's verifier (or attaches to it) and resolves with its final outcome. */
  verify(input: VerifyInput): Promise<VerificationOutcome>;
  /** Attaches to a verifier restored by `runtime.restoreAll()` (or already finished). */
  resume(turnKey: string, runReplyRetryTurn: () => Promise<{ ok: boolean }>): Promise<VerificationOutcome>;
  replyRetryPrompt(previousFinalMessage: string | null, marker: string): string;
}

/** A failure of a verification step with a stable code (kept in the audit log). */
export class VerificationStepError extends Error {
  override readonly name = 'VerificationStepError';
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

const FINAL_STATES = new Set(['confirmed', 'confirmed_via_fallback', 'failed']);
const DEFAULT_SINCE_MARGIN_MS = 5 * 60_000;

function errorCodeOf(error: unknown): string {
  if (isGiteaError(error)) return error.code;
  if (error instanceof VerificationStepError) return error.code;
  return 'verification_error';
}

function messageOf(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).slice(0, 200);
}

function outcomeOf(ctx: ReplyVerifierContext): VerificationOutcome {
  const out: VerificationOutcome = { result: ctx.result ?? 'failed' };
  if (ctx.commentId !== null) out.commentId = ctx.commentId;
  if (ctx.errorCode !== null) out.errorCode = ctx.errorCode;
  if (ctx.mcpFailureReason !== null) out.mcpFailureReason = ctx.mcpFailureReason;
  return out;
}

/** Writes the `<turnKey>:reply` row and the verdict event with the verifier's final transition. */
function projectVerifier(tx: Tx, change: PersistedChange): void {
  if (!FINAL_STATES.has(change.toState) || change.fromState === change.toState) return;
  const ctx = change.snapshot.context as ReplyVerifierContext;
  const key = replyCommentKey(ctx.turnKey);
  const cur = tx.get<CommentRecord>('comments', key);
  const turn = tx.get<TurnRecord>('turns', ctx.turnKey);
  const at = new Date().toISOString();
  const failed = change.toState === 'failed';
  const viaFallback = change.toState === 'confirmed_via_fallback' || (failed && (cur?.kind === 'rest_fallback' || ctx.fallbackCommentId !== null));
  tx.put<CommentRecord>('comments', key, {
    commentKey: key,
    taskId: ctx.taskId,
    kind: viaFallback ? 'rest_fallback' : 'mcp_final',
    resourceKey: ctx.resourceKey,
    turnId: turn?.turnId ?? cur?.turnId ?? null,
    commentId: failed ? (cur?.commentId ?? ctx.fallbackCommentId) : ctx.commentId,
    marker: ctx.marker,
    bodyHash: cur?.bodyHash ?? '',
    status: failed ? 'failed' : 'confirmed',
    errorCode: failed ? ctx.errorCode : null,
    createdAt: cur?.createdAt ?? at,
    updatedAt: at,
  });
  tx.appendAudit({
    level: failed ? 'alert' : 'info',
    action: failed ? 'reply.failed' : 'reply.confirmed',
    actor: 'system',
    actorId: change.actorId,
    taskId: ctx.taskId,
    commentId: ctx.commentId,
    errorCode: ctx.errorCode,
    metadata: {
      turnKey: ctx.turnKey,
      result: change.toState,
      mcpFailureReason: ctx.mcpFailureReason,
      ...(ctx.errorMessage ? { message: ctx.errorMessage.slice(0, 200) } : {}),
    },
  });
}

export function createReplyVerification(options: ReplyVerificationOptions): ReplyVerification {
  const { store, gitea } = options;
  const rt: () => ActorRuntime = typeof options.runtime === 'function' ? options.runtime : (() => options.runtime) as () => ActorRuntime;
  const botLogin = options.botLogin;
  const log: VerificationLogger = options.logger ?? (() => undefined);
  const sinceMarginMs = options.sinceMarginMs ?? DEFAULT_SINCE_MARGIN_MS;
  const inflight = new Map<string, Promise<VerificationOutcome>>();
  const retryRuns = new Map<string, Promise<void>>();

  function taskOf(taskId: string): TaskRecord {
    const task = store.get<TaskRecord>('tasks', taskId);
    if (!task) throw new VerificationStepError('task_missing', `task ${taskId} not found`);
    return task;
  }

  async function audit(event: Parameters<Tx['appendAudit']>[0]): Promise<void> {
    await store.transact((tx) => tx.appendAudit(event));
  }

  /** Lists and matches; audits intent, result and any extra copies. Throws on a Gitea error. */
  async function lookUp(input: QueryReplyInput, step: string): Promise<ReplyMatch> {
    const actorId = verifierActorId(input.turnKey);
    const task = taskOf(input.taskId);
    const since = new Date(input.since - sinceMarginMs);
    await audit({ action: 'reply.query_intent', actor: 'system', actorId, taskId: input.taskId, metadata: { turnKey: input.turnKey, step } });
    let match: ReplyMatch;
    try {
      const comments = await gitea.listIssueComments(task.owner, task.repo, task.resource.number, { since });
      match = findReplyComments(comments, input.botLogin, input);
    } catch (error) {
      await audit({
        level: 'alert',
        action: 'reply.query_result',
        actor: 'system',
        actorId,
        taskId: input.taskId,
        errorCode: errorCodeOf(error),
        metadata: { turnKey: input.turnKey, step, ok: false, message: messageOf(error) },
      });
      throw error;
    }
    await store.transact((tx) => {
      tx.appendAudit({
        action: 'reply.query_result',
        actor: 'system',
        actorId,
        taskId: input.taskId,
        commentId: match.first?.id ?? null,
        metadata: { turnKey: input.turnKey, step, ok: true, found: match.first !== undefined },
      });
      if (match.extras.length === 0) return;
      const known = new Set(
        store
          .audit({ actorId })
          .filter((a) => a.action === 'reply.extra_comment')
          .map((a) => a.commentId),
      );
      for (const extra of match.extras) {
        if (known.has(extra.id)) continue;
        tx.appendAudit({
          action: 'reply.extra_comment',
          actor: 'system',
          actorId,
          taskId: input.taskId,
          commentId: extra.id,
          metadata: { turnKey: input.turnKey, confirmedCommentId: match.first!.id, kept: true },
        });
      }
    });
    return match;
  }

  async function queryReply(input: QueryReplyInput): Promise<QueryReplyOutput> {
    const step = rt().stateOf(verifierActorId(input.turnKey))?.state ?? 'query';
    const match = await lookUp(input, step);
    return match.first ? { found: true, commentId: match.first.id } : { found: false };
  }

  async function postFallback(input: PostFallbackInput): Promise<PostFallbackOutput> {
    const actorId = verifierActorId(input.turnKey);
    const key = replyCommentKey(input.turnKey);
    const task = taskOf(input.taskId);
    // A task stopped while the verifier waited must not get an answer posted on its behalf.
    if (isTerminalTaskState(task.state)) throw new VerificationStepError('task_stopped', `task is ${task.state}`);

    // Check, then act: a comment that is already there (ours before a restart, or a late retry turn) is adopted.
    const existing = await lookUp({ ...input, botLogin, since: turnStartOf(input.turnKey) }, 'fallback_check');
    if (existing.first) {
      const commentId = existing.first.id;
      await store.transact((tx) => {
        const cur = tx.get<CommentRecord>('comments', key);
        if (cur) tx.put('comments', key, { ...cur, status: cur.status === 'confirmed' ? 'confirmed' : 'sent', commentId, updatedAt: new Date().toISOString() });
        tx.appendAudit({ action: 'reply.fallback_adopted', actor: 'system', actorId, taskId: input.taskId, commentId, metadata: { turnKey: input.turnKey } });
      });
      return { posted: true, commentId };
    }

    const turn = store.get<TurnRecord>('turns', input.turnKey);
    if (!turn?.finalMessage?.trim()) {
      await audit({
        level: 'alert',
        action: 'reply.fallback_result',
        actor: 'system',
        actorId,
        taskId: input.taskId,
        errorCode: 'final_message_missing',
        metadata: { turnKey: input.turnKey, ok: false },
      });
      throw new VerificationStepError('final_message_missing', 'the turn has no final message to post');
    }
    const body = replyBodyWithMarker(turn.finalMessage, input.marker);
    const bodyHash = bodyHashOf(body);
    await store.transact((tx) => {
      const cur = tx.get<CommentRecord>('comments', key);
      const at = new Date().toISOString();
      tx.put<CommentRecord>('comments', key, {
        commentKey: key,
        taskId: input.taskId,
        kind: 'rest_fallback',
        resourceKey: input.resourceKey,
        turnId: turn.turnId,
        commentId: null,
        marker: input.marker,
        bodyHash,
        status: 'pending',
        errorCode: null,
        createdAt: cur?.createdAt ?? at,
        updatedAt: at,
      });
      tx.appendAudit({
        action: 'reply.fallback_intent',
        actor: 'system',
        actorId,
        taskId: input.taskId,
        turnId: turn.turnId,
        metadata: { turnKey: input.turnKey, bodyHash, mcpFailureReason: input.mcpFailureReason },
      });
    });

    let commentId: number;
    try {
      commentId = (await gitea.createIssueComment(task.owner, task.repo, task.resource.number, body)).id;
    } catch (error) {
      await store.transact((tx) => {
        const cur = tx.get<CommentRecord>('comments', key);
        if (cur) tx.put('comments', key, { ...cur, status: 'failed', errorCode: errorCodeOf(error), updatedAt: new Date().toISOString() });
        tx.appendAudit({
          level: 'alert',
          action: 'reply.fallback_result',
          actor: 'system',
          actorId,
          taskId: input.taskId,
          errorCode: errorCodeOf(error),
          metadata: {
            turnKey: input.turnKey,
            ok: false,
            status: isGiteaError(error) ? error.status ?? null : null,
            answered: isGiteaError(error) ? error.answered : false,
            message: messageOf(error),
          },
        });
      });
      throw error;
    }
    await store.transact((tx) => {
      const cur = tx.get<CommentRecord>('comments', key);
      if (cur) tx.put('comments', key, { ...cur, status: 'sent', commentId, updatedAt: new Date().toISOString() });
      tx.appendAudit({ action: 'reply.fallback_result', actor: 'system', actorId, taskId: input.taskId, commentId, metadata: { turnKey: input.turnKey, ok: true } });
    });
    return { posted: true, commentId };
  }

  function turnStartOf(turnKey: string): number {
    const ctx = rt().stateOf(verifierActorId(turnKey))?.context as ReplyVerifierContext | undefined;
    if (ctx) return ctx.turnStartedAt;
    const turn = store.get<TurnRecord>('turns', turnKey);
    return turn ? Date.parse(turn.startedAt) : Number.NaN;
  }

  // Effects run only once the transition that started them is durable.
  const durable =
    <I, O>(effect: (input: I) => Promise<O>) =>
    ({ input }: { input: I }) =>
      rt().durableFirst(effect)(input);

  const machine = replyVerifierMachine.provide({
    actors: {
      queryReply: fromPromise<QueryReplyOutput, QueryReplyInput>(durable(queryReply)),
      postFallback: fromPromise<PostFallbackOutput, PostFallbackInput>(durable(postFallback)),
    },
  });

  const kind: ActorKind = {
    kind: VERIFIER_KIND,
    machine,
    machineVersion: REPLY_VERIFIER_MACHINE_VERSION,
    project: projectVerifier,
  };

  /** Follows the actor to a final state, running the retry turn when it asks for one. */
  function attach(actorId: string, runReplyRetryTurn: () => Promise<{ ok: boolean }>): Promise<VerificationOutcome> {
    return new Promise<VerificationOutcome>((resolve, reject) => {
      let retryStarted = false;
      let done = false;
      const finish = (fn: () => void) => {
        if (done) return;
        done = true;
        unsubscribe();
        fn();
      };
      const consider = (state: string, context: unknown) => {
        if (done) return;
        if (FINAL_STATES.has(state)) {
          finish(() => resolve(outcomeOf(context as ReplyVerifierContext)));
          return;
        }
        if (state === 'awaiting_retry_turn' && !retryStarted) {
          retryStarted = true;
          // One retry turn per verifier, however many callers follow it.
          let run = retryRuns.get(actorId);
          if (!run) {
            run = runRetry(actorId, context as ReplyVerifierContext, runReplyRetryTurn);
            retryRuns.set(actorId, run);
            const forget = () => retryRuns.delete(actorId);
            run.then(forget, forget);
          }
          run.catch((err: unknown) => finish(() => reject(err)));
        }
      };
      const unsubscribe = rt().onTransition((n) => {
        if (n.actorId === actorId) consider(n.toState, n.context);
      });
      const check = (settle: boolean) => {
        if (done) return;
        const current = rt().stateOf(actorId);
        if (!current) {
          finish(() => reject(new VerificationStepError('verifier_missing', `no verifier ${actorId}`)));
          return;
        }
        if (!FINAL_STATES.has(current.state) && !rt().has(actorId)) {
          // Another caller's create may be between its transaction and `start()`: look once more later.
          if (settle) {
            void store.sync().then(() => setImmediate(() => check(false)), (err: unknown) => finish(() => reject(err)));
            return;
          }
          finish(() => reject(new VerificationStepError('verifier_not_restored', `${actorId} is stored but not running: call runtime.restoreAll() first`)));
          return;
        }
        consider(current.state, current.context);
      };
      check(true);
    });
  }

  async function runRetry(actorId: string, ctx: ReplyVerifierContext, runReplyRetryTurn: () => Promise<{ ok: boolean }>): Promise<void> {
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
    const event = ok ? { type: 'RETRY_TURN_DONE' as const } : { type: 'RETRY_TURN_FAILED' as const, errorCode: errorCode ?? 'retry_turn_failed' };
    const sent = await rt().send(actorId, event, { by: 'system' });
    if (!sent.ok && !FINAL_STATES.has(sent.state ?? '')) {
      throw new VerificationStepError('verifier_rejected_event', `${actorId} rejected ${event.type} in ${String(sent.state)}`);
    }
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

  /** After a restart the executor may hand over the reply_retry turn: the verifier belongs to the original one. */
  function verifiedTurnOf(turn: TurnRecord): TurnRecord {
    if (turn.kind !== 'reply_retry') return turn;
    const normals = store.byIndex<TurnRecord>('turns', 'taskId', turn.taskId).filter((t) => t.kind === 'normal' && t.startedAt <= turn.startedAt);
    return normals.at(-1) ?? turn;
  }

  return {
    kind,
    replyRetryPrompt,
    verify({ task, turn: given, runReplyRetryTurn }) {
      const turn = verifiedTurnOf(given);
      return follow(turn.turnKey, async () => {
        const actorId = verifierActorId(turn.turnKey);
        if (!rt().stateOf(actorId)) {
          const input: ReplyVerifierInput = {
            taskId: task.taskId,
            turnKey: turn.turnKey,
            resourceKey: task.resourceKey,
            marker: turn.marker,
            botLogin,
            turnStartedAt: Date.parse(turn.startedAt),
            mcpFailureReason: turn.commentCall?.error ?? task.mcpFailureReason ?? null,
          };
          try {
            await rt().create(VERIFIER_KIND, actorId, input, { taskId: task.taskId, by: 'system' });
          } catch (error) {
            // Another caller created it first: follow that one.
            if (!rt().stateOf(actorId)) throw error;
          }
          log('verifier started', { actorId, taskId: task.taskId });
        }
        return attach(actorId, runReplyRetryTurn);
      });
    },
    resume(turnKey, runReplyRetryTurn) {
      return follow(turnKey, () => attach(verifierActorId(turnKey), runReplyRetryTurn));
    },
  };
}
