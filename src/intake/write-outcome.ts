// The one transaction that writes a delivery's outcome (spec §5.1). It runs inside `store.transact`
// and repeats the uniqueness checks (delivery id, comment trigger) there; where two nodes race past a
// check (PostgreSQL reads committed rows only), the unique key refuses the second insert and the
// intake runs the transaction again, which then sees the first one's records: of fifty concurrent
// identical posts one accepts, the others answer as duplicates. What to do is decided purely
// (intake-decision.ts); this file reads the facts and writes what was decided.
//
// A rejected or refused mention never runs: its task keeps an excerpt of the text, not the text, and
// a rejected one is counted per author and day (rejected-mentions.ts); past a few a day it gets no
// task at all.
import { taskStateHas, type TaskEvent } from '../../machines/task-lifecycle.js';
import type { CommentRecord, CommentTriggerRecord, DeliveryRecord, RepositoryRecord, TaskRecord } from '../domain/records.js';
import { pendingReceiptRecord, receiptCommentKey } from '../receipts/receipt-record.js';
import type { ActorRuntime } from '../runtime/actor-runtime.js';
import type { AuditEventInput, CollectionName, Store, RecordType, Tx } from '../store/types.js';
import { TASK_KIND, taskActorId } from '../tasks/task-actor.js';
import { followUpWithTextStoredOnce, taskWithExcerptOnly, taskWithTextDropped, taskWithTextStoredOnce } from '../tasks/task-texts.js';
import { inputTooLarge } from '../domain/agent-input.js';
import type { QuotaPort } from '../usage/quota-check.js';
import { taskIdFor, type NormalizedComment } from '../webhook/normalize-comment.js';
import { anyDisabled, rekey } from '../domain/repository-identity.js';
import { resolveRepository } from './canonical-repository.js';
import { decideWrite, type WriteDecision } from './intake-decision.js';
import { deliveryRecord, repositoryRecord, sessionRecord, taskRecord, triggerRecord } from './intake-records.js';
import { countRejectedMention, rejectedMentionKey as rejectedKeyOf } from './rejected-mentions.js';
import { SECURITY_EVENTS } from './security-events.js';
import { REPOSITORY_DISABLED, accepted, duplicate, ignored, rejected, repeatOf, stopped, type IntakeResponse } from './intake-response.js';
import type { Outcome, Plan, Subject } from './intake-types.js';
import { stopTargets } from './stop-tasks.js';

export interface WriteContext {
  runtime: ActorRuntime;
  now: () => Date;
  retentionMs: number;
  /** How long the per-author day counts of rejected mentions are kept after their day (security events'). */
  securityEventRetentionMs: number;
  hostRef: string;
  quota?: QuotaPort | undefined;
  /** Several nodes: this node's id, recorded on the tasks it accepts. */
  nodeId?: string | undefined;
}

export async function writeOutcome(ctx: WriteContext, tx: Tx, subject: Subject, plan: Plan, workspacePath: string): Promise<Outcome> {
  // The repository as stored now: a case variant another delivery registered since the first
  // resolution (canonical-repository.ts) is found here, where nothing can race it.
  // (Not for an ignored comment: nothing it writes depends on the repository.)
  const resolved = subject.comment === null || plan.kind === 'ignored' ? null : await resolveRepository(tx, subject.comment);
  const s = resolved === null || resolved.comment === subject.comment ? subject : resubject(subject, resolved.comment);
  const c = s.comment;
  const at = ctx.now();
  const trigger = (key: string | null | undefined) => (key == null ? undefined : tx.get<CommentTriggerRecord>('comment_triggers', key));
  const decision = await decideWrite(plan, {
    delivery: () => tx.get<DeliveryRecord>('webhook_deliveries', s.deliveryKey),
    trigger: async () => (await trigger(s.triggerKey)) ?? (await trigger(s.payloadTriggerKey)),
    hasComment: c !== null,
    inputTooLarge: () => inputTooLarge(c!.comment.body),
    repositoryDisabled: () => resolved !== null && anyDisabled(resolved.records),
    disabledNoticeDue: async () => !(await noticeToday(tx, c!.resourceKey, at, 'repositoryDisabled')),
    readerNoticeDue: async () => resolved !== null && readerNoticesOn(resolved.records) && !(await noticeToday(tx, c!.resourceKey, at, 'readerNotice')),
    // Few tasks wait at any time, while one resource may have many: search the state index.
    waitingTask: async () => (await tx.byIndex<TaskRecord>('tasks', 'state', 'waiting_user')).find((t) => t.resourceKey === c!.resourceKey),
    quotaRefusal: async () => (await ctx.quota?.check(tx, { repoKey: c!.repoKey, login: c!.actor.login }, at)) ?? null,
  });
  return write(ctx, tx, s, decision, workspacePath, at);
}

/** `s` with its comment re-keyed to `comment`'s repository (and its trigger key with it). */
function resubject(s: Subject, comment: NormalizedComment): Subject {
  const before = s.comment!.repoKey;
  return {
    ...s,
    comment,
    triggerKey: s.triggerKey === null ? null : rekey(s.triggerKey, before, comment.repoKey),
    payloadTriggerKey: s.payloadTriggerKey ?? (s.triggerKey === null ? null : s.triggerKey),
  };
}

async function write(ctx: WriteContext, tx: Tx, s: Subject, d: WriteDecision, workspacePath: string, at: Date): Promise<Outcome> {
  const c = s.comment;
  // Delivery, trigger and new session records are only ever read by key (dedup, the detail view, the
  // session manager) or scanned by retention: they are written archived (out of every list, found by key).
  const delivery = (status: DeliveryRecord['status'], reason: string | null, taskId: string | null, response: IntakeResponse) =>
    insertArchived(
      tx,
      'webhook_deliveries',
      s.deliveryKey,
      deliveryRecord({
        deliveryKey: s.deliveryKey,
        deliveryId: s.deliveryId,
        eventType: s.eventType,
        receivedAt: s.receivedAt,
        retentionMs: ctx.retentionMs,
        normalized: c !== null,
        taskId,
        status,
        reason,
        payloadHash: s.hash,
        response,
      }),
    );
  const audit = auditWriter(tx, s);
  const trigger = (taskId: string | null) => insertArchived(tx, 'comment_triggers', s.triggerKey!, triggerRecord(s.triggerKey!, s.deliveryKey, taskId, at));

  switch (d.kind) {
    case 'repeat':
      await audit('webhook.duplicate_delivery', {
        taskId: d.delivery.taskId,
        errorCode: 'duplicate_delivery',
        metadata: { payloadMatches: d.delivery.payloadHash === s.hash },
      });
      return { response: repeatOf(d.delivery.response) };
    case 'duplicate_comment': {
      const response = duplicate(d.trigger.taskId);
      await delivery('duplicate', 'duplicate_comment', d.trigger.taskId, response);
      await audit('webhook.duplicate_comment', { taskId: d.trigger.taskId, errorCode: 'duplicate_comment', metadata: { originalDeliveryKey: d.trigger.deliveryKey } });
      return { response };
    }
    case 'ignored': {
      const response = ignored(d.reason);
      await delivery('ignored', d.reason, null, response);
      await audit('webhook.ignored', { errorCode: d.reason });
      return { response };
    }
    case 'none':
      return null;
    case 'repository_disabled': {
      // No trigger: once the repository is enabled again, a Replay of this comment runs.
      await delivery('rejected', 'repository_disabled', null, REPOSITORY_DISABLED);
      const event = await audit('webhook.repository_disabled', { errorCode: 'repository_disabled', ...(d.notice ? { taskId: taskIdFor(s.deliveryKey) } : {}) });
      if (!d.notice) return { response: REPOSITORY_DISABLED };
      // The thread's one notice of the day: a task in `rejected` that never runs, and its one comment.
      const noticeTaskId = taskIdFor(s.deliveryKey);
      const created = await refusedTask(ctx, tx, c!, noticeTaskId, event.seq, at, 'repository_disabled', { repositoryDisabled: true });
      return { response: REPOSITORY_DISABLED, start: created.start, taskId: noticeTaskId };
    }
  }
  // From here on the delivery carries a comment with a trigger key.
  const comment = c!;
  const taskId = taskIdFor(s.deliveryKey);
  const by = `gitea:user:${comment.actor.login}`;
  switch (d.kind) {
    case 'stop': {
      const targets = await stopTargets(tx, comment.resourceKey);
      const taskIds = targets.map((t) => t.taskId);
      const response = stopped(taskIds);
      if (targets.length > 0) {
        // Each stopped task answers with its own `cancelled`/`aborted` receipt (the receipt outbox).
        await delivery('accepted', 'stop', null, response);
        await trigger(null);
        await audit('webhook.stop', { metadata: { taskIds, events: targets.map((t) => t.event) } });
        return { response, stop: targets };
      }
      // Nothing to stop: the thread is told so, once (a task in `ignored` that never runs, and its one
      // comment), instead of silence.
      await delivery('accepted', 'stop', taskId, response);
      await trigger(taskId);
      const event = await audit('webhook.stop', { taskId, metadata: { taskIds, events: [] } });
      const created = await refusedTask(ctx, tx, comment, taskId, event.seq, at, 'nothing_to_stop', { nothingToStop: true }, { verdict: 'IGNORE' });
      return { response, start: created.start, taskId };
    }
    case 'reject': {
      // Counted per author and day; visible to operators as a task in `rejected` (excerpt only) for
      // the first few of the day, then as the count alone. No repository or session is created for
      // someone who may not trigger work; the thread's first such mention of the day (if it has its
      // own task) gets the one notice that only writers can ask — bounded by thread and day, and by
      // author and day through the count.
      const counted = countRejectedMention(await tx.get(SECURITY_EVENTS, rejectedKeyOf(comment.actor.login, at)), {
        login: comment.actor.login,
        repoKey: comment.repoKey,
        resourceKey: comment.resourceKey,
        deliveryId: s.deliveryId,
        commentId: comment.comment.id,
        reason: d.reason,
        at,
        retentionMs: ctx.securityEventRetentionMs,
      });
      await tx.put(SECURITY_EVENTS, counted.record.key, counted.record);
      if (!counted.ownTask) {
        if (counted.firstCounted) {
          await audit('webhook.rejected_counted', {
            errorCode: d.reason,
            metadata: { securityEventKey: counted.record.key, tasksPerDay: counted.record.tasks },
          });
        }
        // No task to name: the answer says so (as a duplicate of a stop does), the delivery and the
        // trigger still answer a repeat or a Replay.
        const response = rejected(d.reason, null);
        await delivery('rejected', d.reason, null, response);
        await trigger(null);
        return { response };
      }
      const event = await audit('webhook.rejected', { taskId, actorId: taskActorId(taskId), errorCode: d.reason, metadata: { securityEventKey: counted.record.key, ...(d.notice ? { readerNotice: true } : {}) } });
      const response = rejected(d.reason, taskId);
      await delivery('rejected', d.reason, taskId, response);
      await trigger(taskId);
      if (d.notice) {
        const created = await refusedTask(ctx, tx, comment, taskId, event.seq, at, d.reason, { readerNotice: true });
        return { response, start: created.start, taskId, notice: true };
      }
      await tx.insert<TaskRecord>('tasks', taskId, taskWithExcerptOnly(taskRecord(comment, taskId, event.seq, at)));
      const created = await ctx.runtime.createInTx(tx, TASK_KIND, taskActorId(taskId), { taskId }, { events: [reject(d.reason)], by, taskId });
      return { response, start: created.start, taskId };
    }
    case 'follow_up': {
      // The same task is re-queued with this comment as its next input, on the same thread.
      const waiting = d.task;
      await audit('webhook.follow_up', { taskId: waiting.taskId, actorId: taskActorId(waiting.taskId) });
      const response = accepted(s.deliveryId, waiting.taskId);
      await delivery('accepted', 'follow_up', waiting.taskId, response);
      await trigger(waiting.taskId);
      const entry = { commentId: comment.comment.id, author: comment.actor.login, body: comment.comment.body, commentUrl: comment.comment.htmlUrl, deliveryKey: s.deliveryKey, at: at.toISOString() };
      await tx.put<TaskRecord>('tasks', waiting.taskId, { ...waiting, followUps: [...(waiting.followUps ?? []), await followUpWithTextStoredOnce(tx, waiting.taskId, entry)] });
      return { response, followUp: waiting.taskId, taskId: waiting.taskId };
    }
    case 'input_too_large': {
      // Longer than the agent can take: a task in `rejected` and ONE comment naming the limit — not
      // a 202 that Codex refuses later, retried and reported as an unexpected error. The store keeps
      // a preview and the length, not the text: nothing will ever read the rest.
      const { chars, limit } = d.size;
      const event = await audit('webhook.input_too_large', { taskId, actorId: taskActorId(taskId), errorCode: INPUT_TOO_LARGE, metadata: { chars, limit } });
      const response = rejected(INPUT_TOO_LARGE, taskId);
      await delivery('rejected', INPUT_TOO_LARGE, taskId, response);
      await trigger(taskId);
      const created = await refusedTask(ctx, tx, comment, taskId, event.seq, at, INPUT_TOO_LARGE, { inputTooLarge: { chars, limit } }, { text: taskWithTextDropped });
      return { response, start: created.start, taskId };
    }
    case 'quota_refused': {
      // Over a daily quota: a task in `rejected` (visible to operators) and ONE comment saying when
      // the user can try again — never a silent drop.
      const refusal = d.refusal;
      const event = await audit('webhook.quota_refused', { taskId, actorId: taskActorId(taskId), errorCode: refusal.code, metadata: { limit: refusal.limit, used: refusal.used, retryAt: refusal.retryAt } });
      const response = rejected(refusal.code, taskId);
      await delivery('rejected', refusal.code, taskId, response);
      await trigger(taskId);
      // It never runs: an excerpt of the text is enough to explain it.
      const created = await refusedTask(ctx, tx, comment, taskId, event.seq, at, refusal.code, { quota: refusal });
      await ctx.quota!.countRefused(tx, { repoKey: comment.repoKey, login: comment.actor.login }, at);
      return { response, start: created.start, taskId };
    }
    case 'accept': {
      await ctx.quota?.countAccepted(tx, { repoKey: comment.repoKey, login: comment.actor.login }, at);
      const response = accepted(s.deliveryId, taskId);
      const start = await acceptAsRecords(ctx, tx, s, comment, taskId, workspacePath, at, response);
      return { response, start, taskId };
    }
  }
}

/** The accepted comment's records: delivery, trigger, first-time repository and session, task, task actor, receipt intent, audit events. */
async function acceptAsRecords(ctx: WriteContext, tx: Tx, s: Subject, c: NormalizedComment, taskId: string, workspacePath: string, at: Date, response: IntakeResponse): Promise<() => void> {
  const audit = auditWriter(tx, s);
  // The audit event's store-wide sequence number doubles as the FIFO queue position.
  const event = await audit('webhook.accept', { taskId, actorId: taskActorId(taskId), metadata: { eventType: s.eventType } });
  await insertArchived(tx, 'webhook_deliveries', s.deliveryKey, deliveryRecord({ deliveryKey: s.deliveryKey, deliveryId: s.deliveryId, eventType: s.eventType, receivedAt: s.receivedAt, retentionMs: ctx.retentionMs, normalized: true, taskId, status: 'accepted', reason: null, payloadHash: s.hash, response }));
  await insertArchived(tx, 'comment_triggers', s.triggerKey!, triggerRecord(s.triggerKey!, s.deliveryKey, taskId, at));
  // Another node may register the repository, or its session below, with a mention of its own at the same moment.
  if (!(await tx.has('repositories', c.repoKey)) && (await tx.insertIfAbsent<RepositoryRecord>('repositories', c.repoKey, repositoryRecord(c, workspacePath, at)))) {
    await audit('repository.register', { metadata: { workspacePath } });
  }
  const task = await tx.insert<TaskRecord>('tasks', taskId, await taskWithTextStoredOnce(tx, { ...taskRecord(c, taskId, event.seq, at), ...(ctx.nodeId !== undefined ? { acceptedBy: ctx.nodeId } : {}) }));
  // Sessions too are read by key only; the session manager's first write brings one back to memory.
  if (!(await tx.has('sessions', c.resourceKey))) await tx.insertIfAbsent('sessions', c.resourceKey, sessionRecord(task, ctx.hostRef, at), { archived: true });
  const created = await ctx.runtime.createInTx(tx, TASK_KIND, taskActorId(taskId), { taskId }, {
    events: [{ type: 'ACCEPT' }],
    by: `gitea:user:${c.actor.login}`,
    taskId,
    deferHosting: true,
  });
  const receipt = pendingReceiptRecord(task, 'received', at);
  await tx.insert<CommentRecord>('comments', receipt.commentKey, receipt);
  return created.start;
}

/**
 * A task that never runs, kept with an excerpt of its text (or none: `text`), and the one comment that
 * tells the thread why (`fields` pick the receipt's words, receipt-decisions.ts).
 */
async function refusedTask(
  ctx: WriteContext,
  tx: Tx,
  comment: NormalizedComment,
  taskId: string,
  seq: number,
  at: Date,
  reason: string,
  fields: Pick<CommentRecord, 'quota' | 'inputTooLarge' | 'nothingToStop' | 'repositoryDisabled' | 'readerNotice'>,
  how: { verdict?: 'REJECT' | 'IGNORE'; text?: (task: TaskRecord) => TaskRecord } = {},
): Promise<{ start: () => void }> {
  const verdict = how.verdict ?? 'REJECT';
  const task = await tx.insert<TaskRecord>('tasks', taskId, (how.text ?? taskWithExcerptOnly)(taskRecord(comment, taskId, seq, at)));
  const event: TaskEvent = verdict === 'REJECT' ? reject(reason) : { type: 'IGNORE', reason };
  const created = await ctx.runtime.createInTx(tx, TASK_KIND, taskActorId(taskId), { taskId }, { events: [event], by: `gitea:user:${comment.actor.login}`, taskId });
  const receipt = pendingReceiptRecord(task, 'refused', at);
  await tx.insert<CommentRecord>('comments', receipt.commentKey, { ...receipt, errorCode: reason, ...fields });
  return created;
}

/** Whether `resourceKey` already had its notice of this kind (a refused receipt carrying `field`) on `at`'s UTC day. */
async function noticeToday(tx: Tx, resourceKey: string, at: Date, field: 'repositoryDisabled' | 'readerNotice'): Promise<boolean> {
  const day = at.toISOString().slice(0, 10);
  // In order, stopping at the first notice found (as `.some` did): a receipt is read only when needed.
  for (const t of await tx.byIndex<TaskRecord>('tasks', 'resourceKey', resourceKey)) {
    if (taskStateHas(t.state, 'refused') && String(t.createdAt).slice(0, 10) === day && (await tx.get<CommentRecord>('comments', receiptCommentKey(t.taskId, 'refused')))?.[field] === true) return true;
  }
  return false;
}

/** Reader notices are on unless an operator turned them off for the repository (any stored letter case of it). */
function readerNoticesOn(records: readonly RepositoryRecord[]): boolean {
  return !records.some((r) => r.readerNotices?.enabled === false);
}

/** The reason (delivery, audit, task error code) of a comment too long for the agent. */
export const INPUT_TOO_LARGE = 'input_too_large';

function reject(reason: string): TaskEvent {
  return { type: 'REJECT', reason };
}

function insertArchived<T extends RecordType>(tx: Tx, collection: CollectionName, key: string, record: T): Promise<T> {
  return tx.insert(collection, key, record, { archived: true });
}

function auditWriter(tx: Tx, s: Subject) {
  const c = s.comment;
  const actor = c ? `gitea:user:${c.actor.login}` : 'gitea:webhook';
  return (action: string, extra: Partial<AuditEventInput> = {}) =>
    tx.appendAudit({
      action,
      actor,
      deliveryId: s.deliveryId,
      ...extra,
      metadata: {
        deliveryKey: s.deliveryKey,
        eventType: s.eventType,
        ...(c ? { repoKey: c.repoKey, resourceKey: c.resourceKey, commentId: c.comment.id } : {}),
        ...(extra.metadata ?? {}),
      },
    });
}
