/**
 * Tells the user, once, when their task is parked or stopped for a reason they (or an operator) can
 * act on — `blocked_workspace`, a per-task budget — by EDITING the task's `已收到` receipt comment
 * instead of adding a comment. Refusals by a daily quota have no receipt to edit: intake
 * queues their one comment for the outbox instead.
 *
 * Durable and once: a `comments` row of kind `notice` (`<taskId>:notice:<reason>`) is inserted when
 * the task reaches the state (inserting twice is impossible), and marked `sent` after Gitea took
 * the edit. The edit is idempotent (same body), so a crash between PATCH and the write only
 * repeats the same edit. If the receipt was never posted (it failed), the notice is posted as a
 * comment of its own rather than not at all.
 */
import { taskStateHas, taskStatesWith } from '../../machines/task-lifecycle.js';
import type { CommentRecord, TaskRecord } from '../domain/records.js';
import { formatReceiptMarker } from '../domain/marker.js';
import { isGiteaError, type GiteaClient } from '../gitea/gitea-client.js';
import type { ActorRuntime, TransitionNotice } from '../runtime/actor-runtime.js';
import type { Store, Tx } from '../store/types.js';
import { EVERY_REPOSITORY, type RepositoryScope } from '../domain/repository-scope.js';
import { TASK_KIND } from '../tasks/task-actor.js';
import { isBudgetCode, type BudgetCode } from '../usage/usage-accounting.js';
import { DEFAULT_LOCALE, type Locale } from '../messages/catalogue.js';
import { effectiveLimits } from '../usage/limits.js';
import type { UsageLimits } from '../domain/usage-records.js';
import { blockedNoticeText, budgetNoticeText, resumedNoticeText, standaloneNoticeText, type BudgetNotice } from './limit-texts.js';
import { bodyHashOf, receiptCommentKey } from './receipt-record.js';
import { receivedReceiptText } from './receipt-text.js';
import { progressStageOf } from './receipt-progress.js';
import { createCommentWorker } from './comment-worker.js';
import { actsForTask } from './acts-for-task.js';

export interface ReceiptNoticesOptions {
  store: Store;
  runtime: ActorRuntime;
  gitea: GiteaClient;
  /** The configured limits (for the numbers in a budget notice). */
  limits: UsageLimits;
  /** The language of the notices and of the receipt they edit (CCWEB_LOCALE); default zh. */
  locale?: Locale;
  logger?: (msg: string, fields: Record<string, unknown>) => void;
  now?: () => Date;
  /** Waits between attempts while the receipt is still pending or Gitea failed transiently. */
  retryDelaysMs?: readonly number[];
  /**
   * The receipt's whole body as it reads now, when the receipt shows progress
   * (receipt-progress-worker.ts): the notice is one part of it, so an edit keeps the stage and the
   * outcome. Absent → the receipt sentence followed by the notice.
   */
  composeReceipt?: (taskId: string) => Promise<string | null>;
  /** Told after a notice edited a task's receipt (the progress worker looks at it again). */
  onReceiptEdited?: (taskId: string) => void;
  /**
   * The repositories this node tells users about: a notice is recorded and sent only
   * while its task's repository is owned here (asked again for every notice of every pass); one whose
   * task is gone, by the node that leads. Default: every repository (one node).
   */
  scope?: Pick<RepositoryScope, 'owns' | 'leads'>;
}

export interface ReceiptNotices {
  start(): Promise<void>;
  stop(): void;
  /**
   * Does the catch-up of `start()` again for the repositories owned here (notices a task's state
   * calls for, resumed notes of unblocked tasks), then a pass. For a node that has just taken
   * repositories over.
   */
  catchUp(): Promise<void>;
  /** Resolves when no notice of this node's repositories is pending (sent or failed). */
  drain(): Promise<void>;
}

const RESUMED = 'resumed';

export function noticeKey(taskId: string, reason: string): string {
  return `${taskId}:notice:${reason}`;
}

/**
 * The reason a task in this state gets a notice, or null: paused for an operator (the machine's
 * `pausedForOperator` tag), or ended by one of its own limits (`stoppedByLimit`, with a budget code).
 * Neither state holds a lease, so a notice's writes are not lease-fenced.
 */
function noticeReason(task: TaskRecord): string | null {
  if (taskStateHas(task.state, 'pausedForOperator')) return 'blocked_workspace';
  if (taskStateHas(task.state, 'stoppedByLimit') && isBudgetCode(task.errorCode)) return task.errorCode!;
  return null;
}

/** The states whose tasks may get a notice (noticeReason). */
const NOTICE_STATES = [...taskStatesWith('pausedForOperator'), ...taskStatesWith('stoppedByLimit')];

/** An operator let a paused task go on: out of a state paused for an operator, back to one a claim takes. */
function isUnblock(fromState: string | null | undefined, toState: string | null | undefined): boolean {
  return taskStateHas(fromState, 'pausedForOperator') && taskStateHas(toState, 'claimable');
}

export function createReceiptNotices(options: ReceiptNoticesOptions): ReceiptNotices {
  const { store, runtime, gitea } = options;
  const now = options.now ?? (() => new Date());
  const locale = options.locale ?? DEFAULT_LOCALE;
  const log = options.logger ?? (() => undefined);
  const delays = options.retryDelaysMs ?? [1_000, 5_000, 30_000, 120_000];
  const failures = new Map<string, number>();
  const pendingInserts = new Set<Promise<unknown>>();
  const scope = options.scope ?? EVERY_REPOSITORY;

  const actsFor = (taskId: string): Promise<boolean> => actsForTask(store, scope, taskId);

  async function budgetFigures(tx: Tx, task: TaskRecord, code: BudgetCode): Promise<BudgetNotice> {
    const limits = await effectiveLimits(options.limits, tx, task.repoKey);
    const u = task.usage;
    if (code === 'budget_task_tokens') return { code, limit: limits.taskTokens ?? null, used: u?.totalTokens ?? null };
    if (code === 'budget_task_turns') return { code, limit: limits.taskTurns ?? null, used: u?.turns ?? null };
    return { code, limit: limits.taskWallMs ?? null, used: u?.wallMs ?? null };
  }

  function noticeRow(task: TaskRecord, key: string, at: string): CommentRecord {
    return {
      commentKey: key,
      taskId: task.taskId,
      kind: 'notice',
      resourceKey: task.resourceKey,
      turnId: null,
      commentId: null,
      marker: formatReceiptMarker(receiptCommentKey(task.taskId, 'received')),
      bodyHash: '',
      status: 'pending',
      errorCode: null,
      createdAt: at,
      updatedAt: at,
    };
  }

  async function ensureNotice(taskId: string): Promise<void> {
    await store.transact(async (tx) => {
      const task = await tx.get<TaskRecord>('tasks', taskId);
      if (!task) return;
      const reason = noticeReason(task);
      if (!reason) return;
      const key = noticeKey(taskId, reason);
      if (await tx.has('comments', key)) return;
      const text = isBudgetCode(reason) ? budgetNoticeText(await budgetFigures(tx, task, reason), locale) : blockedNoticeText(task, locale);
      await tx.insertIfAbsent<CommentRecord>('comments', key, { ...noticeRow(task, key, now().toISOString()), reason, text });
    });
  }

  /**
   * An operator unblocked the task (blocked_workspace → queued): the receipt that says "paused" is
   * edited back to the plain receipt with a note that it resumed. Once per task, like the pause
   * notice itself, and only when a pause notice was recorded.
   */
  async function ensureResumed(taskId: string): Promise<void> {
    await store.transact(async (tx) => {
      const task = await tx.get<TaskRecord>('tasks', taskId);
      if (!task || taskStateHas(task.state, 'pausedForOperator')) return;
      if (!(await tx.get('comments', noticeKey(taskId, 'blocked_workspace')))) return;
      const key = noticeKey(taskId, RESUMED);
      await tx.insertIfAbsent<CommentRecord>('comments', key, { ...noticeRow(task, key, now().toISOString()), reason: RESUMED, text: resumedNoticeText(task, locale) });
    });
  }

  /** Pending notices; a `resumed` one after the pause notice it replaces. */
  async function pending(): Promise<CommentRecord[]> {
    const rows: CommentRecord[] = [];
    for (const r of await store.byIndex<CommentRecord>('comments', 'status', 'pending')) if (r.kind === 'notice' && (await actsFor(r.taskId))) rows.push(r);
    return [...rows.filter((r) => r.reason !== RESUMED), ...rows.filter((r) => r.reason === RESUMED)];
  }

  async function mark(rec: CommentRecord, patch: Partial<CommentRecord>, action: string, metadata: Record<string, unknown>, level?: 'alert') {
    await store.transact(async (tx) => {
      const cur = await tx.get<CommentRecord>('comments', rec.commentKey);
      if (!cur || cur.status !== 'pending') return;
      await tx.put<CommentRecord>('comments', rec.commentKey, { ...cur, ...patch, updatedAt: now().toISOString() });
      await tx.appendAudit({ action, actor: 'system:receipt_notice', taskId: rec.taskId, ...(level ? { level } : {}), commentId: patch.commentId ?? null, errorCode: patch.errorCode ?? null, metadata: { commentKey: rec.commentKey, ...metadata } });
    });
  }

  function later(key: string): boolean {
    const n = (failures.get(key) ?? 0) + 1;
    failures.set(key, n);
    if (n > delays.length) return false;
    worker.timers.schedule(delays[n - 1]!);
    return true;
  }

  async function sendOne(rec: CommentRecord): Promise<void> {
    const task = await store.get<TaskRecord>('tasks', rec.taskId);
    if (!task) return mark(rec, { status: 'failed', errorCode: 'task_missing' }, 'receipt.notice_failed', {}, 'alert');
    const receipt = await store.get<CommentRecord>('comments', receiptCommentKey(task.taskId, 'received'));
    const text = rec.text ?? '';
    if (receipt?.status === 'pending') {
      // The outbox has not posted the receipt yet: edit it once it exists.
      if (!later(rec.commentKey)) await mark(rec, { status: 'failed', errorCode: 'receipt_not_posted' }, 'receipt.notice_failed', {}, 'alert');
      return;
    }
    // The resumed note replaces the pause notice: not before that one went out (or gave up).
    const paused = rec.reason === RESUMED ? await store.get<CommentRecord>('comments', noticeKey(task.taskId, 'blocked_workspace')) : undefined;
    if (paused?.status === 'pending') return;
    try {
      if (paused && !(receipt?.status === 'sent' && receipt.commentId !== null)) {
        // No receipt: the pause notice went out as a comment of its own; edit that one, or say nothing
        // (the user was never told it paused).
        if (paused.status !== 'sent' || paused.commentId === null) {
          await mark(rec, { status: 'failed', errorCode: 'nothing_to_edit' }, 'receipt.notice_skipped', { reason: RESUMED });
          return;
        }
        const body = `${standaloneNoticeText(task, text, locale)}\n\n${formatReceiptMarker(paused.commentKey)}`;
        await gitea.editIssueComment(task.owner, task.repo, paused.commentId, body);
        await mark(rec, { status: 'sent', commentId: paused.commentId, bodyHash: bodyHashOf(body) }, 'receipt.notice_edited', { reason: RESUMED });
      } else if (receipt?.status === 'sent' && receipt.commentId !== null) {
        const body = (await options.composeReceipt?.(task.taskId)) ?? `${receivedReceiptText(task, locale, progressStageOf(task.state) ?? 'queued')}\n\n${text}\n\n${receipt.marker}`;
        await gitea.editIssueComment(task.owner, task.repo, receipt.commentId, body);
        await mark(rec, { status: 'sent', commentId: receipt.commentId, bodyHash: bodyHashOf(body) }, 'receipt.notice_edited', { reason: rec.reason });
        options.onReceiptEdited?.(task.taskId);
      } else {
        // No receipt to edit (it failed to post): say it in a comment of its own rather than not at all.
        const body = `${standaloneNoticeText(task, text, locale)}\n\n${formatReceiptMarker(rec.commentKey)}`;
        const posted = await gitea.createIssueComment(task.owner, task.repo, task.resource.number, body);
        await mark(rec, { status: 'sent', commentId: posted.id, bodyHash: bodyHashOf(body) }, 'receipt.notice_posted', { reason: rec.reason });
      }
      failures.delete(rec.commentKey);
      log('receipt notice sent', { taskId: task.taskId, reason: rec.reason });
    } catch (error) {
      const code = isGiteaError(error) ? error.code : 'notice_send_error';
      const transient = !isGiteaError(error) || ['gitea_server_error', 'gitea_network', 'gitea_timeout'].includes(error.code);
      log('receipt notice failed', { taskId: task.taskId, errorCode: code });
      if (!transient || !later(rec.commentKey)) await mark(rec, { status: 'failed', errorCode: code }, 'receipt.notice_failed', {}, 'alert');
    }
  }

  async function pass(): Promise<void> {
    for (const rec of await pending()) {
      if (worker.stopped) return;
      const cur = await store.get<CommentRecord>('comments', rec.commentKey);
      if (cur?.status !== 'pending') continue;
      // Ownership moves while the pass runs (another node took the repository over): asked per notice.
      if (!(await actsFor(cur.taskId))) continue;
      await sendOne(cur).catch((err: unknown) => log('receipt notice error', { error: String(err) }));
    }
  }

  const worker = createCommentWorker(runtime, pass, onTransition, (err) => log('receipt pass failed; tried again shortly', { error: String(err) }));
  const kick = (): void => worker.kick();

  function onTransition(n: TransitionNotice): void {
    if (worker.stopped || n.kind !== TASK_KIND) return;
    const taskId = n.taskId ?? (n.context as { taskId?: string } | null)?.taskId;
    if (!taskId) return;
    if (isUnblock(n.fromState, n.toState)) {
      track(ensureResumed(taskId), taskId);
      return;
    }
    // A notice may wait for the receipt: any receipt sent later comes with a transition to retry on.
    // The pass lists the pending notices itself and does nothing when there are none, so the kick
    // needs no read here (a listener stays synchronous).
    if (!NOTICE_STATES.some((s) => s === n.toState)) {
      kick();
      return;
    }
    track(ensureNotice(taskId), taskId);
  }

  function track(insert: Promise<void>, taskId: string): void {
    const p = insert.then(
      () => kick(),
      (err: unknown) => log('receipt notice not recorded', { taskId, error: String(err) }),
    );
    pendingInserts.add(p);
    void p.finally(() => pendingInserts.delete(p));
  }

  /** Notices whose transition came while no worker of the task's repository listened (a restart, a takeover). */
  async function catchUp(): Promise<void> {
    for (const state of NOTICE_STATES) {
      for (const t of await store.byIndex<TaskRecord>('tasks', 'state', state)) if (noticeReason(t) && scope.owns(t.repoKey)) await ensureNotice(t.taskId);
    }
    // An unblock whose transition came while the service was down (or before the insert was durable).
    for (const paused of (await store.byIndex<CommentRecord>('comments', 'kind', 'notice')).filter((r) => r.reason === 'blocked_workspace')) {
      if (await store.get('comments', noticeKey(paused.taskId, RESUMED))) continue;
      if (!(await actsFor(paused.taskId))) continue;
      const unblocked = (await store.audit({ taskId: paused.taskId })).some((e) => isUnblock(e.fromState, e.toState));
      if (unblocked) await ensureResumed(paused.taskId);
    }
    kick();
  }

  return {
    async start() {
      worker.listen();
      await catchUp();
    },
    stop: () => worker.stop(),
    catchUp,
    async drain() {
      for (;;) {
        if (pendingInserts.size > 0) await Promise.allSettled([...pendingInserts]);
        if (worker.running) await worker.running;
        if (worker.stopped || (await pending()).length === 0 || worker.timers.size === 0) return;
        await new Promise((r) => setTimeout(r, 100));
      }
    },
  };
}
