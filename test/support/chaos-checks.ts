/**
 * The chaos run's invariants, as pure functions over what the run leaves behind: the deliveries it
 * sent (and what each got back), the store's tasks and audit log, and the comments on the sandbox.
 * Kept apart from the run so each check can be shown to fail on a hand-made history.
 */
import { isTerminalTaskState } from '../../machines/task-lifecycle.js';
import { parseMarkers } from '../../src/domain/marker.js';
import type { TaskRecord } from '../../src/domain/records.js';
import { receiptCommentKey } from '../../src/receipts/receipt-record.js';
import { formatReceiptMarker } from '../../src/domain/marker.js';
import type { AuditEvent } from '../../src/store/types.js';

export interface SentDelivery {
  deliveryId: string;
  /** HTTP status, or null when the request failed (service down, connection reset). */
  status: number | null;
}

export interface DeliveryFindings {
  sent: number;
  got202: number;
  failed: number;
  otherStatus: number;
  /** 202s without a task. */
  missing: string[];
  /** Delivery ids that made more than one task. */
  doubled: string[];
  /** Tasks whose delivery never saw its 202 (committed, then killed before the answer): allowed. */
  tasksWithoutAck: number;
}

export function checkDeliveries(sent: readonly SentDelivery[], tasks: readonly Pick<TaskRecord, 'taskId' | 'deliveryId'>[]): DeliveryFindings {
  const byDelivery = new Map<string, number>();
  for (const t of tasks) byDelivery.set(t.deliveryId, (byDelivery.get(t.deliveryId) ?? 0) + 1);
  const acked = new Set(sent.filter((d) => d.status === 202).map((d) => d.deliveryId));
  return {
    sent: sent.length,
    got202: acked.size,
    failed: sent.filter((d) => d.status === null).length,
    otherStatus: sent.filter((d) => d.status !== null && d.status !== 202).length,
    missing: [...acked].filter((id) => !byDelivery.has(id)),
    doubled: [...byDelivery].filter(([, n]) => n > 1).map(([id]) => id),
    tasksWithoutAck: tasks.filter((t) => !acked.has(t.deliveryId)).length,
  };
}

/** States in which a task works on its repository (and must hold the repository's lease). */
export const RUN_STATES = new Set(['preparing', 'running', 'verifying_reply', 'aborting']);

export interface RunFindings {
  runs: number;
  /** Two tasks of one repository in a run state at once (by audit sequence). */
  overlaps: Array<{ repoKey: string; taskIds: string[]; seq: number }>;
  /** A task claimed (CLAIM/RETRY_DUE{leaseId}) while its repository's lock did not hold that lease. */
  claimsWithoutLease: Array<{ taskId: string; seq: number; leaseId: unknown; held: string | null }>;
  /** A lock acquired while it was held (never expected: the machine refuses it). */
  doubleAcquires: Array<{ repoKey: string; seq: number }>;
  /**
   * The lease rows' epochs (the `lease.granted` events, on the database's clock): a grant whose epoch is
   * not the repository's previous one plus one, or that came before the previous lease ended (released,
   * or past the expiry it was granted with: renewals are not in the audit, so a takeover between the
   * first expiry and a renewed one is the database's own check alone); a run claimed under a lease that
   * is not the repository's latest grant.
   */
  epochProblems: Array<{ repoKey: string; seq: number; problem: string }>;
  /** `lease.granted` events seen (an engine with lease rows writes one per grant). */
  leaseGrants: number;
  leaseTakeovers: number;
  leaseExpiries: number;
}

function eventOf(e: AuditEvent): Record<string, unknown> {
  return ((e.metadata ?? {})['event'] as Record<string, unknown> | undefined) ?? {};
}

/**
 * Replays the audit log in sequence order. Per repository it tracks the tasks in run states (from
 * `task.transition`) and the lease the repository's lock holds (from `lock.transition`).
 */
export function checkRuns(events: readonly AuditEvent[], tasks: readonly Pick<TaskRecord, 'taskId' | 'repoKey'>[]): RunFindings {
  const repoOf = new Map(tasks.map((t) => [t.taskId, t.repoKey]));
  const active = new Map<string, Set<string>>();
  const lease = new Map<string, string | null>();
  const out: RunFindings = { runs: 0, overlaps: [], claimsWithoutLease: [], doubleAcquires: [], epochProblems: [], leaseGrants: 0, leaseTakeovers: 0, leaseExpiries: 0 };
  /** Per repository: the latest grant (its epoch, lease id, database-clock expiry) and whether it ended. */
  const grants = new Map<string, { epoch: number; leaseId: unknown; expiresAt: number; ended: boolean }>();
  for (const e of [...events].sort((a, b) => a.seq - b.seq)) {
    if (e.action === 'lease.taken_over') out.leaseTakeovers += 1;
    if (e.action === 'lease.expired') out.leaseExpiries += 1;
    if (e.action === 'lease.granted') {
      out.leaseGrants += 1;
      const m = e.metadata ?? {};
      const repoKey = String(m['repoKey']);
      const epoch = Number(m['epoch']);
      const grantedAt = Date.parse(String(m['grantedAt']));
      const before = grants.get(repoKey);
      if (before && epoch !== before.epoch + 1) out.epochProblems.push({ repoKey, seq: e.seq, problem: `epoch ${epoch} after ${before.epoch}` });
      if (before && !before.ended && grantedAt < before.expiresAt) out.epochProblems.push({ repoKey, seq: e.seq, problem: `epoch ${epoch} granted at ${m['grantedAt']}, while epoch ${before.epoch} ran until ${new Date(before.expiresAt).toISOString()}` });
      grants.set(repoKey, { epoch, leaseId: m['leaseId'], expiresAt: Date.parse(String(m['expiresAt'])), ended: false });
      continue;
    }
    if (e.action === 'lock.transition' && e.actorId?.startsWith('lock:')) {
      const repoKey = e.actorId.slice('lock:'.length);
      const ev = eventOf(e);
      if (e.toState === 'held') {
        if (e.fromState === 'held' && ev['type'] === 'ACQUIRE' && lease.get(repoKey)) out.doubleAcquires.push({ repoKey, seq: e.seq });
        if (typeof ev['leaseId'] === 'string' && ev['type'] === 'ACQUIRE') lease.set(repoKey, ev['leaseId']);
      } else {
        lease.set(repoKey, null);
        // Released or expired: the next grant may come at any time.
        const grant = grants.get(repoKey);
        if (grant) grant.ended = true;
      }
      continue;
    }
    if (e.action !== 'task.transition' || !e.taskId) continue;
    const repoKey = repoOf.get(e.taskId);
    if (!repoKey) continue;
    let set = active.get(repoKey);
    if (!set) active.set(repoKey, (set = new Set()));
    const ev = eventOf(e);
    const entering = e.toState !== null && e.toState !== undefined && RUN_STATES.has(e.toState);
    if (entering && !RUN_STATES.has(e.fromState ?? '')) {
      out.runs += 1;
      if (typeof ev['leaseId'] === 'string' && lease.get(repoKey) !== ev['leaseId']) {
        out.claimsWithoutLease.push({ taskId: e.taskId, seq: e.seq, leaseId: ev['leaseId'], held: lease.get(repoKey) ?? null });
      }
      const grant = grants.get(repoKey);
      if (typeof ev['leaseId'] === 'string' && grant && grant.leaseId !== ev['leaseId']) {
        out.epochProblems.push({ repoKey, seq: e.seq, problem: `${e.taskId} claimed under ${ev['leaseId']}, not the latest grant (epoch ${grant.epoch})` });
      }
    }
    if (entering) set.add(e.taskId);
    else set.delete(e.taskId);
    if (set.size > 1) out.overlaps.push({ repoKey, taskIds: [...set], seq: e.seq });
  }
  return out;
}

export interface BotComment {
  user: string;
  body: string;
}

export interface CommentFindings {
  tasks: number;
  receiptsOk: number;
  /** Tasks without exactly one `已收到` receipt. */
  receiptProblems: Array<{ taskId: string; count: number }>;
  /** The same failure receipt posted twice. */
  repeatedFailureReceipts: Array<{ taskId: string; state: string; count: number }>;
  answers: number;
  /** Tasks with more than one answer, or a succeeded task without one. */
  answerProblems: Array<{ taskId: string; state: string; count: number }>;
}

/** `comments(task)` gives the comments on the task's issue. */
export function checkComments(
  tasks: readonly Pick<TaskRecord, 'taskId' | 'state'>[],
  comments: (taskId: string) => readonly BotComment[],
  botLogin: string,
): CommentFindings {
  const out: CommentFindings = { tasks: tasks.length, receiptsOk: 0, receiptProblems: [], repeatedFailureReceipts: [], answers: 0, answerProblems: [] };
  for (const t of tasks) {
    const mine = comments(t.taskId).filter((c) => c.user.toLowerCase() === botLogin.toLowerCase());
    const receipt = formatReceiptMarker(receiptCommentKey(t.taskId, 'received'));
    const receipts = mine.filter((c) => c.body.includes(receipt)).length;
    if (receipts === 1) out.receiptsOk += 1;
    else out.receiptProblems.push({ taskId: t.taskId, count: receipts });
    for (const state of ['failed', 'failed_reply', 'aborted', 'cancelled']) {
      const n = mine.filter((c) => c.body.includes(formatReceiptMarker(receiptCommentKey(t.taskId, state)))).length;
      if (n > 1) out.repeatedFailureReceipts.push({ taskId: t.taskId, state, count: n });
    }
    const answers = mine.filter((c) => parseMarkers(c.body).some((m) => m.taskId === t.taskId)).length;
    out.answers += answers;
    if (answers > 1 || (t.state.startsWith('succeeded') && answers !== 1)) out.answerProblems.push({ taskId: t.taskId, state: t.state, count: answers });
  }
  return out;
}

export function nonTerminal(tasks: readonly Pick<TaskRecord, 'taskId' | 'state'>[]): Array<{ taskId: string; state: string }> {
  return tasks.filter((t) => !isTerminalTaskState(t.state)).map((t) => ({ taskId: t.taskId, state: t.state }));
}

export interface ChaosVerdict {
  deliveries: DeliveryFindings;
  runs: RunFindings;
  comments: CommentFindings;
  open: Array<{ taskId: string; state: string }>;
  byState: Record<string, number>;
  repositories: number;
  /** The summary's lines every chaos run prints (what it sent, the tasks, runs, receipts, answers). */
  lines: string[];
}

/** Every check over one run's leavings; `commentsOn` gives the comments on a task's issue or pull request. */
export function judgeChaosRun(input: {
  sent: readonly SentDelivery[];
  tasks: readonly TaskRecord[];
  events: readonly AuditEvent[];
  commentsOn: (task: TaskRecord) => readonly BotComment[];
  botLogin: string;
}): ChaosVerdict {
  const { sent, tasks, events, botLogin } = input;
  const byResource = new Map<string, readonly BotComment[]>();
  for (const t of tasks) if (!byResource.has(t.resourceKey)) byResource.set(t.resourceKey, input.commentsOn(t));
  const resourceOf = new Map(tasks.map((t) => [t.taskId, t.resourceKey]));
  const deliveries = checkDeliveries(sent, tasks);
  const runs = checkRuns(events, tasks);
  const comments = checkComments(tasks, (id) => byResource.get(resourceOf.get(id)!) ?? [], botLogin);
  const open = nonTerminal(tasks);
  const byState: Record<string, number> = {};
  for (const t of tasks) byState[t.state] = (byState[t.state] ?? 0) + 1;
  const repositories = new Set(tasks.map((t) => t.repoKey)).size;
  const lines = [
    `deliveries sent ${deliveries.sent}: 202 ${deliveries.got202}, failed ${deliveries.failed}, other status ${deliveries.otherStatus}`,
    `tasks ${tasks.length} over ${repositories} repositories; 202 without task ${deliveries.missing.length}; deliveries with >1 task ${deliveries.doubled.length}; tasks whose 202 was lost to a kill ${deliveries.tasksWithoutAck}`,
    `final states ${JSON.stringify(byState)}; non-terminal ${open.length}`,
    `runs ${runs.runs}; overlapping runs in one repository ${runs.overlaps.length}; claims without the lease ${runs.claimsWithoutLease.length}; double acquires ${runs.doubleAcquires.length}; lease epoch problems ${runs.epochProblems.length}; lease takeovers ${runs.leaseTakeovers}, expiries ${runs.leaseExpiries}`,
    ...(runs.epochProblems.length ? [`epoch problems: ${JSON.stringify(runs.epochProblems.slice(0, 10))}`] : []),
    `receipts: exactly one 已收到 for ${comments.receiptsOk}/${comments.tasks} tasks; repeated failure receipts ${comments.repeatedFailureReceipts.length}`,
    `answers on Gitea ${comments.answers}; tasks with >1 answer or a success without one ${comments.answerProblems.length}`,
    ...(comments.answerProblems.length ? [`answer problems: ${JSON.stringify(comments.answerProblems.slice(0, 10))}`] : []),
    ...(comments.receiptProblems.length ? [`receipt problems: ${JSON.stringify(comments.receiptProblems.slice(0, 10))}`] : []),
    ...(runs.overlaps.length ? [`overlaps: ${JSON.stringify(runs.overlaps.slice(0, 10))}`] : []),
  ];
  return { deliveries, runs, comments, open, byState, repositories, lines };
}
