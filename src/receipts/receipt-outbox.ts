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
import { BOT_COMMENT_SINCE_MARGIN_MS, listBotComments, threadOf } from '../gitea/bot-comments.js';
import type { GiteaClient, GiteaComment } from '../gitea/gitea-client.js';
import { DEFAULT_GITEA_TIMEOUT_MS } from '../gitea/gitea-transport.js';
import type { ActorRuntime, TransitionNotice } from '../runtime/actor-runtime.js';
import type { Store } from '../store/types.js';
import { EVERY_REPOSITORY, type RepositoryScope } from '../domain/repository-scope.js';
import { DEFAULT_LOCALE, type Locale } from '../messages/catalogue.js';
import { bodyHashOf, pendingReceiptRecord, receiptCommentKey } from './receipt-record.js';
import { FAILURE_RECEIPT_STATES } from './receipt-text.js';
import { getsFailureReceipt, reactionTo, receiptBody, triedBefore, waitsForReceived } from './receipt-decisions.js';
import { errorMessageOf, receiptRetryDecision, type ReceiptStep } from './receipt-retry.js';
import { auditFailedStep, markReceiptFailed, markReceiptSent, recordSendIntent } from './receipt-writes.js';
import { createCommentWorker } from './comment-worker.js';
import { actsForTask } from './acts-for-task.js';

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
  /**
   * The repositories this node sends receipts for: a row is sent only while its task's
   * repository is owned here (asked again for every row of every pass); a row whose task is gone,
   * by the node that leads. Default: every repository (one node).
   */
  scope?: Pick<RepositoryScope, 'owns' | 'leads'>;
  /** Told once a row's comment is on Gitea (posted or adopted): the progress worker can edit that receipt now. */
  onSent?: (taskId: string) => void;
  /**
   * This process, as a lease owner id (`<node>/<pid>/<startedAt>`, the scheduler's): written with each
   * send intent. Each node's own, so that another node's intent is told from an earlier process's.
   */
  processId: string;
  /** How long another node's send intent keeps this one from posting the row (DEFAULT_SEND_CLAIM_MS). */
  sendClaimMs?: number;
}

export interface ReceiptOutbox {
  /** Subscribes to task transitions, creates missing failure receipts, and starts sending. */
  start(): Promise<void>;
  /** Stops scheduling; a send already in flight finishes. */
  stop(): void;
  /** Asks for a pass over pending rows (coalesced: any number of kicks → one worker). */
  kick(): void;
  /**
   * Does the catch-up of `start()` again: failure receipts of tasks of the repositories owned here
   * that ended without one, then a pass. For a node that has just taken repositories over.
   */
  catchUp(): Promise<void>;
  /** Resolves when no row of this node's repositories is pending any more (sent or failed), waiting out backoffs. */
  drain(): Promise<void>;
}

export const DEFAULT_RECEIPT_RETRY_DELAYS_MS: readonly number[] = [2_000, 10_000, 60_000, 300_000];
/** Three times the longest a POST to Gitea can take (one attempt, never retried). */
export const DEFAULT_SEND_CLAIM_MS = 3 * DEFAULT_GITEA_TIMEOUT_MS;

/** Inserts the task's failure receipt row unless it exists or the task does not get one. */
async function ensureFailureReceipt(store: Store, taskId: string, state: string, at: Date): Promise<boolean> {
  const key = receiptCommentKey(taskId, state);
  return store.transact(async (tx) => {
    if (await tx.has('comments', key)) return false;
    const task = await tx.get<TaskRecord>('tasks', taskId);
    if (!task || !getsFailureReceipt(task, state)) return false;
    // Every node's catch-up may create this row at once.
    return tx.insertIfAbsent<CommentRecord>('comments', key, pendingReceiptRecord(task, state, at));
  });
}

/** The bot's comment an earlier attempt posted for this row, if Gitea has it. */
async function findPostedReceipt(gitea: GiteaClient, botLogin: string, task: TaskRecord, rec: CommentRecord, lookbackMs: number): Promise<GiteaComment | undefined> {
  const [found] = await listBotComments(gitea, {
    ...threadOf(task),
    botLogin,
    hasMarker: (body) => hasReceiptMarker(body, rec.commentKey),
    since: Date.parse(rec.createdAt),
    sinceMarginMs: lookbackMs,
  });
  return found;
}

export function createReceiptOutbox(options: ReceiptOutboxOptions): ReceiptOutbox {
  const { store, runtime, gitea } = options;
  const botLogin = options.botLogin.toLowerCase();
  const now = options.now ?? (() => new Date());
  const log: OutboxLogger = options.logger ?? (() => undefined);
  const retryDelays = options.retryDelaysMs ?? DEFAULT_RECEIPT_RETRY_DELAYS_MS;
  const lookbackMs = options.lookbackMs ?? BOT_COMMENT_SINCE_MARGIN_MS;
  const locale = options.locale ?? DEFAULT_LOCALE;
  const scope = options.scope ?? EVERY_REPOSITORY;
  const processId = options.processId;
  const sendClaimMs = options.sendClaimMs ?? DEFAULT_SEND_CLAIM_MS;

  /** Transient failures of this process's attempts, per commentKey. */
  const backoff = new Map<string, { failures: number; nextAt: number }>();
  const pendingEnsures = new Set<Promise<unknown>>();

  /** Whether this node sends the row now (no task: the leader marks it failed). */
  const sendsHere = (rec: CommentRecord): Promise<boolean> => actsForTask(store, scope, rec.taskId);

  async function pendingRows(): Promise<CommentRecord[]> {
    const pending = (await store.byIndex<CommentRecord>('comments', 'status', 'pending')).filter((r) => r.kind === 'status');
    const here: CommentRecord[] = [];
    for (const r of pending) if (await sendsHere(r)) here.push(r);
    return here;
  }

  function track(p: Promise<unknown>): void {
    pendingEnsures.add(p);
    void p.finally(() => pendingEnsures.delete(p)).catch(() => undefined);
  }

  function onTransition(n: TransitionNotice): void {
    if (worker.stopped) return;
    const reaction = reactionTo(n);
    if (reaction.kick) kick();
    if (!reaction.failureReceipt) return;
    const { taskId, state } = reaction.failureReceipt;
    track(
      ensureFailureReceipt(store, taskId, state, now()).then(
        () => kick(),
        (err: unknown) => log('failure receipt not recorded', { taskId, state, error: errorMessageOf(err) }),
      ),
    );
  }

  async function markFailed(rec: CommentRecord, errorCode: string, metadata: Record<string, unknown>): Promise<void> {
    await markReceiptFailed(store, rec, errorCode, metadata, now());
    backoff.delete(rec.commentKey);
    log('receipt failed', { taskId: rec.taskId, commentKey: rec.commentKey, errorCode });
  }

  async function markSent(rec: CommentRecord, commentId: number, action: string, bodyHash: string | null): Promise<void> {
    await markReceiptSent(store, rec, commentId, action, bodyHash, now());
    backoff.delete(rec.commentKey);
    log('receipt sent', { taskId: rec.taskId, commentKey: rec.commentKey, commentId });
    options.onSent?.(rec.taskId);
  }

  async function failedAttempt(rec: CommentRecord, error: unknown, step: ReceiptStep): Promise<void> {
    const decision = receiptRetryDecision(error, step, backoff.get(rec.commentKey)?.failures ?? 0, retryDelays);
    if (decision.kind === 'fail') {
      await markFailed(rec, decision.errorCode, decision.metadata);
      return;
    }
    const { failures, delayMs: delay, errorCode } = decision;
    backoff.set(rec.commentKey, { failures, nextAt: Date.now() + delay });
    log('receipt attempt failed, will retry', { taskId: rec.taskId, commentKey: rec.commentKey, errorCode, delay });
    worker.timers.schedule(delay);
  }

  /** An earlier attempt may have landed even though its result was never written or was an error: adopt it. */
  async function adoptEarlierAttempt(task: TaskRecord, rec: CommentRecord): Promise<'adopted' | 'absent' | 'failed'> {
    let found: GiteaComment | undefined;
    try {
      found = await findPostedReceipt(gitea, botLogin, task, rec, lookbackMs);
    } catch (error) {
      await auditFailedStep(store, rec, 'lookup', error);
      await failedAttempt(rec, error, 'lookup');
      return 'failed';
    }
    if (!found) return 'absent';
    await markSent(rec, found.id, 'receipt.adopted', bodyHashOf(found.body));
    return 'adopted';
  }

  async function sendOne(rec: CommentRecord): Promise<void> {
    const task = await store.get<TaskRecord>('tasks', rec.taskId);
    if (!task) {
      await markFailed(rec, 'task_missing', {});
      return;
    }
    // Another node's intent counts from here: a POST that landed before this look is found by it.
    // Both times on the clock every node shares (another node wrote its intent's).
    const sharedClock = () => (options.now ? Promise.resolve(now()) : store.clockMs().then((ms) => new Date(ms)));
    const lookedAt = await sharedClock();
    if (triedBefore(await store.audit({ taskId: rec.taskId }), rec.commentKey) && (await adoptEarlierAttempt(task, rec)) !== 'absent') return;

    const body = receiptBody(task, rec, locale);
    const bodyHash = bodyHashOf(body);
    const attempt = (backoff.get(rec.commentKey)?.failures ?? 0) + 1;
    const intent = await recordSendIntent(store, rec, { attempt, bodyHash, by: processId, claimMs: sendClaimMs, lookedAt }, await sharedClock());
    if (typeof intent === 'object') {
      // Another node's POST may still land: look again once it must have (the lookup adopts it).
      log('receipt left to the node that is sending it', { taskId: rec.taskId, commentKey: rec.commentKey, waitMs: intent.waitMs });
      backoff.set(rec.commentKey, { failures: backoff.get(rec.commentKey)?.failures ?? 0, nextAt: Date.now() + intent.waitMs });
      worker.timers.schedule(intent.waitMs);
      return;
    }
    if (intent === 'not_pending' || worker.stopped) return;

    let posted: GiteaComment;
    try {
      posted = await gitea.createIssueComment(task.owner, task.repo, task.resource.number, body);
    } catch (error) {
      await auditFailedStep(store, rec, 'send', error);
      await failedAttempt(rec, error, 'send');
      return;
    }
    await markSent(rec, posted.id, 'receipt.send_result', bodyHash);
  }

  async function pass(): Promise<void> {
    for (const candidate of await pendingRows()) {
      if (worker.stopped) return;
      // Re-read: an earlier row of this pass may have changed what this one waits for.
      const rec = await store.get<CommentRecord>('comments', candidate.commentKey);
      if (!rec || rec.status !== 'pending') continue;
      // Ownership moves while the pass runs (another node took the repository over): asked per row.
      if (!(await sendsHere(rec))) continue;
      const b = backoff.get(rec.commentKey);
      if (b && b.nextAt > Date.now()) continue;
      if (waitsForReceived(rec, await store.get<CommentRecord>('comments', receiptCommentKey(rec.taskId, 'received')))) continue;
      try {
        await sendOne(rec);
      } catch (error) {
        // Store trouble: leave the row pending; the next kick (or restart) tries again.
        log('receipt pass error', { commentKey: rec.commentKey, error: errorMessageOf(error) });
        await failedAttempt(rec, error, 'send').catch(() => undefined);
      }
    }
  }

  const worker = createCommentWorker(runtime, pass, onTransition, (err) => log('receipt pass failed; tried again shortly', { error: String(err) }));
  const kick = (): void => worker.kick();

  /** Tasks that ended while no outbox of their repository listened (e.g. before a restart) still get their receipt. */
  async function catchUp(): Promise<void> {
    for (const state of FAILURE_RECEIPT_STATES) {
      for (const task of await store.byIndex<TaskRecord>('tasks', 'state', state)) {
        if (!scope.owns(task.repoKey)) continue;
        await ensureFailureReceipt(store, task.taskId, state, now());
      }
    }
    kick();
  }

  return {
    async start() {
      worker.listen();
      await catchUp();
    },
    stop: () => worker.stop(),
    kick,
    catchUp,
    async drain() {
      for (;;) {
        if (pendingEnsures.size > 0) {
          await Promise.allSettled([...pendingEnsures]);
          continue;
        }
        if (worker.running) {
          await worker.running;
          continue;
        }
        const pending = await pendingRows();
        if (worker.stopped || pending.length === 0) return;
        const nextAt = Math.min(...pending.map((r) => backoff.get(r.commentKey)?.nextAt ?? 0));
        const wait = nextAt - Date.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        kick();
      }
    },
  };
}
