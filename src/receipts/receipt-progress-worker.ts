/**
 * Keeps a task's `已收到` receipt up to date as its tracking comment: the receipt is
 * EDITED in place at each stage — never a new comment — and at the end shows the outcome with the
 * links (answer, branch, pull request), the duration and the tokens.
 *
 * - Rate-limited: at most one progress edit per receipt per interval (CCWEB_RECEIPT_EDIT_INTERVAL_SECONDS);
 *   the elapsed time moves on each tick, a stage change waits for the interval like any progress
 *   edit. The final edit (the task ended) does not wait: it goes out on the final transition.
 * - Idempotent across restarts: the last edit Gitea took (stage, body hash, time) is stored on the
 *   receipt's row (`progress`) in the transaction that writes its audit event
 *   (`receipt.progress_edited`). A restart re-renders every receipt whose final edit is not stored;
 *   a body equal to the stored one is not sent again, and an edit never adds a comment.
 * - A failed edit never fails the task: it is audited, retried on later ticks a bounded number of
 *   times, then given up (the receipt keeps its last text).
 */
import { isTerminalTaskState, TASK_STATES, taskStateHas } from '../../machines/task-lifecycle.js';
import type { AgentStep } from '../domain/agent-step.js';
import type { CommentRecord, TaskRecord } from '../domain/records.js';
import { isGiteaError, type GiteaClient } from '../gitea/gitea-client.js';
import type { ActorRuntime, TransitionNotice } from '../runtime/actor-runtime.js';
import { isLeaseRefusal, type Store, type Tx } from '../store/types.js';
import { writerFence, type LeaseFence } from '../leases/lease-fence.js';
import { EVERY_REPOSITORY, type RepositoryScope } from '../domain/repository-scope.js';
import { TASK_KIND } from '../tasks/task-actor.js';
import { DEFAULT_LOCALE, type Locale } from '../messages/catalogue.js';
import { bodyHashOf, receiptCommentKey } from './receipt-record.js';
import { unpublishedChangeOf } from './receipt-text.js';
import { createCommentWorker } from './comment-worker.js';
import { errorMessageOf, isPermanentReceiptError } from './receipt-retry.js';
import {
  branchWebUrl,
  commentWebUrl,
  editDecision,
  isFinalStage,
  progressReceiptText,
  progressStageOf,
  type ProgressMemo,
  type ProgressOutcome,
} from './receipt-progress.js';

export interface ReceiptProgressOptions {
  store: Store;
  runtime: ActorRuntime;
  gitea: Pick<GiteaClient, 'editIssueComment'>;
  locale?: Locale;
  /** Least time between two edits of one receipt. */
  intervalMs: number;
  /** How often open receipts are looked at (elapsed time, waits). Default: a quarter of the interval, 0.5–5 s. */
  tickMs?: number;
  /** Failed edits of one receipt before it keeps its last text. */
  maxFailures?: number;
  now?: () => Date;
  logger?: (msg: string, fields: Record<string, unknown>) => void;
  /**
   * The repositories whose receipts this node edits: a receipt is edited only while its
   * task's repository is owned here, asked again at each visit; one of another node's repository is
   * let go (looked at again on its next transition here, `touch` or `catchUp`). Default: every
   * repository (one node).
   */
  scope?: Pick<RepositoryScope, 'owns' | 'leads'>;
  /**
   * The fence of this node's worker of a task while one runs it (the executor's `fenceOf`): while the
   * task holds its repository's lease, its receipt is edited only by the node whose worker holds it,
   * fenced by that lease (src/leases/lease-fence.ts `writerFence`). Absent: no worker runs tasks
   * in this process (the receipts tested alone), and no edit is fenced.
   */
  fenceOf?: (taskId: string) => LeaseFence | undefined;
}

export interface ReceiptProgress {
  start(): Promise<void>;
  stop(): void;
  /** The agent's current step (from the turn's notifications); shown while the task is working. */
  noteStep(taskId: string, step: AgentStep): void;
  /** Looks at a task's receipt again soon (a notice edited it, the outbox posted it). */
  touch(taskId: string): void;
  /**
   * Does the catch-up of `start()` again: the open receipts of the repositories owned here are
   * looked at. For a node that has just taken repositories over.
   */
  catchUp(): Promise<void>;
  /** The receipt's full body as it should read now, or null when the task has none. */
  bodyFor(taskId: string): Promise<string | null>;
  /** Resolves when no open receipt has an edit due or waiting (tests, shutdown). */
  drain(): Promise<void>;
}

/** Task states that still have a stage to show before their outcome. */
const LIVE_STATES = TASK_STATES.filter((s) => !isTerminalTaskState(s));

const REPLY_KINDS = new Set(['mcp_final', 'rest_fallback']);

export function createReceiptProgress(options: ReceiptProgressOptions): ReceiptProgress {
  const { store, runtime, gitea } = options;
  const locale = options.locale ?? DEFAULT_LOCALE;
  const now = options.now ?? (() => new Date());
  const log = options.logger ?? (() => undefined);
  const intervalMs = options.intervalMs;
  const tickMs = options.tickMs ?? Math.min(5_000, Math.max(500, Math.floor(intervalMs / 4)));
  const maxFailures = options.maxFailures ?? 5;
  /** Tasks whose receipt may need an edit. */
  const open = new Set<string>();
  /** How often each open task was asked for (a pass closes a task only if this did not move during its visit). */
  const asks = new Map<string, number>();
  const ask = (taskId: string): void => {
    open.add(taskId);
    asks.set(taskId, (asks.get(taskId) ?? 0) + 1);
  };
  const steps = new Map<string, AgentStep>();
  const failures = new Map<string, number>();
  const scope = options.scope ?? EVERY_REPOSITORY;
  let ticker: NodeJS.Timeout | null = null;

  async function notices(taskId: string): Promise<string[]> {
    const rows = (await store.byIndex<CommentRecord>('comments', 'taskId', taskId)).filter((r) => r.kind === 'notice' && r.status !== 'failed');
    const resumed = rows.some((r) => r.reason === 'resumed');
    return rows
      .filter((r) => !(resumed && r.reason === 'blocked_workspace'))
      .sort((a, b) => a.createdAt.localeCompare(b.createdAt))
      .map((r) => r.text ?? '')
      .filter((t) => t !== '');
  }

  async function outcomeOf(task: TaskRecord): Promise<ProgressOutcome> {
    const replies = (await store.byIndex<CommentRecord>('comments', 'taskId', task.taskId))
      .filter((r) => REPLY_KINDS.has(r.kind) && r.status === 'confirmed' && typeof r.commentId === 'number')
      .sort((a, b) => a.updatedAt.localeCompare(b.updatedAt));
    const reply = replies.at(-1);
    const pub = task.publish;
    const published = pub?.status === 'published' && typeof pub.branch === 'string';
    // The final transition's time, not updatedAt: later writes (archiving) must not change the text.
    const end = (await store.audit({ taskId: task.taskId })).filter((e) => e.toState === task.state).at(-1)?.timestamp ?? task.updatedAt;
    return {
      answerUrl: reply ? commentWebUrl(task, reply.commentId!) : null,
      branch: published ? { name: pub.branch!, url: branchWebUrl(task, pub.branch!, pub.repository) } : null,
      pullRequest: pub?.pullRequest && typeof pub.pullRequest.url === 'string' ? { number: pub.pullRequest.number, url: pub.pullRequest.url } : null,
      durationMs: Math.max(0, Date.parse(end) - Date.parse(task.createdAt)),
      tokens: task.usage?.totalTokens ?? null,
      unpublished: unpublishedChangeOf(pub),
    };
  }

  async function render(task: TaskRecord, receipt: CommentRecord): Promise<{ body: string; stage: NonNullable<ReturnType<typeof progressStageOf>> } | null> {
    const stage = progressStageOf(task.state);
    if (!stage) return null;
    const final = isFinalStage(stage);
    const text = progressReceiptText(
      {
        task,
        stage,
        elapsedMs: final ? null : Math.max(0, now().getTime() - Date.parse(task.createdAt)),
        step: stage === 'working' ? (steps.get(task.taskId) ?? null) : null,
        outcome: final ? await outcomeOf(task) : null,
        notices: await notices(task.taskId),
      },
      locale,
    );
    return { body: `${text}\n\n${receipt.marker}`, stage };
  }

  async function receiptOf(taskId: string): Promise<CommentRecord | undefined> {
    return store.get<CommentRecord>('comments', receiptCommentKey(taskId, 'received'));
  }

  /** A write for the task's receipt: fenced by its worker's lease when the task's state holds one. */
  function write(fence: LeaseFence | null, fn: (tx: Tx) => Promise<void>): Promise<void> {
    return store.transact(async (tx) => {
      await fence?.(tx);
      await fn(tx);
    });
  }

  /** Whether the lease `fence` stands for still holds (a read-only transaction before Gitea is asked). */
  async function holds(fence: LeaseFence): Promise<boolean> {
    return store.transact(fence).then(
      () => true,
      (error: unknown) => {
        if (isLeaseRefusal(error)) return false;
        throw error;
      },
    );
  }

  async function record(receipt: CommentRecord, memo: ProgressMemo & { final: boolean }, step: AgentStep | null, edited: boolean, fence: LeaseFence | null): Promise<void> {
    await write(fence, async (tx) => {
      const cur = await tx.get<CommentRecord>('comments', receipt.commentKey);
      if (!cur) return;
      await tx.put<CommentRecord>('comments', receipt.commentKey, { ...cur, progress: memo });
      if (edited) {
        await tx.appendAudit({
          action: 'receipt.progress_edited',
          actor: 'system:receipt_progress',
          taskId: receipt.taskId,
          commentId: receipt.commentId,
          metadata: { commentKey: receipt.commentKey, stage: memo.stage, step: step?.kind ?? null, bodyHash: memo.bodyHash, final: memo.final },
        });
      }
    });
  }

  /** One receipt: true when it needs no more looking at. */
  async function visit(taskId: string): Promise<boolean> {
    const receipt = await receiptOf(taskId);
    if (!receipt || receipt.status === 'failed') return true;
    // Not posted yet. One node's outbox touches it again once posted (onSent), so it is let go until
    // then; with several nodes another node's outbox may post it, and this worker keeps looking.
    if (receipt.status !== 'sent' || receipt.commentId === null) return scope === EVERY_REPOSITORY;
    const task = await store.get<TaskRecord>('tasks', taskId);
    if (!task) return true;
    // Another node's repository is that node's to edit (asked at each visit: ownership moves while running).
    if (!scope.owns(task.repoKey)) return true;
    if (receipt.progress?.final) return true;
    // While the task holds its repository's lease, the edit is the worker's that holds it (the agent's
    // steps are that node's too): not this node's when its workers do not run the task (kept open:
    // the state moves on, or this node's worker starts). In other states no lease exists: unfenced.
    const fence = options.fenceOf ? writerFence(task.state, options.fenceOf(taskId)) : null;
    if (fence === 'not_ours') return false;
    const r = await render(task, receipt);
    if (!r) return true;
    const final = isFinalStage(r.stage);
    const bodyHash = bodyHashOf(r.body);
    // Before the first edit, the post itself counts as the last edit (the interval holds from it).
    const memo = receipt.progress ?? { stage: 'queued', bodyHash: receipt.bodyHash, at: receipt.updatedAt };
    const decision = editDecision(memo, bodyHash, now().getTime(), intervalMs, final);
    if (decision.kind === 'skip') {
      if (final) await record(receipt, { ...memo, final: true }, null, false, fence);
      return final;
    }
    if (decision.kind === 'wait') return false;
    // No edit once the lease is gone: another worker runs the task (or will), and edits its receipt.
    if (fence && !(await holds(fence))) return false;
    const step = r.stage === 'working' ? (steps.get(taskId) ?? null) : null;
    try {
      await gitea.editIssueComment(task.owner, task.repo, receipt.commentId, r.body);
    } catch (error) {
      const n = (failures.get(taskId) ?? 0) + 1;
      failures.set(taskId, n);
      const errorCode = isGiteaError(error) ? error.code : 'receipt_edit_error';
      log('receipt progress edit failed', { taskId, stage: r.stage, errorCode, attempt: n });
      await write(fence, async (tx) => {
        await tx.appendAudit({ action: 'receipt.progress_failed', actor: 'system:receipt_progress', taskId, commentId: receipt.commentId, errorCode, metadata: { commentKey: receipt.commentKey, stage: r.stage, attempt: n, message: errorMessageOf(error) } });
      }).catch(() => undefined);
      // A permanent answer (the comment deleted, the issue locked) or too many tries: it keeps its
      // last text until the next transition asks once more.
      return isPermanentReceiptError(error) || n >= maxFailures;
    }
    failures.delete(taskId);
    await record(receipt, { stage: r.stage, bodyHash, at: now().toISOString(), final }, step, true, fence);
    log('receipt progress edited', { taskId, stage: r.stage });
    return final;
  }

  async function pass(): Promise<void> {
    for (const taskId of [...open]) {
      if (worker.stopped) return;
      const asked = asks.get(taskId);
      try {
        // Closed only if nobody asked again while it was looked at (a post or a transition meanwhile).
        if ((await visit(taskId)) && asks.get(taskId) === asked) {
          open.delete(taskId);
          asks.delete(taskId);
          steps.delete(taskId);
        }
      } catch (error) {
        // Store trouble, or the lease lost between the edit and its record (this node no longer runs
        // the task): the receipt stays open; the next tick looks again. Never the task's failure.
        log(isLeaseRefusal(error) ? 'receipt progress edit not recorded: the lease is gone' : 'receipt progress error', { taskId, error: errorMessageOf(error) });
      }
    }
  }

  function onTransition(n: TransitionNotice): void {
    if (worker.stopped || n.kind !== TASK_KIND) return;
    const taskId = n.taskId ?? (n.context as { taskId?: string } | null)?.taskId;
    if (!taskId) return;
    if (!taskStateHas(n.toState, 'showsProgress')) steps.delete(taskId);
    ask(taskId);
    worker.kick();
  }

  const worker = createCommentWorker(runtime, pass, onTransition, (err) => log('receipt pass failed; tried again shortly', { error: String(err) }));

  /**
   * Receipts whose final edit is not stored (a restart in between) are looked at again: those of
   * unfinished tasks, and those an edit began on, of the repositories owned here. Not a receipt of a
   * task that ended before this service showed progress: it is left as it was.
   */
  async function catchUp(): Promise<void> {
    for (const state of LIVE_STATES) for (const t of await store.byIndex<TaskRecord>('tasks', 'state', state)) if (scope.owns(t.repoKey)) ask(t.taskId);
    for (const row of (await store.byIndex<CommentRecord>('comments', 'kind', 'status')).filter((r) => r.progress !== undefined && !r.progress.final)) {
      const task = await store.get<TaskRecord>('tasks', row.taskId);
      if (task && scope.owns(task.repoKey)) ask(row.taskId);
    }
    worker.kick();
  }

  return {
    async start() {
      worker.listen();
      await catchUp();
      ticker ??= setInterval(() => {
        if (open.size > 0) worker.kick();
      }, tickMs);
      ticker.unref();
    },
    stop() {
      worker.stop();
      if (ticker) clearInterval(ticker);
      ticker = null;
    },
    noteStep(taskId, step) {
      steps.set(taskId, step);
    },
    touch(taskId) {
      ask(taskId);
      worker.kick();
    },
    catchUp,
    async bodyFor(taskId) {
      const task = await store.get<TaskRecord>('tasks', taskId);
      const receipt = await receiptOf(taskId);
      if (!task || !receipt) return null;
      return (await render(task, receipt))?.body ?? null;
    },
    async drain() {
      for (;;) {
        if (worker.running) await worker.running;
        if (worker.stopped || open.size === 0) return;
        await new Promise((r) => setTimeout(r, tickMs));
        worker.kick();
      }
    },
  };
}
