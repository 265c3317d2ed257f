/**
 * The receipt outbox's decisions (spec §5.2.5, §6.4) — pure, no I/O: which body a row posts, which
 * failure receipt a task gets, what a task transition asks of the outbox, and which row waits.
 */
import { taskStateHas, taskStateTakes } from '../../machines/task-lifecycle.js';
import type { AuditEvent } from '../store/types.js';
import type { CommentRecord, TaskRecord } from '../domain/records.js';
import type { TransitionNotice } from '../runtime/actor-runtime.js';
import { TASK_KIND } from '../tasks/task-actor.js';
import type { Locale } from '../messages/catalogue.js';
import { instanceOfOwner } from '../leases/lease-owner.js';
import { isBudgetCode } from '../usage/usage-accounting.js';
import {
  failureReceiptText,
  isFailureReceiptState,
  NOT_PUBLISHED_NOTICE_STATE,
  notPublishedReceiptText,
  receivedReceiptText,
  WITHHELD_PATHS_NOTICE_STATE,
  withheldPathsReceiptText,
} from './receipt-text.js';
import {
  nothingToStopReceiptText,
  readerNoticeReceiptText,
  refusalReceiptText,
  repositoryDisabledReceiptText,
  tooLongReceiptText,
} from './limit-texts.js';

/** The `<state>` of a receipt row's key `<taskId>:status:<state>`. */
export function receiptStateOf(rec: Pick<CommentRecord, 'commentKey' | 'taskId'>): string {
  return rec.commentKey.slice(`${rec.taskId}:status:`.length);
}

/** The comment a receipt row posts: the text its state calls for, ending with the row's marker. */
export function receiptBody(task: TaskRecord, rec: CommentRecord, locale: Locale): string {
  return `${receiptText(task, rec, locale)}\n\n${rec.marker}`;
}

function receiptText(task: TaskRecord, rec: CommentRecord, locale: Locale): string {
  const state = receiptStateOf(rec);
  if (isFailureReceiptState(state)) return failureReceiptText(task, state, locale);
  if (state === 'refused') {
    // A task that never runs says why, once: which refusal is told by the row's own field.
    if (rec.quota) return refusalReceiptText(task, rec.quota, locale);
    if (rec.inputTooLarge) return tooLongReceiptText(task, rec.inputTooLarge, locale);
    if (rec.nothingToStop === true) return nothingToStopReceiptText(task, locale);
    if (rec.repositoryDisabled === true) return repositoryDisabledReceiptText(task, locale);
    if (rec.readerNotice === true) return readerNoticeReceiptText(task, locale);
  }
  if (state === NOT_PUBLISHED_NOTICE_STATE) return notPublishedReceiptText(task, locale);
  if (state === WITHHELD_PATHS_NOTICE_STATE) return withheldPathsReceiptText(task, locale);
  return receivedReceiptText(task, locale);
}

/**
 * Whether a task that reached a failure state gets a failure receipt of its own. A task stopped by
 * one of its own limits (where it ends: the machine's `stoppedByLimit` tag) is told by an edit of its
 * receipt (receipt-notice.ts): one comment per task.
 */
export function getsFailureReceipt(task: Pick<TaskRecord, 'errorCode'>, state: string): boolean {
  return !(taskStateHas(state, 'stoppedByLimit') && isBudgetCode(task.errorCode));
}

/** A failure receipt waits for the same task's `received` receipt, so they appear in order. */
export function waitsForReceived(rec: Pick<CommentRecord, 'commentKey' | 'taskId'>, received: Pick<CommentRecord, 'status'> | undefined): boolean {
  if (receiptStateOf(rec) === 'received') return false;
  return received?.status === 'pending';
}

/** An earlier attempt wrote its intent: it may have landed, so look on Gitea before posting again. */
export function triedBefore(events: readonly Pick<AuditEvent, 'action' | 'metadata'>[], commentKey: string): boolean {
  return events.some((a) => a.action === 'receipt.send_intent' && a.metadata?.['commentKey'] === commentKey);
}

/**
 * How long an intent written by another node's process keeps this process from posting the row
 * (0: post now), counted from `nowMs`, when this process looked for the comment on Gitea. The other
 * POST may still be on its way while the repository changes hands: a writer never retries, so a
 * window longer than one write means the comment was on Gitea for that look, or never will be. An
 * earlier process of this same node is gone and holds nothing. `sending.at` and `nowMs` are both on
 * the database's clock (`Store.clockMs`), so a node whose own clock is set wrong still judges the window right.
 */
export function sendClaimWaitMs(sending: CommentRecord['sending'], self: string, nowMs: number, claimMs: number): number {
  if (!sending || sending.by === self) return 0;
  const instance = instanceOfOwner(self);
  if (instance !== null && instanceOfOwner(sending.by) === instance) return 0;
  return Math.max(0, Date.parse(sending.at) + claimMs - nowMs);
}

export interface TransitionReaction {
  /** Ask for a pass over pending rows. */
  kick: boolean;
  /** A failure receipt to ensure (then kick) for this task and state. */
  failureReceipt?: { taskId: string; state: string };
}

/** What a task transition asks of the outbox. */
export function reactionTo(n: Pick<TransitionNotice, 'kind' | 'fromState' | 'toState' | 'taskId' | 'context'>): TransitionReaction {
  if (n.kind !== TASK_KIND) return { kick: false };
  // Waiting for its claim (accepted, or back in the queue): its receipt may be pending.
  if (taskStateTakes(n.toState, 'CLAIM')) return { kick: true };
  // Out of publishing (the state that takes the publisher's PUBLISHED): a notice the publisher may
  // have queued (delivery off); a failure is handled below.
  const kick = taskStateTakes(n.fromState, 'PUBLISHED');
  if (!isFailureReceiptState(n.toState)) return { kick };
  const taskId = (n.context as { taskId?: string } | null)?.taskId ?? n.taskId;
  if (!taskId) return { kick };
  return { kick, failureReceipt: { taskId, state: n.toState } };
}
