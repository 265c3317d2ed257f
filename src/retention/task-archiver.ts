// Archiving finished tasks: a task that is terminal, settled (no receipt still to post, no actor
// still running) and older than CCWEB_ARCHIVE_AFTER_MINUTES moves, with every record that only
// explains it, out of the store's lists and counts (`tx.archive`, a flag on the row). Nothing is lost or changed:
// each record stays readable by key (the task detail page, dedup of a repeated delivery, the
// session a later comment resumes); it only leaves `list`/`byIndex`, which the hot path uses to
// find live work. The task record gets `archive.records`, the keys archived with it, so the detail
// page and retention can still reach its turns, comments and actors without an index.
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { isLeaseHeld } from '../../machines/repo-lock.js';
import { isTerminalTaskState, TERMINAL_TASK_STATES } from '../../machines/task-lifecycle.js';
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

/** What archiving a task reads through the indexes, as of the archiving transaction. */
interface TaskIndexes {
  comments: CommentRecord[];
  actors: ActorRecord[];
  /** The keys of the task's records in each collection archived with it (the `taskId` index). */
  keys: ArchivedRecordKeys;
  /** Held leases naming the task. */
  heldLeases: LeaseRecord[];
  /** The hot tasks of its resource: an archived task is not among them. */
  resourceTasks: TaskRecord[];
}

/**
 * Read inside the archiving transaction, so the decision stands on what it commits against: a
 * comment, task or lease committed after the candidates were picked is seen. Read before this task's
 * writes (whether index reads see a transaction's own writes is up to the engine); an earlier task of
 * the batch archived on the same resource is terminal whether or not `resourceTasks` still lists it.
 */
async function readTaskIndexes(tx: Tx, task: TaskRecord): Promise<TaskIndexes> {
  const keys = async (collection: keyof ArchivedRecordKeys) =>
    (await tx.byIndex(collection, 'taskId', task.taskId)).map((r) => String(r[ARCHIVED_WITH_TASK[collection]]));
  const comments = await tx.byIndex<CommentRecord>('comments', 'taskId', task.taskId);
  const actors = await tx.byIndex<ActorRecord>('actors', 'taskId', task.taskId);
  return {
    comments,
    actors,
    keys: {
      turns: await keys('turns'),
      comments: comments.map((c) => c.commentKey),
      actors: actors.map((a) => a.actorId),
      webhook_deliveries: await keys('webhook_deliveries'),
      comment_triggers: await keys('comment_triggers'),
    },
    heldLeases: await tx.list<LeaseRecord>('leases', (l) => isLeaseHeld(l) && l.taskId === task.taskId),
    resourceTasks: await tx.byIndex<TaskRecord>('tasks', 'resourceKey', task.resourceKey),
  };
}

/** Why a task may not be archived yet, or null when it may. */
function notArchivable(seen: TaskIndexes, task: TaskRecord, cutoff: number): string | null {
  if (!isTerminalTaskState(task.state)) return 'not_terminal';
  if (Date.parse(task.updatedAt) > cutoff) return 'too_recent';
  const comments = seen.comments;
  if (comments.some((c) => c.status === 'pending')) return 'receipt_pending';
  // The outbox creates a failure receipt from the task lists (also at start-up): not yet made means not settled.
  const failureReceipt = receiptCommentKey(task.taskId, task.state);
  if ((FAILURE_RECEIPT_STATES as readonly string[]).includes(task.state) && !comments.some((c) => c.commentKey === failureReceipt)) return 'receipt_missing';
  if (seen.actors.some((a) => a.status === 'active')) return 'actor_active';
  if (seen.heldLeases.length > 0) return 'lease_held';
  // Archived already (another node's sweep: the candidates were picked before it was
  // applied): archiving again would list none of its records, which left the indexes with it.
  if (!seen.resourceTasks.some((t) => t.taskId === task.taskId)) return 'archived';
  return null;
}

/** The records that belong to this task alone (its session is shared by the resource's tasks). */
async function recordsOf(tx: Tx, seen: TaskIndexes, task: TaskRecord): Promise<ArchivedRecordKeys> {
  const deliveries = new Set(seen.keys.webhook_deliveries);
  if (await tx.has('webhook_deliveries', task.deliveryKey)) deliveries.add(task.deliveryKey);
  return { ...seen.keys, webhook_deliveries: [...deliveries] };
}

/** Archives one task inside `tx`; returns false when it is not (or no longer) archivable. */
export async function archiveTask(tx: Tx, taskId: string, cutoff: number, at: string): Promise<boolean> {
  const task = await tx.get<TaskRecord>('tasks', taskId);
  if (!task) return false;
  const seen = await readTaskIndexes(tx, task);
  if (notArchivable(seen, task, cutoff) !== null) return false;
  const records = await recordsOf(tx, seen, task);
  const session = await tx.get<SessionRecord>('sessions', task.sessionKey);
  for (const [collection, list] of Object.entries(records) as Array<[keyof ArchivedRecordKeys, string[]]>) {
    for (const key of list) await tx.archive(collection, key);
  }
  await tx.put<TaskRecord>('tasks', taskId, { ...task, archive: { at, records } });
  await tx.archive('tasks', taskId);
  // The session goes too once no live task of its resource is left; a later comment reads it back.
  const live = seen.resourceTasks.some((t) => t.taskId !== taskId && !isTerminalTaskState(t.state));
  if (session && !live) await tx.archive('sessions', task.sessionKey);
  return true;
}

/** One pass: archives every finished, settled task last updated before now − archiveAfterMs. */
export async function archiveFinishedTasks(store: Store, options: ArchiveOptions): Promise<{ tasks: number; batches: number }> {
  const now = (options.now ?? Date.now)();
  const cutoff = now - options.archiveAfterMs;
  const at = new Date(now).toISOString();
  const batchSize = options.batchSize ?? 20;
  const finished: TaskRecord[] = [];
  for (const state of TERMINAL_TASK_STATES) finished.push(...(await store.byIndex<TaskRecord>('tasks', 'state', state)));
  const candidates = finished
    .filter((t) => Date.parse(t.updatedAt) <= cutoff)
    .sort((a, b) => a.queueSeq - b.queueSeq)
    .map((t) => t.taskId);
  let tasks = 0;
  let batches = 0;
  for (let i = 0; i < candidates.length; i += batchSize) {
    const slice = candidates.slice(i, i + batchSize);
    tasks += await store.transact(async (tx) => {
      let archived = 0;
      for (const taskId of slice) if (await archiveTask(tx, taskId, cutoff, at)) archived += 1;
      return archived;
    });
    batches += 1;
    await yieldToLoop();
  }
  return { tasks, batches };
}
