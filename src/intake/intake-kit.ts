// What every intake handler shares (intake.ts dispatches to them): the one write transaction of a
// delivery's outcome (`commit`), a delivery left waiting for Gitea (`waitForGitea`), a payload Gitea
// contradicts (`refuseUnconfirmed`), the author's permission and the repository's registered name.
import type { TaskEvent } from '../../machines/task-lifecycle.js';
import { anyDisabled, sameRepoKey } from '../domain/repository-identity.js';
import { workspacePathFor } from '../domain/workspace-path.js';
import { UniqueViolationError, type Store, type Tx } from '../store/types.js';
import { taskActorId } from '../tasks/task-actor.js';
import { authorizeActor, type AuthorizeResult } from '../webhook/authorize-actor.js';
import { getHeader, type WebhookHeaders } from '../webhook/headers.js';
import { INSTANCE_ID, isSafeName, isValidDeliveryId, type NormalizedComment } from '../webhook/normalize-comment.js';
import type { ForeignOrigin } from '../webhook/repository-origin.js';
import type { NormalizedReview } from '../webhook/review-event.js';
import type { DeliveryRecord } from '../domain/records.js';
import { canonicalComment, resolveRepository, type ResolvedComment } from './canonical-repository.js';
import { DEFAULT_MAX_PENDING, DEFAULT_RETRY_POLICY, PENDING_INTAKE, admit, afterFailure, pendingRecord, type PendingIntakeRecord, type RetryPolicy } from './pending-intake.js';
import { DEFAULT_DELIVERY_RETENTION_MS, deliveryRecord } from './intake-records.js';
import { FOREIGN_REPOSITORY_ORIGIN, INVALID_PAYLOAD, PENDING_BACKLOG_FULL, pendingConfirmation, rejected, type IntakeResponse } from './intake-response.js';
import type { IntakeOptions } from './intake-options.js';
import type { Outcome, Plan, Subject } from './intake-types.js';
import { createSecurityEvents, safeValue } from './security-events.js';
import { sendStops } from './stop-tasks.js';
import { withTimeout } from './with-timeout.js';
import { writeOutcome, type WriteContext } from './write-outcome.js';

/** The reason (delivery, answer, security event) of a payload Gitea contradicts. */
export const COMMENT_NOT_CONFIRMED = 'comment_not_confirmed';

/** What a delivery that waits for Gitea keeps of the comment: to compare it again, and what it asks for. */
export interface Waiting {
  bodySha256: string;
  command: 'task' | 'stop';
  source: string | null;
}

interface Reader {
  get: Store['get'];
  list: Store['list'];
}

export type IntakeKit = ReturnType<typeof createIntakeKit>;

export function createIntakeKit(options: IntakeOptions) {
  const { store, runtime } = options;
  const now = options.now ?? (() => new Date());
  const retentionMs = options.deliveryRetentionMs ?? DEFAULT_DELIVERY_RETENTION_MS;
  const permissionTimeoutMs = options.permissionTimeoutMs ?? 3000;
  const retryPolicy: RetryPolicy = { ...DEFAULT_RETRY_POLICY, ...options.pendingRetry };
  const maxPending = options.maxPending ?? DEFAULT_MAX_PENDING;
  const writeContext: WriteContext = {
    runtime,
    now,
    retentionMs,
    securityEventRetentionMs: options.securityEventRetentionMs ?? 30 * 24 * 60 * 60 * 1000,
    hostRef: options.mcpHostRef ?? 'gitea-main',
    quota: options.quota,
    nodeId: options.nodeId,
  };

  /**
   * Gitea did not decide (a passing failure): the delivery waits under `key` and is asked about again
   * (pending-intake.ts); 202 `pending_confirmation`. A retry (`retrying`) whose record is gone was
   * decided meanwhile (a Replay): nothing waits again.
   */
  async function waitForGitea(s: Subject, key: string, c: NormalizedComment, w: Waiting, error: string, extra: { review?: NormalizedReview; retrying?: boolean } = {}): Promise<IntakeResponse> {
    const at = now();
    const answer = await store.transact(async (tx): Promise<IntakeResponse | null> => {
      // Decided meanwhile (a Replay, or the loop): that outcome answers.
      if ((await tx.get('comment_triggers', key)) !== undefined) return null;
      const prior = await tx.get<PendingIntakeRecord>(PENDING_INTAKE, key);
      if (prior !== undefined) {
        const next = prior.state === 'gave_up' ? afterFailure({ ...prior, attempts: Math.max(0, retryPolicy.maxAttempts - 2) }, at, error, retryPolicy) : afterFailure(prior, at, error, retryPolicy);
        await tx.put(PENDING_INTAKE, key, next);
        return pendingConfirmation(s.deliveryId, next);
      }
      if (extra.retrying === true) return null;
      const room = admit(await tx.list<PendingIntakeRecord>(PENDING_INTAKE), maxPending);
      if (!room.ok) return PENDING_BACKLOG_FULL;
      if (room.evict !== null) await tx.delete(PENDING_INTAKE, room.evict);
      const record = pendingRecord(
        {
          key,
          deliveryKey: s.deliveryKey,
          deliveryId: s.deliveryId,
          eventType: s.eventType,
          payloadHash: s.hash,
          receivedAt: s.receivedAt,
          comment: c,
          ...(extra.review !== undefined ? { review: extra.review } : {}),
          bodySha256: w.bodySha256,
          command: w.command,
          source: w.source,
          error,
        },
        at,
        retryPolicy,
      );
      await tx.put(PENDING_INTAKE, key, record);
      return pendingConfirmation(s.deliveryId, record);
    });
    if (answer === null) return (await commit(s, { kind: 'probe' })) ?? PENDING_BACKLOG_FULL;
    if (answer !== PENDING_BACKLOG_FULL) {
      const what = extra.review !== undefined ? 'a review' : 'a comment';
      options.logger?.warn({ deliveryId: s.deliveryId, commentId: c.comment.id, error }, `Gitea did not decide on ${what}: it waits and is asked again`);
    }
    return answer;
  }

  /**
   * A signed payload Gitea contradicts: one security event (counted per source and window), a
   * delivery record that answers its repeats, nothing else — no task, no trigger (the real comment,
   * if any, is still decided on its own), nothing posted.
   */
  async function refuseUnconfirmed(s: Subject, c: NormalizedComment, w: Waiting, reasons: string[], dropPending: (tx: Tx) => Promise<void>): Promise<IntakeResponse> {
    const response = rejected(COMMENT_NOT_CONFIRMED, null);
    await store.transact(async (tx) => {
      await dropPending(tx);
      if ((await tx.get('webhook_deliveries', s.deliveryKey)) !== undefined) return;
      await tx.insert<DeliveryRecord>('webhook_deliveries', s.deliveryKey, deliveryRecord({ deliveryKey: s.deliveryKey, deliveryId: s.deliveryId, eventType: s.eventType, receivedAt: s.receivedAt, retentionMs, normalized: true, taskId: null, status: 'rejected', reason: COMMENT_NOT_CONFIRMED, payloadHash: s.hash, response }), { archived: true });
    });
    await security.record(COMMENT_NOT_CONFIRMED, w.source ?? undefined, {
      deliveryId: safeValue(s.deliveryId),
      repoKey: safeValue(c.repoKey),
      resource: `${c.resource.kind}:${c.resource.number}`,
      commentId: c.comment.id,
      sender: safeValue(c.actor.login),
      mismatch: reasons.join(',').slice(0, 100),
    });
    options.logger?.warn({ deliveryId: s.deliveryId, repoKey: c.repoKey, commentId: c.comment.id, mismatch: reasons }, 'signed webhook does not match the comment on Gitea: refused');
    return response;
  }

  /**
   * A repository seen for the first time is registered under the name Gitea has for its id, when that
   * is the payload's name in another letter case. A name that differs otherwise (a rename, or an id
   * the payload made up) is left as the payload said: the id alone never moves a comment to another
   * repository's records.
   */
  async function registeredName(resolved: ResolvedComment): Promise<{ comment: NormalizedComment; repoMismatch: boolean }> {
    const c = resolved.comment;
    if (resolved.records.length > 0 || !options.repositoryName) return { comment: c, repoMismatch: false };
    const found = await withTimeout(options.repositoryName(c.repo.id), permissionTimeoutMs, 'repository lookup').catch(() => null);
    if (found === null) return { comment: c, repoMismatch: false };
    const repoKey = `${INSTANCE_ID}:${found.owner}/${found.name}`;
    // Another repository under this id: the payload's id is not its repository's.
    if (!sameRepoKey(repoKey, c.repoKey)) return { comment: c, repoMismatch: true };
    if (repoKey === c.repoKey || !isSafeName(found.owner) || !isSafeName(found.name)) return { comment: c, repoMismatch: false };
    return { comment: canonicalComment(c, { repoKey, owner: found.owner, name: found.name }), repoMismatch: false };
  }

  function authorize(c: NormalizedComment): Promise<AuthorizeResult> {
    return authorizeActor({
      login: c.actor.login,
      permissions: c.permissions,
      allowList: options.allowUsers,
      denyList: options.denyUsers,
      fetchPermission: (login) =>
        withTimeout(options.fetchPermission(c.repo.owner, c.repo.name, login), permissionTimeoutMs, 'permission lookup'),
    });
  }

  /**
   * True when a write would be decided by an existing record rather than by the plan (the delivery
   * itself was looked up just before). Only a shortcut: the transaction re-checks all of it.
   */
  async function knownOutcome(reader: Reader, s: Subject): Promise<boolean> {
    if (s.triggerKey !== null && (await reader.get('comment_triggers', s.triggerKey)) !== undefined) return true;
    if (s.payloadTriggerKey != null && (await reader.get('comment_triggers', s.payloadTriggerKey)) !== undefined) return true;
    return s.comment !== null && anyDisabled((await resolveRepository(reader, s.comment)).records);
  }

  /** `null` only for a probe that found nothing to decide (the caller then goes on). */
  async function commit(s: Subject, plan: Plan, alsoInTx?: (tx: Tx) => Promise<void>): Promise<IntakeResponse | null> {
    const c = s.comment;
    const workspacePath =
      c && plan.kind === 'accept' ? workspacePathFor(options.workspaceRoot, c.instanceId, c.repo.owner, c.repo.name) : '';
    const outcome = await retriedOnUniqueViolation(() =>
      store.transact(async (tx): Promise<Outcome> => {
        await alsoInTx?.(tx);
        return writeOutcome(writeContext, tx, s, plan, workspacePath);
      }),
    );
    if (outcome === null) return null;
    outcome.start?.();
    if (outcome.followUp !== undefined && c) {
      // The reply is recorded on the task (durable above); the task goes back to the queue and
      // resumes its thread. A crash between the two leaves the follow-up stored and the task
      // waiting: the next comment (or an operator) moves it on.
      // The delivery is accepted and durable whatever happens next: a failure here is logged, never a 500.
      await runtime
        .send(taskActorId(outcome.followUp), { type: 'USER_REPLIED' } satisfies TaskEvent, { by: `gitea:user:${c.actor.login}` })
        .catch((error: unknown) => options.logger?.warn({ taskId: outcome.followUp, err: error instanceof Error ? error.message : String(error) }, 'follow-up not re-queued'));
    }
    // A new task, or a stop's, a disabled repository's or a reader's one comment: the receipt outbox has a row to post.
    if (outcome.taskId !== undefined && (plan.kind === 'accept' || plan.kind === 'stop' || outcome.notice === true)) safely(() => options.onAccepted?.(outcome.taskId!, s.deliveryId));
    if (outcome.stop !== undefined && c) {
      const targets = outcome.stop;
      await sendStops(runtime, targets, `gitea:user:${c.actor.login}`).catch((error: unknown) =>
        options.logger?.warn({ err: error instanceof Error ? error.message : String(error) }, 'stop events not all sent'),
      );
      // Work in flight is stopped by its host (the executor); a task cancelled meanwhile is unaffected.
      safely(() => options.onStop?.(targets.map((t) => t.taskId)));
    }
    return outcome.response;
  }

  async function invalidPayload(headers: WebhookHeaders, issues: string): Promise<IntakeResponse> {
    const deliveryId = getHeader(headers, 'x-gitea-delivery')?.trim();
    await store.transact(async (tx) =>
      tx.appendAudit({
        action: 'webhook.invalid_payload',
        actor: 'gitea:webhook',
        deliveryId: deliveryId !== undefined && isValidDeliveryId(deliveryId) ? deliveryId : null,
        errorCode: 'invalid_payload',
        // Zod issues name fields and rules, never values.
        metadata: { issues: issues.slice(0, 1000) },
      }),
    );
    return INVALID_PAYLOAD;
  }

  async function refuseForeignOrigin(deliveryId: string, c: NormalizedComment, foreign: ForeignOrigin): Promise<IntakeResponse> {
    await store.transact(async (tx) =>
      tx.appendAudit({
        action: 'webhook.foreign_repository_origin',
        actor: `gitea:user:${c.actor.login}`,
        level: 'security',
        deliveryId,
        errorCode: 'foreign_repository_origin',
        metadata: { repoKey: c.repoKey, field: foreign.field, host: foreign.host },
      }),
    );
    options.logger?.warn({ deliveryId, repoKey: c.repoKey, field: foreign.field, host: foreign.host }, 'signed webhook names a repository URL on another host than CCWEB_GITEA_URL: refused');
    return FOREIGN_REPOSITORY_ORIGIN;
  }

  const security =
    options.securityEvents ?? createSecurityEvents({ store, ...(options.now ? { now: () => options.now!().getTime() } : {}), ...(options.logger ? { logger: options.logger } : {}) });

  function safely(fn: () => void): void {
    try {
      fn();
    } catch (error) {
      options.logger?.warn({ err: error instanceof Error ? error.message : String(error) }, 'intake callback failed');
    }
  }

  return {
    options,
    store,
    now,
    permissionTimeoutMs,
    security,
    commit,
    waitForGitea,
    refuseUnconfirmed,
    registeredName,
    authorize,
    knownOutcome,
    invalidPayload,
    refuseForeignOrigin,
  };
}

/**
 * Another node committed a row this transaction checked for and then inserted (the same delivery or
 * comment, on PostgreSQL, which reads committed rows only): the transaction is run again and finds it.
 * Gitea does not retry a delivery answered 503, so failing here would lose the mention.
 */
async function retriedOnUniqueViolation<T>(run: () => Promise<T>, attempts = 3): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (error) {
      if (!(error instanceof UniqueViolationError) || attempt >= attempts) throw error;
    }
  }
}
