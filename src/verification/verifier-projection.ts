/**
 * What the verifier's final transition writes in the same transaction (the runtime's `project`
 * hook): the `<turnKey>:reply` comments row and the `reply.confirmed` / `reply.failed` verdict event.
 * `verdictRecord` and `verdictAudit` decide the content; `projectVerifier` only reads and writes.
 */
import { replyVerdictOf, type ReplyVerifierContext } from '../../machines/reply-verifier.js';
import type { CommentRecord, TurnRecord } from '../domain/records.js';
import type { PersistedChange } from '../runtime/actor-runtime.js';
import type { AuditEventInput, Tx } from '../store/types.js';
import { FINAL_VERIFIER_STATES, replyCommentKey } from './verifier-keys.js';

/** The reply row after the verdict `toState`; `current` is the row as it was (a fallback writes it first). */
export function verdictRecord(
  ctx: ReplyVerifierContext,
  toState: string,
  current: CommentRecord | undefined,
  turn: Pick<TurnRecord, 'turnId'> | undefined,
  at: string,
): CommentRecord {
  const key = replyCommentKey(ctx.turnKey);
  const verdict = replyVerdictOf(toState);
  const failed = verdict === 'failed';
  const viaFallback = verdict === 'confirmed_via_fallback' || (failed && (current?.kind === 'rest_fallback' || ctx.fallbackCommentId !== null));
  return {
    commentKey: key,
    taskId: ctx.taskId,
    kind: viaFallback ? 'rest_fallback' : 'mcp_final',
    resourceKey: ctx.resourceKey,
    turnId: turn?.turnId ?? current?.turnId ?? null,
    commentId: failed ? (current?.commentId ?? ctx.fallbackCommentId) : ctx.commentId,
    marker: ctx.marker,
    bodyHash: current?.bodyHash ?? '',
    status: failed ? 'failed' : 'confirmed',
    errorCode: failed ? ctx.errorCode : null,
    createdAt: current?.createdAt ?? at,
    updatedAt: at,
  };
}

/** The verdict event: an alert when the reply failed. */
export function verdictAudit(ctx: ReplyVerifierContext, toState: string, actorId: string): AuditEventInput {
  const failed = replyVerdictOf(toState) === 'failed';
  return {
    level: failed ? 'alert' : 'info',
    action: failed ? 'reply.failed' : 'reply.confirmed',
    actor: 'system',
    actorId,
    taskId: ctx.taskId,
    commentId: ctx.commentId,
    errorCode: ctx.errorCode,
    metadata: {
      turnKey: ctx.turnKey,
      result: toState,
      mcpFailureReason: ctx.mcpFailureReason,
      ...(ctx.errorMessage ? { message: ctx.errorMessage.slice(0, 200) } : {}),
    },
  };
}

/** Writes the `<turnKey>:reply` row and the verdict event with the verifier's final transition. */
export async function projectVerifier(tx: Tx, change: PersistedChange): Promise<void> {
  if (!FINAL_VERIFIER_STATES.has(change.toState) || change.fromState === change.toState) return;
  const ctx = change.snapshot.context as ReplyVerifierContext;
  const key = replyCommentKey(ctx.turnKey);
  const current = await tx.get<CommentRecord>('comments', key);
  const turn = await tx.get<TurnRecord>('turns', ctx.turnKey);
  await tx.put<CommentRecord>('comments', key, verdictRecord(ctx, change.toState, current, turn, new Date().toISOString()));
  await tx.appendAudit(verdictAudit(ctx, change.toState, change.actorId));
}
