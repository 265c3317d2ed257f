// The mention handler: a comment on an issue or pull request that names the bot (`@bot <request>`,
// `@bot stop`). The comment is read back from Gitea and its author's permission asked, in parallel;
// Gitea's answer decides (a task, a stop, a reader's refusal), contradicts (refused), or is not there
// yet (the delivery waits and is asked again).
import { classifyComment, classifyEvent } from '../webhook/classify.js';
import type { WebhookHeaders } from '../webhook/headers.js';
import { commentTriggerKey, normalizeComment, type NormalizedComment } from '../webhook/normalize-comment.js';
import { foreignRepositoryOrigin } from '../webhook/repository-origin.js';
import type { AuthorizeResult } from '../webhook/authorize-actor.js';
import type { Tx } from '../store/types.js';
import { resolveRepository } from './canonical-repository.js';
import { compareWithGitea, describeLookupError, isClearNo, sha256Hex, type GiteaCommentFacts, type MismatchField } from './confirm-comment.js';
import type { IntakeHandler } from './intake-handler.js';
import type { IntakeKit, Waiting } from './intake-kit.js';
import type { IntakeRequest } from './intake-options.js';
import type { IntakeResponse } from './intake-response.js';
import type { Plan, Subject } from './intake-types.js';
import { PENDING_INTAKE, type PendingIntakeRecord } from './pending-intake.js';
import { asLineReply, type GiteaReviewCommentFacts } from './review-tasks.js';
import { withTimeout } from './with-timeout.js';

/** What Gitea said about a comment, both lookups together. */
type Verdict =
  | { kind: 'refused'; reasons: Array<MismatchField | 'not_found' | 'repository'> }
  | { kind: 'undecided'; error: string }
  | { kind: 'decided'; auth: AuthorizeResult; body: string; line?: GiteaReviewCommentFacts };

export function createMentionHandler(kit: IntakeKit): IntakeHandler {
  const { options, store, permissionTimeoutMs, commit, waitForGitea, refuseUnconfirmed, registeredName, authorize, knownOutcome, invalidPayload, refuseForeignOrigin } = kit;
  const { botLogin } = options;

  async function handle(request: IntakeRequest, subject: Subject, json: Buffer): Promise<IntakeResponse> {
    const { headers } = request;
    const normalized = normalizeComment(headers, json, { botLogin });
    if (!normalized.ok) return invalidPayload(headers, normalized.issues);
    const foreign = options.repositoryHosts ? foreignRepositoryOrigin(normalized.value.repo, options.repositoryHosts) : null;
    if (foreign !== null) return refuseForeignOrigin(subject.deliveryId, normalized.value, foreign);
    subject.comment = normalized.value;
    subject.eventType = normalized.value.eventType;

    const decision = classifyComment(normalized.value, botLogin);
    if (decision.outcome === 'ignored') {
      // Ignored comments leave no trigger: an edit or a mention-less comment never becomes a task.
      // (Most comments end here: they are recorded as the payload named them, nothing is looked up.)
      return (await commit(subject, { kind: 'ignored', reason: decision.reason }))!;
    }
    // Names compare case-insensitively, as on Gitea: from here on the comment names its repository
    // as the store does (the write transaction resolves it again, finally).
    const { comment: c, repoMismatch } = await registeredName(await resolveRepository(store, normalized.value));
    subject.comment = c;
    subject.triggerKey = commentTriggerKey(c);
    const payloadTriggerKey = commentTriggerKey(normalized.value);
    if (payloadTriggerKey !== subject.triggerKey) subject.payloadTriggerKey = payloadTriggerKey;
    if (await knownOutcome(store, subject)) {
      const known = await commit(subject, { kind: 'probe' });
      if (known !== null) return known;
    }

    // Nothing acts on the payload's word: the comment as Gitea has it, and the author's permission.
    // (A Replay of a comment still waiting for Gitea comes here too, and is decided now if it can be.)
    const waiting: Waiting = {
      bodySha256: sha256Hex(c.comment.body),
      command: decision.command.kind === 'stop' ? 'stop' : 'task',
      source: request.remoteAddress ?? null,
    };
    const verdict = await lookUp(c, waiting.bodySha256, repoMismatch);
    return settle(subject, c, waiting, verdict);
  }

  /** Both lookups at once (the acknowledgement waits for the slower one, not for their sum). */
  async function lookUp(c: NormalizedComment, bodySha256: string, repoMismatch: boolean): Promise<Verdict> {
    const [found, auth] = await Promise.all([
      withTimeout(options.commentOnGitea(c.repo.owner, c.repo.name, c.comment.id), permissionTimeoutMs, 'comment lookup').then(
        (facts) => ({ ok: true as const, facts }),
        (error: unknown) => ({ ok: false as const, error }),
      ),
      authorize(c),
    ]);
    // Gitea 1.26.3 answers `GET …/issues/comments/{id}` of a reply in a line thread (a code comment) with
    // 204 and no body: such a comment is read from its thread's review instead (review-on-gitea.ts).
    const line = !found.ok && !isClearNo(found.error) ? await lineOfReply(c) : null;
    const facts: GiteaCommentFacts | null = found.ok ? found.facts : line === null ? null : { id: line.id, body: line.body, user: line.user, issueUrl: '', pullRequestUrl: line.htmlUrl, createdAt: line.createdAt, updatedAt: line.updatedAt };
    if (facts === null) {
      const error = (found as { error: unknown }).error;
      return isClearNo(error) ? { kind: 'refused', reasons: ['not_found'] } : { kind: 'undecided', error: `comment lookup: ${describeLookupError(error)}` };
    }
    const compared = compareWithGitea({ comment: c, bodySha256 }, facts);
    const reasons: Array<MismatchField | 'repository'> = compared.confirmed ? [] : [...compared.mismatch];
    if (repoMismatch) reasons.push('repository');
    if (reasons.length > 0) return { kind: 'refused', reasons };
    if (!auth.allowed && auth.reason === 'permission_check_failed') {
      return { kind: 'undecided', error: `permission lookup: ${describeLookupError(auth.error)}` };
    }
    return { kind: 'decided', auth, body: facts.body, ...(line !== null ? { line } : {}) };
  }

  /** A PR comment as a line-thread reply (its thread's review comment), or null: not one, or not readable now. */
  async function lineOfReply(c: NormalizedComment): Promise<GiteaReviewCommentFacts | null> {
    const lineOf = options.reviewOnGitea?.lineOf;
    if (lineOf === undefined || c.resource.kind !== 'pull_request') return null;
    const line = await withTimeout(lineOf(c.repo.owner, c.repo.name, c.resource.number, c.comment.id), permissionTimeoutMs, 'line thread lookup').catch(() => null);
    return line !== null && line.id === c.comment.id ? line : null;
  }

  /** Writes what the verdict means for this delivery: refused, still waiting, or the decided outcome. */
  async function settle(s: Subject, c: NormalizedComment, w: Waiting, verdict: Verdict, retrying = false): Promise<IntakeResponse> {
    const key = s.triggerKey!;
    const dropPending = async (tx: Tx) => {
      if ((await tx.get(PENDING_INTAKE, key)) !== undefined) await tx.delete(PENDING_INTAKE, key);
    };
    if (verdict.kind === 'refused') return refuseUnconfirmed(s, c, w, verdict.reasons, dropPending);
    if (verdict.kind === 'undecided') return waitForGitea(s, key, c, w, verdict.error, { retrying });
    const plan: Plan = !verdict.auth.allowed
      ? { kind: 'reject', reason: verdict.auth.reason, reader: 'readerOnly' in verdict.auth && verdict.auth.readerOnly === true }
      : w.command === 'stop'
        ? { kind: 'stop' }
        : { kind: 'accept' };
    const confirmed: NormalizedComment = { ...c, comment: { ...c.comment, body: verdict.body } };
    // A reply in a line thread, confirmed through its thread: the agent gets the line's context too.
    const decided = verdict.line !== undefined ? asLineReply(confirmed, verdict.line) : confirmed;
    return (await commit({ ...s, comment: decided }, plan, dropPending))!;
  }

  /** One waiting comment asked about again; the outcome is written under the delivery it came in. */
  async function retry(r: PendingIntakeRecord, subject: Subject, w: Waiting): Promise<void> {
    await settle(subject, r.comment, w, await lookUp(r.comment, r.bodySha256, false), true);
  }

  return {
    takes: (headers: WebhookHeaders) => classifyEvent(headers).ok,
    handle,
    owns: (record) => record.review === undefined,
    retry,
  };
}
