// Archiving finished tasks: a task that is terminal, settled (no receipt still to post, no actor
// still running) and older than CCWEB_ARCHIVE_AFTER_MINUTES moves, with every record that only
// explains it, from memory to the store's cold tier (`tx.archive`). Nothing is lost or changed:
// each record stays readable by key (the task detail page, dedup of a repeated delivery, the
// session a later comment resumes); it only leaves `list`/`byIndex`, which the hot path uses to
// find live work. The task record gets `archive.records`, the keys archived with it, so the detail
// page and retention can still reach its turns, comments and actors without an index.
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { isTerminalTaskState } from '../../machines/task-lifecycle.js';
import type { ArchivedRecordKeys, TaskArchiveInfo } from '../domain/record-fields.js';
import type { CommentRecord, LeaseRecord, SessionRecord, TaskRecord } from '../domain/records.js';
import { receiptCommentKey } from '../receipts/receipt-record.js';
import { FAILURE_RECEIPT_STATES } from '../receipts/receipt-text.js';
import type { ActorRecord } from '../runtime/actor-runtime.js';
import type { CollectionName, Store, Tx } from '../store/types.js';

/** Collections archived along with a task, and the key field of each. */
export const ARCHIVED_WITH_TASK = {
  turns: 'turnKey',
  comments: 'commentKey',
  actors: 'actorId',
  webhook_deliveries: 'deliveryKey',
  comment_triggers: 'triggerKey',
} as const satisfies Record<keyof ArchivedRecordKeys, string> & Partial<Record<CollectionName, string>>;

// Declared with the task record (`TaskRecord.archive`): the record's type says what it holds.
export type { ArchivedRecordKeys, TaskArchiveInfo };

export interface ArchiveOptions {
  archiveAfterMs: number;
  now?: () => number;
  /** Tasks per transaction. Default 20. */
  batchSize?: number;
}

/** Why a task may not be archived yet, or null when it may. Read inside the archiving transaction. */
function notArchivable(store: Store, task: TaskRecord | undefined, cutoff: number): string | null {
  if (!task) return 'gone';
  if (!isTerminalTaskState(task.state)) return 'not_terminal';
  if (Date.parse(task.updatedAt) > cutoff) return 'too_recent';
  const comments = store.byIndex<CommentRecord>('comments', 'taskId', task.taskId);
  if (comments.some((c) => c.status === 'pending')) return 'receipt_pending';
  // The outbox creates a failure receipt from the task lists (also at start-up): not yet made means not settled.
  const failureReceipt = receiptCommentKey(task.taskId, task.state);
  if ((FAILURE_RECEIPT_STATES as readonly string[]).includes(task.state) && !comments.some((c) => c.commentKey === failureReceipt)) return 'receipt_missing';
  if (store.byIndex<ActorRecord>('actors', 'taskId', task.taskId).some((a) => a.status === 'active')) return 'actor_active';
  if (store.list<LeaseRecord>('leases', (l) => l.state === 'held' && l.taskId === task.taskId).length > 0) return 'lease_held';
  return null;
}

/** The records that belong to this task alone (its session is shared by the resource's tasks). */
function recordsOf(store: Store, task: TaskRecord): ArchivedRecordKeys {
  const keys = (collection: keyof ArchivedRecordKeys) =>
    store.byIndex(collection, 'taskId', task.taskId).map((r) => String(r[ARCHIVED_WITH_TASK[collection]]));
  const deliveries = new Set(keys('webhook_deliveries'));
  if (store.get('webhook_deliveries', task.deliveryKey)) deliveries.add(task.deliveryKey);
  return {
    turns: keys('turns'),
    comments: keys('comments'),
    actors: keys('actors'),
    webhook_deliveries: [...deliveries],
    comment_triggers: keys('comment_triggers'),
  };
}

/** Archives one task inside `tx`; returns false when it is not (or no longer) archivable. */
export function archiveTask(tx: Tx, store: Store, taskId: string, cutoff: number, at: string): boolean {
  const task = tx.get<TaskRecord>('tasks', taskId);
  if (!task || notArchivable(store, task, cutoff) !== null) return false;
  // Archived already (another node's sweep: the candidates were picked before it was
  // applied): archiving again would list none of its records, which left the indexes with it.
  if (!store.byIndex<TaskRecord>('tasks', 'resourceKey', task.resourceKey).some((t) => t.taskId === taskId)) return false;
  const records = recordsOf(store, task);
  for (const [collection, list] of Object.entries(records) as Array<[keyof ArchivedRecordKeys, string[]]>) {
    for (const key of list) tx.archive(collection, key);
  }
  tx.put<TaskRecord>('tasks', taskId, { ...task, archive: { at, records } });
  tx.archive('tasks', taskId);
  // The session goes too once no live task of its resource is left; a later comment reads it back.
  const session = tx.get<SessionRecord>('sessions', task.sessionKey);
  const live = store.byIndex<TaskRecord>('tasks', 'resourceKey', task.resourceKey).some((t) => t.taskId !== taskId && !isTerminalTaskState(t.state));
  if (session && !live) tx.archive('sessions', task.sessionKey);
  return true;
}

/** One pass: archives every finished, settled task last updated before now − archiveAfterMs. */
export async function archiveFinishedTasks(store: Store, options: ArchiveOptions): Promise<{ tasks: number; batches: number }> {
  const now = (options.now ?? Date.now)();
  const cutoff = now - options.archiveAfterMs;
  const at = new Date(now).toISOString();
  const batchSize = options.batchSize ?? 20;
  const candidates = store.list<TaskRecord>('tasks', (t) => isTerminalTaskState(t.state) && Date.parse(t.updatedAt) <= cutoff).map((t) => t.taskId);
  let tasks = 0;
  let batches = 0;
  for (let i = 0; i < candidates.length; i += batchSize) {
    const slice = candidates.slice(i, i + batchSize);
    tasks += await store.transact((tx) => slice.filter((taskId) => archiveTask(tx, store, taskId, cutoff, at)).length);
    batches += 1;
    await yieldToLoop();
  }
  return { tasks, batches };
}
