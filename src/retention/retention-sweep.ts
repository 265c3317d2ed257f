// Retention (spec §4.1 `expiresAt`): what the store forgets, and when.
//
// - `webhook_deliveries`: each answers repeats of its delivery id until its `expiresAt`
//   (receivedAt + CCWEB_DELIVERY_RETENTION_DAYS). Gitea never redelivers by itself; the window only
//   has to outlast an operator pressing Replay.
// - `comment_triggers`: the dedup memory of a comment (Replay sends a new delivery id with the same
//   body). One expires after the same window, but only once the task it made is gone too: while the
//   task is stored, a late repeat must be answered `duplicate`, not turned into a second task whose
//   insert would collide with the first one.
// - Finished tasks (with their turns, comment records and final actor records) are kept forever
//   unless CCWEB_TASK_RETENTION_DAYS is set. The audit log is never touched: it is append-only.
// - Tasks of rejected or refused mentions (`rejected`, excerpt only: src/tasks/task-texts.ts) are
//   deleted like finished tasks, but after the security-event retention counted from their
//   creation: anyone who can comment can make them, so they must not be kept forever.
// - `security_events` (failed authentications, aggregated per source and window) expire after
//   CCWEB_SECURITY_EVENT_RETENTION_DAYS (default 30): each record carries its `expiresAt`.
// - Before any of that, finished tasks older than CCWEB_ARCHIVE_AFTER_MINUTES are archived
//   (task-archiver.ts): out of the lists, still readable by key. Expiry applies to archived
//   records too; they are found by scanning the archived rows.
//
// The sweep runs off the hot path: candidates are picked with one pass over a collection's hot
// records and one over its archived ones, yielding to the loop every 500 records, then deleted in
// small transactions with a macrotask yield between them, so intake and the scheduler interleave
// with it. Every deletion is re-checked inside its transaction, which also reads (by key and by
// index) the records going with it: what was written after the candidates were picked is seen.
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { isTerminalTaskState, taskStateHas } from '../../machines/task-lifecycle.js';
import type { CommentTriggerRecord, DeliveryRecord, TaskRecord } from '../domain/records.js';
import type { ActorRecord } from '../runtime/actor-runtime.js';
import type { CollectionName, Store, RecordType, Tx } from '../store/types.js';
import { SECURITY_EVENTS, type SecurityEventRecord } from '../intake/security-events.js';
import { EVERY_REPOSITORY, type RepositoryScope } from '../domain/repository-scope.js';
import { archiveFinishedTasks, type ArchivedRecordKeys } from './task-archiver.js';

export const DAY_MS = 24 * 60 * 60 * 1000;

export interface RetentionPolicy {
  /** Window for delivery and comment-trigger records. */
  deliveryRetentionMs: number;
  /** Window for finished tasks after their last update; null keeps them forever. */
  taskRetentionMs: number | null;
  /** Finished tasks older than this are archived; null keeps them all in the lists. */
  archiveAfterMs?: number | null;
  /**
   * Window for the tasks of rejected and refused mentions (`instructionExcerptOnly`) after their
   * creation, whatever `taskRetentionMs` says (the shorter wins). Unset or null: as other tasks.
   */
  excerptOnlyTaskRetentionMs?: number | null;
}

export interface SweepResult {
  archived: number;
  deliveries: number;
  triggers: number;
  tasks: number;
  /** Expired security event records deleted. */
  securityEvents?: number;
  /** Transactions written. */
  batches: number;
}

export interface SweepOptions {
  now?: () => number;
  /** Records deleted per transaction. Default 200. */
  batchSize?: number;
}

/** Keys of hot records matching `pick`, then of archived ones (scanned in chunks, yielding between). */
async function candidates<T extends RecordType>(store: Store, collection: CollectionName, pick: (r: T) => boolean | Promise<boolean>, key: (r: T) => string): Promise<string[]> {
  const keys: string[] = [];
  let n = 0;
  const consider = async (record: T) => {
    if (await pick(record)) keys.push(key(record));
    if (++n % 500 === 0) await yieldToLoop();
  };
  for (const record of await store.list<T>(collection)) await consider(record);
  for await (const record of store.scanArchived<T>(collection)) await consider(record);
  return keys;
}

/** Removes in transactions of `batchSize` keys; `remove` decides on each inside its transaction. */
async function inBatches(store: Store, keys: string[], batchSize: number, remove: (tx: Tx, key: string) => Promise<boolean>): Promise<{ removed: number; batches: number }> {
  let removed = 0;
  let batches = 0;
  for (let i = 0; i < keys.length; i += batchSize) {
    const slice = keys.slice(i, i + batchSize);
    removed += await store.transact(async (tx) => {
      let n = 0;
      for (const key of slice) if (await remove(tx, key)) n += 1;
      return n;
    });
    batches += 1;
    await yieldToLoop();
  }
  return { removed, batches };
}

/** One pass: deletes what the policy says has expired at `now`. Safe to run while the service works. */
export async function sweepRetention(store: Store, policy: RetentionPolicy, options: SweepOptions = {}): Promise<SweepResult> {
  const now = (options.now ?? Date.now)();
  const batchSize = options.batchSize ?? 200;
  const result: SweepResult = { archived: 0, deliveries: 0, triggers: 0, tasks: 0, batches: 0 };
  const add = (r: { removed: number; batches: number }, field: 'deliveries' | 'triggers' | 'tasks') => {
    result[field] += r.removed;
    result.batches += r.batches;
  };

  if (policy.archiveAfterMs !== undefined && policy.archiveAfterMs !== null) {
    const archived = await archiveFinishedTasks(store, { archiveAfterMs: policy.archiveAfterMs, now: () => now });
    result.archived = archived.tasks;
    result.batches += archived.batches;
  }

  const deliveryExpired = (d: DeliveryRecord | undefined) => d !== undefined && Date.parse(d.expiresAt) <= now;
  const deliveries = await candidates<DeliveryRecord>(store, 'webhook_deliveries', deliveryExpired, (d) => d.deliveryKey);
  add(
    await inBatches(store, deliveries, batchSize, async (tx, key) => {
      if (!deliveryExpired(await tx.get<DeliveryRecord>('webhook_deliveries', key))) return false;
      await tx.delete('webhook_deliveries', key);
      return true;
    }),
    'deliveries',
  );

  const taskCutoff = policy.taskRetentionMs === null ? null : now - policy.taskRetentionMs;
  const excerptCutoff = policy.excerptOnlyTaskRetentionMs === undefined || policy.excerptOnlyTaskRetentionMs === null ? null : now - policy.excerptOnlyTaskRetentionMs;
  if (taskCutoff !== null || excerptCutoff !== null) {
    const taskExpired = (t: TaskRecord | undefined) =>
      t !== undefined &&
      isTerminalTaskState(t.state) &&
      ((taskCutoff !== null && Date.parse(t.updatedAt) <= taskCutoff) ||
        (excerptCutoff !== null && taskStateHas(t.state, 'refused') && t.instructionExcerptOnly === true && Date.parse(t.createdAt) <= excerptCutoff));
    const tasks = await candidates<TaskRecord>(store, 'tasks', taskExpired, (t) => t.taskId);
    add(
      await inBatches(store, tasks, Math.max(1, Math.floor(batchSize / 10)), async (tx, taskId) => {
        const task = await tx.get<TaskRecord>('tasks', taskId);
        if (!taskExpired(task)) return false;
        // The task's records by the `taskId` index, read before this task's deletes.
        const turns = await tx.byIndex<{ turnKey: string }>('turns', 'taskId', taskId);
        const comments = await tx.byIndex<{ commentKey: string }>('comments', 'taskId', taskId);
        const actors = await tx.byIndex<ActorRecord>('actors', 'taskId', taskId);
        for (const t of turns) await tx.delete('turns', t.turnKey);
        for (const c of comments) await tx.delete('comments', c.commentKey);
        // Whether an actor still runs is read as of this transaction (an active one stays).
        for (const a of actors) if (a.status !== 'active') await tx.delete('actors', a.actorId);
        // An archived task's records left the indexes; the task lists their keys.
        const archived: Partial<ArchivedRecordKeys> = task?.archive?.records ?? {};
        for (const collection of ['turns', 'comments', 'actors'] as const) {
          for (const key of archived[collection] ?? []) await tx.delete(collection, key);
        }
        await tx.delete('tasks', taskId);
        return true;
      }),
      'tasks',
    );
  }

  const triggerCutoff = now - policy.deliveryRetentionMs;
  const triggerExpired = async (t: CommentTriggerRecord | undefined, reader: Pick<Tx, 'get'>) =>
    t !== undefined &&
    Date.parse(t.createdAt) <= triggerCutoff &&
    (t.taskId === null || (await reader.get('tasks', t.taskId)) === undefined);
  const triggers = await candidates<CommentTriggerRecord>(store, 'comment_triggers', (t) => triggerExpired(t, store), (t) => t.triggerKey);
  add(
    await inBatches(store, triggers, batchSize, async (tx, key) => {
      if (!(await triggerExpired(await tx.get<CommentTriggerRecord>('comment_triggers', key), tx))) return false;
      await tx.delete('comment_triggers', key);
      return true;
    }),
    'triggers',
  );

  // Aggregated security events (src/intake/security-events.ts) carry their own expiry.
  const securityExpired = (r: SecurityEventRecord | undefined) => r !== undefined && Date.parse(r.expiresAt) <= now;
  const security = await candidates<SecurityEventRecord>(store, SECURITY_EVENTS, securityExpired, (r) => r.key);
  const removedSecurity = await inBatches(store, security, batchSize, async (tx, key) => {
    if (!securityExpired(await tx.get<SecurityEventRecord>(SECURITY_EVENTS, key))) return false;
    await tx.delete(SECURITY_EVENTS, key);
    return true;
  });
  result.securityEvents = removedSecurity.removed;
  result.batches += removedSecurity.batches;
  return result;
}

export interface RetentionLogger {
  info(obj: Record<string, unknown>, msg?: string): void;
  warn(obj: Record<string, unknown>, msg?: string): void;
}

export interface RetentionWorkerOptions extends SweepOptions {
  store: Store;
  policy: RetentionPolicy;
  /** Time between sweeps. Default one hour; the first runs one minute after start. */
  intervalMs?: number;
  firstDelayMs?: number;
  logger?: RetentionLogger;
  /**
   * Retention is a chore of the whole cluster: a periodic sweep runs only while this node
   * leads, asked at each sweep (leadership moves); otherwise it waits for the next interval.
   * Default: this node leads (one node).
   */
  scope?: Pick<RepositoryScope, 'owns' | 'leads'>;
}

export interface RetentionWorker {
  /** Runs one sweep now (waits for a running one first), whether or not this node leads. */
  sweepNow(): Promise<SweepResult>;
  stop(): Promise<void>;
}

export function startRetention(options: RetentionWorkerOptions): RetentionWorker {
  const intervalMs = options.intervalMs ?? 60 * 60 * 1000;
  const scope = options.scope ?? EVERY_REPOSITORY;
  let running: Promise<SweepResult> | null = null;
  let stopped = false;
  let timer: NodeJS.Timeout | null = null;

  const sweepNow = async (): Promise<SweepResult> => {
    while (running) await running.catch(() => undefined);
    running = sweepRetention(options.store, options.policy, options).finally(() => {
      running = null;
    });
    return running;
  };
  const arm = (delay: number) => {
    if (stopped) return;
    timer = setTimeout(() => {
      if (!scope.leads()) {
        arm(intervalMs);
        return;
      }
      sweepNow()
        .then((r) => {
          if (r.archived + r.deliveries + r.triggers + r.tasks > 0) options.logger?.info({ ...r }, 'retention sweep');
        })
        .catch((err: unknown) => options.logger?.warn({ err: err instanceof Error ? err.message : String(err) }, 'retention sweep failed'))
        .finally(() => arm(intervalMs));
    }, delay);
    timer.unref();
  };
  arm(options.firstDelayMs ?? 60_000);

  return {
    sweepNow,
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      await running?.catch(() => undefined);
    },
  };
}
