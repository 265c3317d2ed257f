/**
 * The verifier's read: lists the resource's comments since the turn started (src/gitea/bot-comments.ts)
 * and finds the bot's comment with exactly this attempt's marker. Intent and result are audited, and
 * each extra copy once (`reply.extra_comment`). A Gitea error is audited and thrown: the machine
 * turns it into `failed`, so no write ever follows a failed or unknown query.
 */
import type { QueryReplyInput } from '../../machines/reply-verifier.js';
import { hasMarker } from '../domain/marker.js';
import type { TaskRecord } from '../domain/records.js';
import { listBotComments, threadOf } from '../gitea/bot-comments.js';
import type { GiteaClient, GiteaComment } from '../gitea/gitea-client.js';
import type { AuditEvent, Store } from '../store/types.js';
import { replyMatchOf, type ReplyMatch } from './find-reply.js';
import { messageOf, verificationErrorCodeOf } from './verification-errors.js';
import { verifierActorId } from './verifier-keys.js';

export interface ReplyLookupDeps {
  store: Store;
  gitea: Pick<GiteaClient, 'listIssueComments'>;
  /** Subtracted from the turn's start for Gitea's `since` filter. */
  sinceMarginMs: number;
}

/** Extra copies not audited yet: `known` are the comment ids of this verifier's earlier `reply.extra_comment` events. */
export function unrecordedExtras(extras: readonly GiteaComment[], known: readonly Pick<AuditEvent, 'action' | 'commentId'>[]): GiteaComment[] {
  const seen = new Set(known.filter((a) => a.action === 'reply.extra_comment').map((a) => a.commentId));
  return extras.filter((c) => !seen.has(c.id));
}

/** Lists and matches for `task`; audits intent, result and any extra copies. Throws on a Gitea error. */
export async function lookUpReply(deps: ReplyLookupDeps, task: TaskRecord, input: QueryReplyInput, step: string): Promise<ReplyMatch> {
  const { store } = deps;
  const actorId = verifierActorId(input.turnKey);
  await store.transact((tx) =>
    tx.appendAudit({ action: 'reply.query_intent', actor: 'system', actorId, taskId: input.taskId, metadata: { turnKey: input.turnKey, step } }),
  );
  let match: ReplyMatch;
  try {
    const comments = await listBotComments(deps.gitea, {
      ...threadOf(task),
      botLogin: input.botLogin,
      hasMarker: (body) => hasMarker(body, input),
      since: input.since,
      sinceMarginMs: deps.sinceMarginMs,
    });
    match = replyMatchOf(comments);
  } catch (error) {
    await store.transact((tx) =>
      tx.appendAudit({
        level: 'alert',
        action: 'reply.query_result',
        actor: 'system',
        actorId,
        taskId: input.taskId,
        errorCode: verificationErrorCodeOf(error),
        metadata: { turnKey: input.turnKey, step, ok: false, message: messageOf(error) },
      }),
    );
    throw error;
  }
  // The extras this verifier recorded before, read ahead of the transaction (a transaction reads only
  // through its tx); the verifier's steps run one at a time, so none is recorded in between.
  const known = match.extras.length === 0 ? [] : await store.audit({ actorId });
  await store.transact(async (tx) => {
    await tx.appendAudit({
      action: 'reply.query_result',
      actor: 'system',
      actorId,
      taskId: input.taskId,
      commentId: match.first?.id ?? null,
      metadata: { turnKey: input.turnKey, step, ok: true, found: match.first !== undefined },
    });
    if (match.extras.length === 0) return;
    for (const extra of unrecordedExtras(match.extras, known)) {
      await tx.appendAudit({
        action: 'reply.extra_comment',
        actor: 'system',
        actorId,
        taskId: input.taskId,
        commentId: extra.id,
        metadata: { turnKey: input.turnKey, confirmedCommentId: match.first!.id, kept: true },
      });
    }
  });
  return match;
}
