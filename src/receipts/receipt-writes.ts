/**
 * The receipt outbox's durable steps, each one store transaction on one `comments` row with its
 * audit event: the intent before a POST, the result after it, adoption of a comment an earlier
 * attempt posted, and giving up. The audit events built here are pure functions of their inputs.
 */
import type { CommentRecord } from '../domain/records.js';
import { isGiteaError } from '../gitea/gitea-client.js';
import type { AuditEventInput, Store } from '../store/types.js';
import { sendClaimWaitMs } from './receipt-decisions.js';
import { errorMessageOf, receiptErrorCodeOf, type ReceiptStep } from './receipt-retry.js';

/** The audit event of a failed lookup or POST; a POST's also says the HTTP status and whether Gitea answered. */
export function failedStepAudit(rec: Pick<CommentRecord, 'commentKey' | 'taskId'>, step: ReceiptStep, error: unknown): AuditEventInput {
  const gitea = isGiteaError(error);
  return {
    action: step === 'send' ? 'receipt.send_result' : 'receipt.lookup_result',
    actor: 'system',
    taskId: rec.taskId,
    errorCode: receiptErrorCodeOf(error),
    metadata: {
      commentKey: rec.commentKey,
      ok: false,
      ...(step === 'send' ? { status: gitea ? error.status ?? null : null, answered: gitea ? error.answered : false } : {}),
      message: errorMessageOf(error),
    },
  };
}

export async function auditFailedStep(store: Store, rec: Pick<CommentRecord, 'commentKey' | 'taskId'>, step: ReceiptStep, error: unknown): Promise<void> {
  await store.transact((tx) => tx.appendAudit(failedStepAudit(rec, step, error)));
}

/** Gives the row up with an alert; no-op unless it is still pending. */
export async function markReceiptFailed(store: Store, rec: CommentRecord, errorCode: string, metadata: Record<string, unknown>, at: Date): Promise<void> {
  await store.transact(async (tx) => {
    const cur = await tx.get<CommentRecord>('comments', rec.commentKey);
    if (!cur || cur.status !== 'pending') return;
    await tx.put<CommentRecord>('comments', rec.commentKey, { ...cur, status: 'failed', errorCode, updatedAt: at.toISOString() });
    await tx.appendAudit({
      level: 'alert',
      action: 'receipt.failed',
      actor: 'system',
      taskId: rec.taskId,
      errorCode,
      metadata: { commentKey: rec.commentKey, ...metadata },
    });
  });
}

/** The row's comment exists on Gitea (`action`: `receipt.send_result` after our POST, `receipt.adopted` when found). */
export async function markReceiptSent(store: Store, rec: CommentRecord, commentId: number, action: string, bodyHash: string | null, at: Date): Promise<void> {
  await store.transact(async (tx) => {
    const cur = await tx.get<CommentRecord>('comments', rec.commentKey);
    if (!cur) return;
    await tx.put<CommentRecord>('comments', rec.commentKey, {
      ...cur,
      status: 'sent',
      commentId,
      errorCode: null,
      bodyHash: bodyHash ?? cur.bodyHash,
      updatedAt: at.toISOString(),
    });
    await tx.appendAudit({
      action,
      actor: 'system',
      taskId: rec.taskId,
      commentId,
      metadata: { commentKey: rec.commentKey, ok: true },
    });
  });
}

/**
 * Durable before the POST: the body's hash, who sends, and a `receipt.send_intent` event. `not_pending`
 * when the row is sent or given up; `{ waitMs }` while another node's intent may have landed after
 * `lookedAt`, when this process last looked for it on Gitea (sendClaimWaitMs): nothing is written then.
 */
export async function recordSendIntent(
  store: Store,
  rec: CommentRecord,
  intent: { attempt: number; bodyHash: string; by: string; claimMs: number; lookedAt: Date },
  at: Date,
): Promise<'proceed' | 'not_pending' | { waitMs: number }> {
  const key = rec.commentKey;
  // Not lease-fenced: receipts are the outbox's (any node), not a worker's; the received one is queued before any lease, a failure one after it ended, and `sending` and the marker keep each to one comment.
  return store.transact(async (tx) => {
    const cur = await tx.get<CommentRecord>('comments', key);
    if (!cur || cur.status !== 'pending') return 'not_pending';
    const waitMs = sendClaimWaitMs(cur.sending, intent.by, intent.lookedAt.getTime(), intent.claimMs);
    if (waitMs > 0) return { waitMs };
    await tx.put<CommentRecord>('comments', key, { ...cur, bodyHash: intent.bodyHash, sending: { by: intent.by, at: at.toISOString() }, updatedAt: at.toISOString() });
    await tx.appendAudit({
      action: 'receipt.send_intent',
      actor: 'system',
      taskId: rec.taskId,
      metadata: { commentKey: key, attempt: intent.attempt, bodyHash: intent.bodyHash, resourceKey: rec.resourceKey },
    });
    return 'proceed';
  });
}
