// The compact record intake journals for an accepted comment (format `intake.accept/1`, see
// src/store/derived/intake-accept-v1.mjs): everything the delivery, trigger, task, task actor,
// receipt intent, first-time repository and session records and the intake audit events are derived
// from. Pure: the caller passes what it read from the transaction (is the repository / session new?).
import type { AcceptedCommentV1 } from '../store/derived/intake-accept-v1.mjs';
import { NAME, TASK_MACHINE_VERSION, queuedSnapshot } from '../store/derived/intake-accept-v1.mjs';
import { INLINE_TEXT_LIMIT } from '../tasks/task-texts.js';
import type { NormalizedComment } from '../webhook/normalize-comment.js';

export const ACCEPTED_COMMENT_FORMAT = NAME;

export interface AcceptedCommentInput {
  comment: NormalizedComment;
  deliveryKey: string;
  deliveryId: string;
  eventType: string;
  payloadHash: string;
  receivedAt: Date;
  retentionMs: number;
  taskId: string;
  triggerKey: string;
  at: Date;
  /** Set when this comment registers its repository. */
  newRepository: { workspacePath: string } | null;
  /** Set when this comment opens its resource's session. */
  newSession: { hostRef: string } | null;
}

/** Without `a0`: the store transaction reserves the audit seqs and adds it. */
export function acceptedCommentRecord(i: AcceptedCommentInput): Omit<AcceptedCommentV1, 'a0'> {
  const c = i.comment;
  return {
    at: i.at.toISOString(),
    receivedAt: i.receivedAt.toISOString(),
    expiresAt: new Date(i.receivedAt.getTime() + i.retentionMs).toISOString(),
    deliveryKey: i.deliveryKey,
    deliveryId: i.deliveryId,
    eventType: i.eventType,
    payloadHash: i.payloadHash,
    taskId: i.taskId,
    triggerKey: i.triggerKey,
    by: `gitea:user:${c.actor.login}`,
    task: {
      repoKey: c.repoKey,
      resourceKey: c.resourceKey,
      kind: c.resource.kind,
      number: c.resource.number,
      owner: c.repo.owner,
      repo: c.repo.name,
      commentId: c.comment.id,
      commentUrl: c.comment.htmlUrl,
      author: c.actor.login,
      instruction: c.comment.body,
      refs: c.refs ? { ...c.refs } : null,
    },
    repository: i.newRepository
      ? { instanceId: c.instanceId, repoId: c.repo.id, cloneUrl: c.repo.cloneUrl, defaultBranch: c.repo.defaultBranch, workspacePath: i.newRepository.workspacePath }
      : null,
    session: i.newSession,
  };
}

/**
 * Whether a comment can be accepted as a compact record: its text fits the task record (a longer one
 * is stored once in `task_texts`, which the generic path does) and it carries no review context.
 */
export function fitsAcceptedComment(c: NormalizedComment): boolean {
  // A line comment's or a review's context is not in the format: the generic path keeps it.
  return c.comment.body.length <= INLINE_TEXT_LIMIT && c.review === undefined;
}

/** What the format encodes of the task machine, to compare with the machine the runtime hosts. */
export function acceptedCommentMachine(taskId: string): { machineVersion: number; states: string[]; persisted: unknown } {
  return { machineVersion: TASK_MACHINE_VERSION, states: ['received', 'queued'], persisted: queuedSnapshot(taskId) };
}
