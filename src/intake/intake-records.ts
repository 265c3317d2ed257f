// Builders for the records intake writes (spec §4). Pure: every time comes in as an argument.
import { createHash } from 'node:crypto';
import { newSessionRecord } from '../domain/session-record.js';
import type {
  CommentTriggerRecord,
  DeliveryRecord,
  RepositoryRecord,
  SessionRecord,
  TaskRecord,
} from '../domain/records.js';
import type { NormalizedComment } from '../webhook/normalize-comment.js';
import type { IntakeResponse } from './intake-response.js';

export const DEFAULT_DELIVERY_RETENTION_MS = 30 * 24 * 60 * 60 * 1000;

export function payloadHash(json: Buffer): string {
  return 'sha256:' + createHash('sha256').update(json).digest('hex');
}

export interface DeliveryFields {
  deliveryKey: string;
  deliveryId: string;
  eventType: string;
  receivedAt: Date;
  retentionMs: number;
  normalized: boolean;
  taskId: string | null;
  status: DeliveryRecord['status'];
  reason: string | null;
  payloadHash: string;
  response: IntakeResponse;
}

export function deliveryRecord(f: DeliveryFields): DeliveryRecord {
  return {
    deliveryKey: f.deliveryKey,
    deliveryId: f.deliveryId,
    eventType: f.eventType,
    receivedAt: f.receivedAt.toISOString(),
    signatureValid: true,
    normalized: f.normalized,
    taskId: f.taskId,
    status: f.status,
    reason: f.reason,
    payloadHash: f.payloadHash,
    response: { status: f.response.status, body: { ...f.response.body } },
    expiresAt: new Date(f.receivedAt.getTime() + f.retentionMs).toISOString(),
  };
}

export function triggerRecord(triggerKey: string, deliveryKey: string, taskId: string | null, now: Date): CommentTriggerRecord {
  return { triggerKey, deliveryKey, taskId, createdAt: now.toISOString() };
}

export function repositoryRecord(c: NormalizedComment, workspacePath: string, now: Date): RepositoryRecord {
  return {
    repoKey: c.repoKey,
    instanceId: c.instanceId,
    owner: c.repo.owner,
    name: c.repo.name,
    // Gitea's id: renames and transfers are followed by it (the executor asks Gitea before each clone/fetch).
    repoId: c.repo.id,
    // As the payload said; informational only: git always uses CCWEB_GITEA_URL + owner/name.
    cloneUrl: c.repo.cloneUrl,
    workspacePath,
    defaultBranch: c.repo.defaultBranch,
    status: 'active',
    registeredAt: now.toISOString(),
    lastFetchAt: null,
    version: 1,
  };
}

/** The session record, as the session actor expects it (version 0; its projection takes it from there). */
export function sessionRecord(task: TaskRecord, hostRef: string, now: Date): SessionRecord {
  return newSessionRecord(task, hostRef, now.toISOString());
}

/** The fields a task actor's projection owns, as a new task has them before its first transition. */
export function initialTaskMirror(): Pick<
  TaskRecord,
  'state' | 'attempt' | 'replyAttempt' | 'threadId' | 'turnId' | 'leaseId' | 'nextRetryAt' | 'errorCode' | 'mcpFailureReason' | 'stoppedBy'
> {
  return {
    state: 'received',
    attempt: 0,
    replyAttempt: 0,
    threadId: null,
    turnId: null,
    leaseId: null,
    nextRetryAt: null,
    errorCode: null,
    mcpFailureReason: null,
    stoppedBy: null,
  };
}

/** State `received`, stateVersion 0: the task actor's projection takes it from there in the same tx. */
export function taskRecord(c: NormalizedComment, taskId: string, queueSeq: number, now: Date): TaskRecord {
  return {
    taskId,
    deliveryKey: c.deliveryKey,
    deliveryId: c.deliveryId,
    repoKey: c.repoKey,
    resourceKey: c.resourceKey,
    sessionKey: c.resourceKey,
    resource: { kind: c.resource.kind, number: c.resource.number },
    owner: c.repo.owner,
    repo: c.repo.name,
    commentId: c.comment.id,
    commentUrl: c.comment.htmlUrl,
    author: c.actor.login,
    instruction: c.comment.body,
    refs: c.refs ? { ...c.refs } : null,
    ...(c.review ? { review: c.review } : {}),
    ...initialTaskMirror(),
    queueSeq,
    createdAt: now.toISOString(),
    updatedAt: now.toISOString(),
    stateVersion: 0,
  };
}
