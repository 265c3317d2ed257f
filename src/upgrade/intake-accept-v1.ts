// Stored-data format `intake.accept/1`: the one record an earlier version journalled for an accepted
// comment (op `["x", "intake.accept/1", payload]`), standing for the delivery, comment trigger, task,
// task actor with its snapshot, receipt intent, (repository and session the first time) and three or
// four audit events. The journal reader expands it here into exactly those records and events, as that
// version's store did, so that `migrate-store` copies what that version read.
//
// FROZEN: journals already written must expand to the same records forever, so this never changes
// meaning and imports none of the live builders (test/unit/intake-accept-golden.test.ts compares it
// with what it produced when it was introduced). Nothing writes the format any more.
import type { AuditEvent, StoredRecord } from '../store/types.js';

export const INTAKE_ACCEPT_V1 = 'intake.accept/1';

/** A store op: put (`p`) or archive (`c`) a record, or append an audit event (`a`). */
export type ExpandedOp = ['c' | 'p', string, string, StoredRecord] | ['a', AuditEvent];

export interface AcceptedCommentV1 {
  /** First audit seq reserved for this record (its events take a0, a0 + 1, …; the task's queue position). */
  a0: number;
  at: string;
  receivedAt: string;
  expiresAt: string;
  deliveryKey: string;
  deliveryId: string;
  eventType: string;
  payloadHash: string;
  taskId: string;
  triggerKey: string;
  /** Audit actor, e.g. `gitea:user:bob`. */
  by: string;
  task: {
    repoKey: string;
    resourceKey: string;
    kind: string;
    number: number;
    owner: string;
    repo: string;
    commentId: number;
    commentUrl: string;
    author: string;
    instruction: string;
    refs: Record<string, unknown> | null;
  };
  /** Present when this comment registered its repository. */
  repository: { instanceId: string; repoId: number; cloneUrl: string; defaultBranch: string; workspacePath: string } | null;
  /** Present when this comment opened its resource's session. */
  session: { hostRef: string } | null;
}

/** The ops a derived record of format `name` stands for. Throws for an unknown format or a payload without its first audit seq. */
export function expandDerived(name: unknown, payload: unknown): ExpandedOp[] {
  if (!payload || typeof payload !== 'object' || !Number.isSafeInteger((payload as { a0?: unknown }).a0)) {
    throw new Error(`derived record ${JSON.stringify(name)} without a first audit seq`);
  }
  if (name !== INTAKE_ACCEPT_V1) throw new Error(`unknown derived-record format ${JSON.stringify(name)} (written by a newer version?)`);
  return expand(payload as AcceptedCommentV1);
}

// Every object built here is frozen as it is built, as the earlier store kept its records.
const f = Object.freeze;

/** The records and audit events of an accepted comment, in the order the generic write path wrote them. */
function expand(p: AcceptedCommentV1): ExpandedOp[] {
  const { taskId, deliveryKey, deliveryId, eventType, by, at } = p;
  const t = p.task;
  const actorId = `task:${taskId}`;
  const commentKey = `${taskId}:status:received`;
  const ops: ExpandedOp[] = [];
  ops.push([
    'c',
    'webhook_deliveries',
    deliveryKey,
    f({
      deliveryKey,
      deliveryId,
      eventType,
      receivedAt: p.receivedAt,
      signatureValid: true,
      normalized: true,
      taskId,
      status: 'accepted',
      reason: null,
      payloadHash: p.payloadHash,
      response: f({ status: 202, body: f({ deliveryId, taskId, state: 'queued' }) }),
      expiresAt: p.expiresAt,
    }),
  ]);
  ops.push(['c', 'comment_triggers', p.triggerKey, f({ triggerKey: p.triggerKey, deliveryKey, taskId, createdAt: at })]);
  const r = p.repository;
  if (r !== null) {
    ops.push([
      'p',
      'repositories',
      t.repoKey,
      f({
        repoKey: t.repoKey,
        instanceId: r.instanceId,
        owner: t.owner,
        name: t.repo,
        repoId: r.repoId,
        cloneUrl: r.cloneUrl,
        workspacePath: r.workspacePath,
        defaultBranch: r.defaultBranch,
        status: 'active',
        registeredAt: at,
        lastFetchAt: null,
        version: 1,
      }),
    ]);
  }
  ops.push([
    'p',
    'tasks',
    taskId,
    f({
      taskId,
      deliveryKey,
      deliveryId,
      repoKey: t.repoKey,
      resourceKey: t.resourceKey,
      sessionKey: t.resourceKey,
      resource: f({ kind: t.kind, number: t.number }),
      owner: t.owner,
      repo: t.repo,
      commentId: t.commentId,
      commentUrl: t.commentUrl,
      author: t.author,
      instruction: t.instruction,
      refs: t.refs === null ? null : f({ ...t.refs }),
      state: 'queued',
      attempt: 0,
      replyAttempt: 0,
      threadId: null,
      turnId: null,
      leaseId: null,
      nextRetryAt: null,
      errorCode: null,
      mcpFailureReason: null,
      stoppedBy: null,
      queueSeq: p.a0,
      createdAt: at,
      updatedAt: at,
      stateVersion: 2,
    }),
  ]);
  if (p.session !== null) {
    ops.push([
      'c',
      'sessions',
      t.resourceKey,
      f({
        sessionKey: t.resourceKey,
        resourceKey: t.resourceKey,
        repoKey: t.repoKey,
        kind: t.kind,
        number: t.number,
        threadId: null,
        runtime: f({ app: 'codexapp', mode: 'yolo' }),
        mcp: f({ server: 'gitea', transport: 'stdio', hostRef: p.session.hostRef }),
        status: 'active',
        lastTaskId: null,
        lastTurnId: null,
        createdAt: at,
        updatedAt: at,
        version: 0,
      }),
    ]);
  }
  ops.push([
    'p',
    'actors',
    actorId,
    f({
      actorId,
      kind: 'task',
      machineId: 'task',
      machineVersion: 1,
      state: 'queued',
      status: 'active',
      stateVersion: 2,
      snapshot: queuedSnapshot(taskId),
      taskId,
      createdAt: at,
      updatedAt: at,
    }),
  ]);
  ops.push([
    'p',
    'comments',
    commentKey,
    f({
      commentKey,
      taskId,
      kind: 'status',
      resourceKey: t.resourceKey,
      turnId: null,
      commentId: null,
      marker: `<!-- ccweb receipt=${commentKey} -->`,
      bodyHash: '',
      status: 'pending',
      errorCode: null,
      createdAt: at,
      updatedAt: at,
    }),
  ]);
  // Audit events in the order the generic path appended them; each field written out (no spread).
  const a0 = p.a0;
  const metadata = f({ deliveryKey, eventType, repoKey: t.repoKey, resourceKey: t.resourceKey, commentId: t.commentId });
  ops.push(['a', f({ action: 'webhook.accept', actor: by, deliveryId, taskId, actorId, metadata, eventId: `audit-${a0}`, seq: a0, timestamp: at })]);
  let seq = a0 + 1;
  if (r !== null) {
    const registered = f({ deliveryKey, eventType, repoKey: t.repoKey, resourceKey: t.resourceKey, commentId: t.commentId, workspacePath: r.workspacePath });
    ops.push(['a', f({ action: 'repository.register', actor: by, deliveryId, metadata: registered, eventId: `audit-${seq}`, seq, timestamp: at })]);
    seq += 1;
  }
  ops.push(['a', transition(by, actorId, taskId, null, 'received', 1, EMPTY, seq, at)]);
  ops.push(['a', transition(by, actorId, taskId, 'received', 'queued', 2, ACCEPTED, seq + 1, at)]);
  return ops;
}

const EMPTY = f({});
const ACCEPTED = f({ event: f({ type: 'ACCEPT' }) });

function transition(by: string, actorId: string, taskId: string, fromState: string | null, toState: string, stateVersion: number, metadata: Record<string, unknown>, seq: number, at: string): AuditEvent {
  return f({
    action: 'task.transition',
    actor: by,
    actorId,
    taskId,
    fromState,
    toState,
    stateVersion,
    errorCode: null,
    metadata,
    eventId: `audit-${seq}`,
    seq,
    timestamp: at,
  });
}

/** The task machine's persisted snapshot (version 1) after creation and ACCEPT. */
function queuedSnapshot(taskId: string): StoredRecord {
  return f({
    status: 'active',
    value: 'queued',
    historyValue: EMPTY,
    context: f({
      taskId,
      attempt: 0,
      replyAttempt: 0,
      retryTarget: 'preparing',
      nextRetryAt: null,
      errorCode: null,
      mcpFailureReason: null,
      leaseId: null,
      stoppedBy: null,
    }),
    children: EMPTY,
  });
}
