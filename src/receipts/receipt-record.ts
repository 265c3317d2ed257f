import { createHash } from 'node:crypto';
import type { CommentRecord } from '../domain/records.js';
import { formatReceiptMarker } from '../domain/marker.js';

/** `commentKey` of a status receipt: `<taskId>:status:<state>` (§4.5, §6.4). */
export function receiptCommentKey(taskId: string, state: string): string {
  return `${taskId}:status:${state}`;
}

export function bodyHashOf(body: string): string {
  return `sha256:${createHash('sha256').update(body, 'utf8').digest('hex')}`;
}

/**
 * The pending `comments` row that asks the outbox for one receipt. Intake inserts the `received` one
 * in the transaction that queues the task; the outbox inserts failure ones itself.
 */
export function pendingReceiptRecord(
  task: { taskId: string; resourceKey: string },
  state: string,
  now: Date = new Date(),
): CommentRecord {
  const commentKey = receiptCommentKey(task.taskId, state);
  const at = now.toISOString();
  return {
    commentKey,
    taskId: task.taskId,
    kind: 'status',
    resourceKey: task.resourceKey,
    turnId: null,
    commentId: null,
    marker: formatReceiptMarker(commentKey),
    bodyHash: '',
    status: 'pending',
    errorCode: null,
    createdAt: at,
    updatedAt: at,
  };
}
