// The review handler: a review submitted on a pull request (approved, commented, changes requested).
// A review delivery names neither the review nor its line comments: both are read from Gitea
// (review-lookup.ts), then each task they make (review-tasks.ts) is written like an accepted comment.
import { INSTANCE_ID, type NormalizedComment } from '../webhook/normalize-comment.js';
import { foreignRepositoryOrigin } from '../webhook/repository-origin.js';
import { normalizeReview, reviewEventType, type NormalizedReview } from '../webhook/review-event.js';
import type { RepositoryRecord } from '../domain/records.js';
import type { Tx } from '../store/types.js';
import { resolveRepository } from './canonical-repository.js';
import { sha256Hex } from './confirm-comment.js';
import type { IntakeHandler } from './intake-handler.js';
import type { IntakeKit, Waiting } from './intake-kit.js';
import type { IntakeRequest } from './intake-options.js';
import type { IntakeResponse } from './intake-response.js';
import type { Subject } from './intake-types.js';
import { PENDING_INTAKE, reviewPendingKey, type PendingIntakeRecord } from './pending-intake.js';
import { lookUpReview, type ReviewLookupDeps, type ReviewReader, type ReviewVerdict } from './review-lookup.js';

/** The review in the shape repository resolution and the origin check take (no comment of its own yet). */
function reviewAsComment(r: NormalizedReview): NormalizedComment {
  return {
    instanceId: INSTANCE_ID,
    deliveryId: r.deliveryId,
    deliveryKey: r.deliveryKey,
    eventType: 'pull_request_comment',
    action: r.action,
    repo: r.repo,
    repoKey: r.repoKey,
    resource: r.resource,
    resourceKey: r.resourceKey,
    comment: { id: 0, body: r.content, createdAt: '', updatedAt: '', htmlUrl: '' },
    actor: r.actor,
    refs: r.refs,
  };
}

export function createReviewHandler(kit: IntakeKit, reader: ReviewReader): IntakeHandler {
  const { options, store, permissionTimeoutMs, commit, waitForGitea, refuseUnconfirmed, registeredName, authorize, invalidPayload, refuseForeignOrigin } = kit;
  const { botLogin } = options;
  const reviewDeps: ReviewLookupDeps = {
    reader: () => reader,
    botLogin,
    timeoutMs: permissionTimeoutMs,
    authorize: (c) => authorize(c),
    requestChangesStartsTask: async (c) => ((await resolveRepository(store, c)).records[0] as RepositoryRecord | undefined)?.reviewTriggers?.requestChanges === true,
  };

  /**
   * A review delivery: the review and its line comments read back from Gitea, then each task
   * they make (review-tasks.ts) written like an accepted comment, under its own delivery key part (one
   * delivery may make several tasks) and its own trigger (a Replay is a duplicate). A lookup Gitea
   * cannot answer now (5xx, a timeout, Gitea down, the bot's token refused) leaves the delivery waiting
   * in `pending_intake` as a comment does (202 `pending_confirmation`), asked again by the retry loop; a
   * clear "no" (404, a review that does not match) refuses it.
   */
  async function handle(request: IntakeRequest, s: Subject, json: Buffer): Promise<IntakeResponse> {
    const normalized = normalizeReview(request.headers, json, { botLogin });
    if (!normalized.ok) return invalidPayload(request.headers, normalized.issues);
    const r0 = normalized.value;
    s.eventType = r0.eventType;
    const base = reviewAsComment(r0);
    const foreign = options.repositoryHosts ? foreignRepositoryOrigin(r0.repo, options.repositoryHosts) : null;
    if (foreign !== null) return refuseForeignOrigin(s.deliveryId, base, foreign);
    if (r0.actor.isBot) return (await commit(s, { kind: 'ignored', reason: 'bot_self_comment' }))!;
    const { comment: c, repoMismatch } = await registeredName(await resolveRepository(store, base));
    const r: NormalizedReview = { ...r0, repo: c.repo, repoKey: c.repoKey, resourceKey: c.resourceKey };
    const waiting: Waiting = { bodySha256: sha256Hex(r0.content), command: 'task', source: request.remoteAddress ?? null };
    const key = reviewPendingKey(c.repoKey, s.hash);
    const verdict: ReviewVerdict = repoMismatch ? { kind: 'refused', reasons: ['repository'] } : await lookUpReview(reviewDeps, r, c, waiting.bodySha256);
    return settleReview(s, key, c, r, waiting, verdict, false);
  }

  /** Writes what a review verdict means for this delivery: refused, ignored, still waiting (under `key`), or its tasks. */
  async function settleReview(s: Subject, key: string, c: NormalizedComment, r: NormalizedReview, w: Waiting, verdict: ReviewVerdict, retrying: boolean): Promise<IntakeResponse> {
    const dropPending = async (tx: Tx) => {
      if ((await tx.get(PENDING_INTAKE, key)) !== undefined) await tx.delete(PENDING_INTAKE, key);
    };
    if (verdict.kind === 'refused') return refuseUnconfirmed(s, c, w, verdict.reasons, dropPending);
    if (verdict.kind === 'undecided') return waitForGitea(s, key, c, w, verdict.error, { review: r, retrying });
    if (verdict.kind === 'ignored') return (await commit({ ...s, comment: c }, { kind: 'ignored', reason: verdict.reason }, dropPending))!;
    const answers: IntakeResponse[] = [];
    for (const item of verdict.items) {
      const part: Subject = { ...s, deliveryKey: `${s.deliveryKey}:${item.part}`, comment: { ...item.comment, deliveryKey: `${s.deliveryKey}:${item.part}` }, triggerKey: item.triggerKey };
      answers.push((await commit(part, verdict.plan, dropPending))!);
    }
    const first = answers[0]!;
    return answers.length === 1 ? first : { status: first.status, body: { ...first.body, taskIds: answers.map((a) => a.body['taskId'] ?? null) } };
  }

  /** A waiting review delivery: its review looked up again; its tasks carry their own triggers. */
  async function retry(r: PendingIntakeRecord, subject: Subject, w: Waiting): Promise<void> {
    const review = r.review!;
    await settleReview({ ...subject, triggerKey: null }, r.key, r.comment, review, w, await lookUpReview(reviewDeps, review, r.comment, r.bodySha256), true);
  }

  return {
    takes: (headers) => reviewEventType(headers) !== null,
    handle,
    owns: (record) => record.review !== undefined,
    retry,
  };
}
