/**
 * The receipt outbox (spec §5.2.5, §6.4, §9.3): posts exactly one `giteabot:` status comment per
 * pending `comments` row of kind `status` — the `已收到` receipt intake queues with the task, and one
 * failure receipt when a task ends in `failed`, `failed_reply`, `aborted` or `cancelled`.
 *
 * Exactly once, across retries, duplicate kicks and restarts:
 * - one send per row at a time in this process (a single worker loop);
 * - `receipt.send_intent` is durable BEFORE the POST and `receipt.send_result` is written after;
 * - before sending a row that already has an intent, the outbox lists the issue's comments and
 *   adopts the bot's comment carrying the row's receipt marker instead of posting again. That covers
 *   a crash between POST and result, a timeout, and a 5xx that Gitea answered after all.
 * Transient failures (5xx, timeouts, network) back off and retry a bounded number of times; permanent
 * ones (401/403 e.g. a locked issue, 404, 422, 423) mark the row `failed` with an alert.
 */
import type { CommentRecord, TaskRecord } from '../domain/records.js';
import { hasReceiptMarker } from '../domain/marker.js';
import { isGiteaError, type GiteaClient, type GiteaComment } from '../gitea/gitea-client.js';
import type { ActorRuntime, TransitionNotice } from '../runtime/actor-runtime.js';
import type { Store } from '../store/types.js';
import { TASK_KIND } from '../tasks/task-actor.js';
import { DEFAULT_LOCALE, type Locale } from '../messages/catalogue.js';
import { bodyHashOf, pendingReceiptRecord, receiptCommentKey } from './receipt-record.js';
import {
  FAILURE_RECEIPT_STATES,
  failureReceiptText,
  isFailureReceiptState,
  NOT_PUBLISHED_NOTICE_STATE,
  notPublishedReceiptText,
  receivedReceiptText,
} from './receipt-text.js';
import { refusalReceiptText, type QuotaNotice } from './limit-texts.js';
import { isBudgetCode } from '../usage/usage-accounting.js';
import { coalescedPass } from './coalesced-pass.js';

export type OutboxLogger = (msg: string, fields: Record<string, unknown>) => void;

export interface ReceiptOutboxOptions {
  store: Store;
  runtime: ActorRuntime;
  gitea: GiteaClient;
  botLogin: string;
  logger?: OutboxLogger;
  now?: () => Date;
  /** Wait before each retry of a transient failure; its length bounds the retries. */
  retryDelaysMs?: readonly number[];
  /**
   * How far before a row's creation to look for an earlier attempt's comment. Gitea filters on whole
   * seconds of its own clock; a wide window only lists more comments, the marker does the matching.
   */
  lookbackMs?: number;
  /** The language of the receipt texts (CCWEB_LOCALE); default zh. */
  locale?: Locale;
}

export interface ReceiptOutbox {
  /** Subscribes to task transitions, creates missing failure receipts, and starts sending. */
  start(): Promise<void>;
  /** Stops scheduling; a send already in flight finishes. */
  stop(): void;
  /** Asks for a pass over pending rows (coalesced: any number of kicks → one worker). */
  kick(): void;
  /** Resolves when no row is pending any more (sent or failed), waiting out backoffs. */
  drain(): Promise<void>;
}

export const DEFAULT_RECEIPT_RETRY_DELAYS_MS: readonly number[] = [2_000, 10_000, 60_000, 300_000];
const DEFAULT_LOOKBACK_MS = 5 * 60_000;

/** Gitea answered, and asking again will not change the answer. */
function isPermanent(error: unknown): boolean {
  if (!isGiteaError(error)) return false;
  return ['gitea_unauthorized', 'gitea_forbidden', 'gitea_not_found', 'gitea_locked', 'gitea_bad_request'].includes(error.code);
}

function errorCodeOf(error: unknown): string {
  return isGiteaError(error) ? error.code : 'receipt_send_error';
}

function errorMessageOf(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).slice(0, 200);
}

function stateOfKey(rec: CommentRecord): string {
  return rec.commentKey.slice(`${rec.taskId}:status:`.length);
}

export function createReceiptOutbox(options: ReceiptOutboxOptions): ReceiptOutbox {
  const { store, runtime, gitea } = options;
  const botLogin = options.botLogin.toLowerCase();
  const now = options.now ?? (() => new Date());
  const log: OutboxLogger = options.logger ?? (() => undefined);
  const retryDelays = options.retryDelaysMs ?? DEFAULT_RECEIPT_RETRY_DELAYS_MS;
  const lookbackMs = options.lookbackMs ?? DEFAULT_LOOKBACK_MS;
  const locale = options.locale ?? DEFAULT_LOCALE;

  /** Transient failures of this process's attempts, per commentKey. */
  const backoff = new Map<string, { failures: number; nextAt: number }>();
  const pendingEnsures = new Set<Promise<unknown>>();
  const timers = new Set<NodeJS.Timeout>();
  let unsubscribe: (() => void) | null = null;
  let stopped = false;

  function pendingRows(): CommentRecord[] {
    return store.list<CommentRecord>('comments', (r) => r.kind === 'status' && r.status === 'pending');
  }

  /** A failure receipt waits for the same task's `received` receipt, so they appear in order. */
  function blockedByReceived(rec: CommentRecord): boolean {
    if (stateOfKey(rec) === 'received') return false;
    const received = store.get<CommentRecord>('comments', receiptCommentKey(rec.taskId, 'received'));
    return received?.status === 'pending';
  }

  function track(p: Promise<unknown>): void {
    pendingEnsures.add(p);
    void p.finally(() => pendingEnsures.delete(p)).catch(() => undefined);
  }

  async function ensureFailureReceipt(taskId: string, state: string): Promise<boolean> {
    const key = receiptCommentKey(taskId, state);
    return store.transact((tx) => {
      if (tx.get('comments', key)) return false;
      const task = tx.get<TaskRecord>('tasks', taskId);
      if (!task) return false;
      // A task stopped by one of its own limits is told by an edit of its receipt (receipt-notice.ts):
      // one comment per task, not a second one.
      if (state === 'failed' && isBudgetCode(task.errorCode)) return false;
      tx.insert('comments', key, pendingReceiptRecord(task, state, now()));
      return true;
    });
  }

  function onTransition(n: TransitionNotice): void {
    if (n.kind !== TASK_KIND || stopped) return;
    if (n.toState === 'queued') {
      kick();
      return;
    }
    // Out of publishing: a notice the publisher may have queued (delivery off); a failure is handled below.
    if (n.fromState === 'publishing') kick();
    if (!isFailureReceiptState(n.toState)) return;
    const taskId = (n.context as { taskId?: string } | null)?.taskId ?? n.taskId;
    if (!taskId) return;
    const state = n.toState;
    track(
      ensureFailureReceipt(taskId, state).then(
        () => kick(),
        (err: unknown) => log('failure receipt not recorded', { taskId, state, error: errorMessageOf(err) }),
      ),
    );
  }

  function bodyFor(task: TaskRecord, rec: CommentRecord): string {
    const state = stateOfKey(rec);
    const text = isFailureReceiptState(state)
      ? failureReceiptText(task, state, locale)
      : state === 'refused' && rec['quota']
        ? refusalReceiptText(task, rec['quota'] as QuotaNotice, locale)
        : state === NOT_PUBLISHED_NOTICE_STATE
          ? notPublishedReceiptText(task, locale)
          : receivedReceiptText(task, locale);
    return `${text}\n\n${rec.marker}`;
  }

  async function findExisting(task: TaskRecord, rec: CommentRecord): Promise<GiteaComment | undefined> {
    const since = new Date(Date.parse(rec.createdAt) - lookbackMs);
    const list = await gitea.listIssueComments(task.owner, task.repo, task.resource.number, { since });
    return list.find((c) => c.user.login.toLowerCase() === botLogin && hasReceiptMarker(c.body, rec.commentKey));
  }

  async function markFailed(rec: CommentRecord, errorCode: string, metadata: Record<string, unknown>): Promise<void> {
    await store.transact((tx) => {
      const cur = tx.get<CommentRecord>('comments', rec.commentKey);
      if (!cur || cur.status !== 'pending') return;
      tx.put('comments', rec.commentKey, { ...cur, status: 'failed', errorCode, updatedAt: now().toISOString() });
      tx.appendAudit({
        level: 'alert',
        action: 'receipt.failed',
        actor: 'system',
        taskId: rec.taskId,
        errorCode,
        metadata: { commentKey: rec.commentKey, ...metadata },
      });
    });
    backoff.delete(rec.commentKey);
    log('receipt failed', { taskId: rec.taskId, commentKey: rec.commentKey, errorCode });
  }

  async function markSent(rec: CommentRecord, commentId: number, action: string, bodyHash: string | null): Promise<void> {
    await store.transact((tx) => {
      const cur = tx.get<CommentRecord>('comments', rec.commentKey);
      if (!cur) return;
      tx.put('comments', rec.commentKey, {
        ...cur,
        status: 'sent',
        commentId,
        errorCode: null,
        bodyHash: bodyHash ?? cur.bodyHash,
        updatedAt: now().toISOString(),
      });
      tx.appendAudit({
        action,
        actor: 'system',
        taskId: rec.taskId,
        commentId,
        metadata: { commentKey: rec.commentKey, ok: true },
      });
    });
    backoff.delete(rec.commentKey);
    log('receipt sent', { taskId: rec.taskId, commentKey: rec.commentKey, commentId });
  }

  async function failedAttempt(rec: CommentRecord, error: unknown, step: 'lookup' | 'send'): Promise<void> {
    const errorCode = errorCodeOf(error);
    if (isPermanent(error)) {
      await markFailed(rec, errorCode, { step, status: isGiteaError(error) ? error.status ?? null : null });
      return;
    }
    const prev = backoff.get(rec.commentKey)?.failures ?? 0;
    const failures = prev + 1;
    if (failures > retryDelays.length) {
      await markFailed(rec, errorCode, { step, exhausted: true, attempts: failures });
      return;
    }
    const delay = retryDelays[failures - 1]!;
    backoff.set(rec.commentKey, { failures, nextAt: Date.now() + delay });
    log('receipt attempt failed, will retry', { taskId: rec.taskId, commentKey: rec.commentKey, errorCode, delay });
    const timer = setTimeout(() => {
      timers.delete(timer);
      kick();
    }, delay);
    timer.unref();
    timers.add(timer);
  }

  async function sendOne(rec: CommentRecord): Promise<void> {
    const task = store.get<TaskRecord>('tasks', rec.taskId);
    if (!task) {
      await markFailed(rec, 'task_missing', {});
      return;
    }
    const key = rec.commentKey;
    const triedBefore = store
      .audit({ taskId: rec.taskId })
      .some((a) => a.action === 'receipt.send_intent' && a.metadata?.commentKey === key);
    if (triedBefore) {
      // An earlier attempt may have landed even though its result was never written or was an error.
      let found: GiteaComment | undefined;
      try {
        found = await findExisting(task, rec);
      } catch (error) {
        await store.transact((tx) =>
          tx.appendAudit({
            action: 'receipt.lookup_result',
            actor: 'system',
            taskId: rec.taskId,
            errorCode: errorCodeOf(error),
            metadata: { commentKey: key, ok: false, message: errorMessageOf(error) },
          }),
        );
        await failedAttempt(rec, error, 'lookup');
        return;
      }
      if (found) {
        await markSent(rec, found.id, 'receipt.adopted', bodyHashOf(found.body));
        return;
      }
    }

    const body = bodyFor(task, rec);
    const bodyHash = bodyHashOf(body);
    const attempt = (backoff.get(key)?.failures ?? 0) + 1;
    const proceed = await store.transact((tx) => {
      const cur = tx.get<CommentRecord>('comments', key);
      if (!cur || cur.status !== 'pending') return false;
      tx.put('comments', key, { ...cur, bodyHash, updatedAt: now().toISOString() });
      tx.appendAudit({
        action: 'receipt.send_intent',
        actor: 'system',
        taskId: rec.taskId,
        metadata: { commentKey: key, attempt, bodyHash, resourceKey: rec.resourceKey },
      });
      return true;
    });
    if (!proceed || stopped) return;

    let posted: GiteaComment;
    try {
      posted = await gitea.createIssueComment(task.owner, task.repo, task.resource.number, body);
    } catch (error) {
      await store.transact((tx) =>
        tx.appendAudit({
          action: 'receipt.send_result',
          actor: 'system',
          taskId: rec.taskId,
          errorCode: errorCodeOf(error),
          metadata: {
            commentKey: key,
            ok: false,
            status: isGiteaError(error) ? error.status ?? null : null,
            answered: isGiteaError(error) ? error.answered : false,
            message: errorMessageOf(error),
          },
        }),
      );
      await failedAttempt(rec, error, 'send');
      return;
    }
    await markSent(rec, posted.id, 'receipt.send_result', bodyHash);
  }

  async function pass(): Promise<void> {
    for (const candidate of pendingRows()) {
      if (stopped) return;
      // Re-read: an earlier row of this pass may have changed what this one waits for.
      const rec = store.get<CommentRecord>('comments', candidate.commentKey);
      if (!rec || rec.status !== 'pending') continue;
      const b = backoff.get(rec.commentKey);
      if (b && b.nextAt > Date.now()) continue;
      if (blockedByReceived(rec)) continue;
      try {
        await sendOne(rec);
      } catch (error) {
        // Store trouble: leave the row pending; the next kick (or restart) tries again.
        log('receipt pass error', { commentKey: rec.commentKey, error: errorMessageOf(error) });
        await failedAttempt(rec, error, 'send').catch(() => undefined);
      }
    }
  }

  const passes = coalescedPass(pass, () => stopped);
  const kick = (): void => passes.kick();

  return {
    async start() {
      stopped = false;
      unsubscribe ??= runtime.onTransition(onTransition);
      // Tasks that ended while no outbox was listening (e.g. before a restart) still get their receipt.
      for (const state of FAILURE_RECEIPT_STATES) {
        for (const task of store.byIndex<TaskRecord>('tasks', 'state', state)) {
          await ensureFailureReceipt(task.taskId, state);
        }
      }
      kick();
    },
    stop() {
      stopped = true;
      unsubscribe?.();
      unsubscribe = null;
      for (const t of timers) clearTimeout(t);
      timers.clear();
    },
    kick,
    async drain() {
      for (;;) {
        if (pendingEnsures.size > 0) {
          await Promise.allSettled([...pendingEnsures]);
          continue;
        }
        if (passes.running) {
          await passes.running;
          continue;
        }
        const pending = pendingRows();
        if (stopped || pending.length === 0) return;
        const nextAt = Math.min(...pending.map((r) => backoff.get(r.commentKey)?.nextAt ?? 0));
        const wait = nextAt - Date.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        kick();
      }
    },
  };
}
