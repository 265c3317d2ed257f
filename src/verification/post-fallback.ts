/**
 * The verifier's only write (spec §5.4): check-then-act by marker. It queries first and adopts a
 * comment that is already there (a retry turn that posted late, or our own POST before a restart),
 * and only when Gitea answered "absent" POSTs the turn's final message with the full marker. Intent
 * and result audit events surround the POST; the `<turnKey>:reply` comments row follows it.
 */
import type { PostFallbackInput, PostFallbackOutput, QueryReplyInput } from '../../machines/reply-verifier.js';
import { isTerminalTaskState, taskStateHas } from '../../machines/task-lifecycle.js';
import type { CommentRecord, TaskRecord, TurnRecord } from '../domain/records.js';
import { isGiteaError, type GiteaClient } from '../gitea/gitea-client.js';
import { bodyHashOf } from '../receipts/receipt-record.js';
import type { LeaseFence } from '../leases/lease-fence.js';
import type { AuditEventInput, Store, Tx } from '../store/types.js';
import type { ReplyMatch } from './find-reply.js';
import { replyBodyWithMarker } from './reply-body.js';
import { messageOf, VerificationStepError, verificationErrorCodeOf } from './verification-errors.js';
import { replyCommentKey, verifierActorId } from './verifier-keys.js';

export interface PostFallbackDeps {
  store: Store;
  gitea: Pick<GiteaClient, 'createIssueComment'>;
  botLogin: string;
  /** The verifier's read (reply-lookup.ts), audited under `step`. */
  lookUp: (task: TaskRecord, input: QueryReplyInput, step: string) => Promise<ReplyMatch>;
  /** When the verified turn started (epoch ms): the fallback check looks from there. */
  turnStartOf: (turnKey: string) => Promise<number>;
  /**
   * The lease of the worker that follows this verifier, checked in each write here (the intent first, so
   * a worker that lost its lease makes no POST). Absent only for a verifier restored at a one-node start
   * before any worker follows it: no lease exists then and no other node can run the task.
   */
  fence?: LeaseFence;
}

/** The `<turnKey>:reply` row while the fallback POST is in flight. */
export function fallbackIntentRecord(
  input: Pick<PostFallbackInput, 'turnKey' | 'taskId' | 'resourceKey' | 'marker'>,
  turn: Pick<TurnRecord, 'turnId'>,
  bodyHash: string,
  current: Pick<CommentRecord, 'createdAt'> | undefined,
  at: string,
): CommentRecord {
  return {
    commentKey: replyCommentKey(input.turnKey),
    taskId: input.taskId,
    kind: 'rest_fallback',
    resourceKey: input.resourceKey,
    turnId: turn.turnId,
    commentId: null,
    marker: input.marker,
    bodyHash,
    status: 'pending',
    errorCode: null,
    createdAt: current?.createdAt ?? at,
    updatedAt: at,
  };
}

/** The `reply.fallback_result` alert of a POST that failed: code, HTTP status, whether Gitea answered. */
export function fallbackFailedAudit(input: Pick<PostFallbackInput, 'turnKey' | 'taskId'>, error: unknown): AuditEventInput {
  return {
    level: 'alert',
    action: 'reply.fallback_result',
    actor: 'system',
    actorId: verifierActorId(input.turnKey),
    taskId: input.taskId,
    errorCode: verificationErrorCodeOf(error),
    metadata: {
      turnKey: input.turnKey,
      ok: false,
      status: isGiteaError(error) ? error.status ?? null : null,
      answered: isGiteaError(error) ? error.answered : false,
      message: messageOf(error),
    },
  };
}

async function taskOf(store: Store, taskId: string): Promise<TaskRecord> {
  const task = await store.get<TaskRecord>('tasks', taskId);
  if (!task) throw new VerificationStepError('task_missing', `task ${taskId} not found`);
  return task;
}

export async function postFallbackReply(deps: PostFallbackDeps, input: PostFallbackInput): Promise<PostFallbackOutput> {
  const { store } = deps;
  /** Every write of the fallback for the task, fenced by its worker's lease. */
  const write = <T>(fn: (tx: Tx) => Promise<T>): Promise<T> =>
    store.transact(async (tx) => {
      await deps.fence?.(tx);
      return fn(tx);
    });
  const actorId = verifierActorId(input.turnKey);
  const key = replyCommentKey(input.turnKey);
  const task = await taskOf(store, input.taskId);
  // A task stopped (or stopping) while the verifier waited must not get an answer posted on its behalf.
  if (isTerminalTaskState(task.state) || taskStateHas(task.state, 'stopping')) throw new VerificationStepError('task_stopped', `task is ${task.state}`);

  // Check, then act: a comment that is already there (ours before a restart, or a late retry turn) is adopted.
  const existing = await deps.lookUp(task, { ...input, botLogin: deps.botLogin, since: await deps.turnStartOf(input.turnKey) }, 'fallback_check');
  if (existing.first) {
    const commentId = existing.first.id;
    await write(async (tx) => {
      const cur = await tx.get<CommentRecord>('comments', key);
      if (cur) await tx.put<CommentRecord>('comments', key, { ...cur, status: cur.status === 'confirmed' ? 'confirmed' : 'sent', commentId, updatedAt: new Date().toISOString() });
      await tx.appendAudit({ action: 'reply.fallback_adopted', actor: 'system', actorId, taskId: input.taskId, commentId, metadata: { turnKey: input.turnKey } });
    });
    return { posted: true, commentId };
  }

  const turn = await store.get<TurnRecord>('turns', input.turnKey);
  // A turn that asked the user something: its question is what must land, not the final message
  // (which ends with the waiting line meant for the service).
  const text = typeof turn?.question === 'string' && turn.question.trim() !== '' ? turn.question : turn?.finalMessage;
  if (!turn || !text?.trim()) {
    await write((tx) =>
      tx.appendAudit({
        level: 'alert',
        action: 'reply.fallback_result',
        actor: 'system',
        actorId,
        taskId: input.taskId,
        errorCode: 'final_message_missing',
        metadata: { turnKey: input.turnKey, ok: false },
      }),
    );
    throw new VerificationStepError('final_message_missing', 'the turn has no final message to post');
  }
  const body = replyBodyWithMarker(text, input.marker);
  const bodyHash = bodyHashOf(body);
  await write(async (tx) => {
    await tx.put<CommentRecord>('comments', key, fallbackIntentRecord(input, turn, bodyHash, await tx.get<CommentRecord>('comments', key), new Date().toISOString()));
    await tx.appendAudit({
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
    commentId = (await deps.gitea.createIssueComment(task.owner, task.repo, task.resource.number, body)).id;
  } catch (error) {
    await write(async (tx) => {
      const cur = await tx.get<CommentRecord>('comments', key);
      if (cur) await tx.put<CommentRecord>('comments', key, { ...cur, status: 'failed', errorCode: verificationErrorCodeOf(error), updatedAt: new Date().toISOString() });
      await tx.appendAudit(fallbackFailedAudit(input, error));
    });
    throw error;
  }
  await write(async (tx) => {
    const cur = await tx.get<CommentRecord>('comments', key);
    if (cur) await tx.put<CommentRecord>('comments', key, { ...cur, status: 'sent', commentId, updatedAt: new Date().toISOString() });
    await tx.appendAudit({ action: 'reply.fallback_result', actor: 'system', actorId, taskId: input.taskId, commentId, metadata: { turnKey: input.turnKey, ok: true } });
  });
  return { posted: true, commentId };
}
