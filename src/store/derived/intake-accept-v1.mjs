// Stored-data format `intake.accept/1`: the ONE thing intake journals for an accepted comment.
//
// An accepted comment makes eleven records and events — delivery, comment trigger, task, task
// actor with its snapshot, receipt intent, (repository, session the first time) and three or four
// audit events. Rather than build, serialize, copy and index each, intake writes one compact record, and
// the store expands it here into exactly those records and events, deterministically: in memory when
// the transaction is applied, at replay, and in the compaction worker. Readers see the same records
// as before; the journal holds ≈ 1 KB instead of ≈ 4–5 KB; nothing is serialized twice.
//
// FROZEN: an old journal must replay to the same records forever, so this file never changes
// meaning. It does not import the live builders (intake-records.ts, the receipt and session
// builders, the task machine) on purpose — if those change, a new format (`intake.accept/2`, a new
// file) is added and intake writes that; this one stays for journals already written.
// test/unit/intake-accept-derivation.test.ts checks that, today, this expansion equals what the
// generic write path (the live builders + the actor runtime) stores for the same comment, and the
// intake only uses this format while the task machine is the version it encodes (TASK_MACHINE_VERSION 1).
//
// Plain JavaScript: the compaction worker imports it too (worker threads get no TypeScript loader).

export const NAME = 'intake.accept/1';

// Every object built here is frozen as it is built: the store keeps records deep-frozen, and freezing
// known shapes directly is cheaper than walking them afterwards.
const f = Object.freeze;

/** The task machine version whose queued snapshot this format encodes. */
export const TASK_MACHINE_VERSION = 1;

/**
 * The records and audit events an accepted comment stands for, as store ops:
 * `['c'|'p', collection, key, record]` and `['a', event]`, in the order the generic path wrote them.
 * `p.a0` is the first audit seq reserved for it (its events take a0, a0 + 1, …); it is also the task's FIFO
 * queue position.
 */
export function expand(p) {
  const { taskId, deliveryKey, deliveryId, eventType, by, at } = p;
  const t = p.task;
  const actorId = `task:${taskId}`;
  const commentKey = `${taskId}:status:received`;
  const ops = [];
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
      machineVersion: TASK_MACHINE_VERSION,
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

function transition(by, actorId, taskId, fromState, toState, stateVersion, metadata, seq, at) {
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
export function queuedSnapshot(taskId) {
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
