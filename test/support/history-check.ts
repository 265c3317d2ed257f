/**
 * The history checks: pure functions over what a run of the service leaves behind (the audit, the tasks,
 * the comments on Gitea or the sandbox), used by the chaos runs and the fault tests on several nodes.
 * - checkRuns replays the audit in the database's order: no repository with two tasks in a run state at
 *   once, each claim under the lease its repository's lock holds, the lease epochs one after another;
 * - checkLeases judges the leases on the database's clock: each lease from its grant (`lease.granted`) to
 *   its end (`lease.ended`, or the expiry a takeover's grant names), and no two runs of one repository
 *   under leases whose times overlap;
 * - checkComments: one receipt per task, at most one answer, and one for every task that succeeded.
 * Kept apart from the runs so each check can be shown to fail on a hand-made history.
 */
import { parseMarkers, formatReceiptMarker } from '../../src/domain/marker.js';
import type { TaskRecord } from '../../src/domain/records.js';
import { receiptCommentKey } from '../../src/receipts/receipt-record.js';
import type { AuditEvent } from '../../src/store/types.js';

/** States in which a task works on its repository (and must hold the repository's lease). */
export const RUN_STATES = new Set(['preparing', 'running', 'publishing', 'verifying_reply', 'aborting']);

export interface RunFindings {
  runs: number;
  /** Two tasks of one repository in a run state at once (by audit sequence). */
  overlaps: Array<{ repoKey: string; taskIds: string[]; seq: number }>;
  /** A task claimed (CLAIM/RETRY_DUE{leaseId}) while its repository's lock did not hold that lease. */
  claimsWithoutLease: Array<{ taskId: string; seq: number; leaseId: unknown; held: string | null }>;
  /** A lock acquired while it was held (never expected: the machine refuses it). */
  doubleAcquires: Array<{ repoKey: string; seq: number }>;
  /**
   * The lease rows' epochs (the `lease.granted` events): a grant whose epoch is not the repository's
   * previous one plus one; a run claimed under a lease that is not the repository's latest grant. Whether
   * a grant came before the previous lease ended is checkLeases's, on the database's clock.
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
  /** Per repository: the latest grant (its epoch and lease id). */
  const grants = new Map<string, { epoch: number; leaseId: unknown }>();
  for (const e of [...events].sort((a, b) => a.seq - b.seq)) {
    if (e.action === 'lease.taken_over') out.leaseTakeovers += 1;
    if (e.action === 'lease.expired') out.leaseExpiries += 1;
    if (e.action === 'lease.granted') {
      out.leaseGrants += 1;
      const m = e.metadata ?? {};
      const repoKey = String(m['repoKey']);
      const epoch = Number(m['epoch']);
      const before = grants.get(repoKey);
      if (before && epoch !== before.epoch + 1) out.epochProblems.push({ repoKey, seq: e.seq, problem: `epoch ${epoch} after ${before.epoch}` });
      grants.set(repoKey, { epoch, leaseId: m['leaseId'] });
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

/** One lease of a repository on the database's clock (ms): from its grant to its end (null: not ended). */
export interface LeaseSpan {
  repoKey: string;
  epoch: number;
  leaseId: string;
  from: number;
  until: number | null;
}

export interface LeaseFindings {
  grants: number;
  /** Grants that took over a lease never released (it ended at its last expiry). */
  takeovers: number;
  /** Runs (a task entering a run state under a lease) whose lease was granted in this history. */
  runs: number;
  /** Runs that name no lease, or one never granted here. */
  runsWithoutGrant: Array<{ taskId: string; seq: number; leaseId: unknown }>;
  /** A lease granted before the repository's previous one ended, or after one whose end is not known. */
  leaseProblems: Array<{ repoKey: string; epoch: number; problem: string }>;
  /** Each run with its lease's span, in the database's order. */
  runSpans: Array<{ taskId: string; span: LeaseSpan }>;
  /** Two runs of one repository under leases whose spans overlap on the database's clock. */
  overlappingRuns: Array<{ repoKey: string; runs: Array<{ taskId: string; epoch: number }>; problem: string }>;
}

const iso = (ms: number | null) => (ms === null ? 'not ended' : new Date(ms).toISOString());

/**
 * The leases of every repository on the database's clock, and the runs under them: two runs of one
 * repository (two tasks, or one task's run and its retry) whose leases' spans overlap are a finding, and
 * so is a grant made before the previous lease ended — the database's own decision checked from its record.
 */
export function checkLeases(events: readonly AuditEvent[], tasks: readonly Pick<TaskRecord, 'taskId' | 'repoKey'>[]): LeaseFindings {
  const repoOf = new Map(tasks.map((t) => [t.taskId, t.repoKey]));
  const out: LeaseFindings = { grants: 0, takeovers: 0, runs: 0, runsWithoutGrant: [], leaseProblems: [], runSpans: [], overlappingRuns: [] };
  /** Per repository, per epoch. */
  const spans = new Map<string, Map<number, LeaseSpan>>();
  const byLeaseId = new Map<string, LeaseSpan>();
  const runs: Array<{ taskId: string; seq: number; leaseId: unknown }> = [];
  const sorted = [...events].sort((a, b) => a.seq - b.seq);
  const endAt = (repoKey: string, epoch: number, at: number, how: string) => {
    const span = spans.get(repoKey)?.get(epoch);
    if (!span) out.leaseProblems.push({ repoKey, epoch, problem: `epoch ${epoch} ${how} without a grant in the history` });
    else span.until = span.until === null ? at : Math.min(span.until, at);
  };
  for (const e of sorted) {
    const m = e.metadata ?? {};
    if (e.action === 'lease.granted') {
      out.grants += 1;
      const span: LeaseSpan = { repoKey: String(m['repoKey']), epoch: Number(m['epoch']), leaseId: String(m['leaseId']), from: Date.parse(String(m['grantedAt'])), until: null };
      const replaced = m['replaced'] as { epoch: number; endedAt: string } | null | undefined;
      if (replaced) {
        out.takeovers += 1;
        endAt(span.repoKey, replaced.epoch, Date.parse(replaced.endedAt), 'taken over');
      }
      let repo = spans.get(span.repoKey);
      if (!repo) spans.set(span.repoKey, (repo = new Map()));
      repo.set(span.epoch, span);
      byLeaseId.set(span.leaseId, span);
    } else if (e.action === 'lease.ended') {
      endAt(String(m['repoKey']), Number(m['epoch']), Date.parse(String(m['endedAt'])), String(m['how']));
    } else if (e.action === 'task.transition' && e.taskId && repoOf.has(e.taskId)) {
      const entering = e.toState !== null && e.toState !== undefined && RUN_STATES.has(e.toState);
      if (entering && !RUN_STATES.has(e.fromState ?? '')) runs.push({ taskId: e.taskId, seq: e.seq, leaseId: eventOf(e)['leaseId'] });
    }
  }
  for (const [repoKey, repo] of spans) {
    const ordered = [...repo.values()].sort((a, b) => a.epoch - b.epoch);
    for (let i = 1; i < ordered.length; i++) {
      const [before, next] = [ordered[i - 1]!, ordered[i]!];
      if (before.until === null) out.leaseProblems.push({ repoKey, epoch: next.epoch, problem: `epoch ${next.epoch} granted at ${iso(next.from)} while epoch ${before.epoch} was never seen to end` });
      else if (next.from < before.until) out.leaseProblems.push({ repoKey, epoch: next.epoch, problem: `epoch ${next.epoch} granted at ${iso(next.from)}, before epoch ${before.epoch} ended at ${iso(before.until)}` });
    }
  }
  const runsOf = new Map<string, Array<{ taskId: string; span: LeaseSpan }>>();
  for (const run of runs) {
    const span = typeof run.leaseId === 'string' ? byLeaseId.get(run.leaseId) : undefined;
    if (!span || span.repoKey !== repoOf.get(run.taskId)) {
      out.runsWithoutGrant.push(run);
      continue;
    }
    out.runs += 1;
    out.runSpans.push({ taskId: run.taskId, span });
    let list = runsOf.get(span.repoKey);
    if (!list) runsOf.set(span.repoKey, (list = []));
    list.push({ taskId: run.taskId, span });
  }
  for (const [repoKey, list] of runsOf) {
    for (let i = 0; i < list.length; i++) {
      for (let j = i + 1; j < list.length; j++) {
        const [a, b] = [list[i]!, list[j]!];
        const pair = [{ taskId: a.taskId, epoch: a.span.epoch }, { taskId: b.taskId, epoch: b.span.epoch }];
        if (a.span === b.span) {
          if (a.taskId !== b.taskId) out.overlappingRuns.push({ repoKey, runs: pair, problem: `two tasks under one lease (epoch ${a.span.epoch})` });
          continue;
        }
        const overlap = a.span.from < (b.span.until ?? Infinity) && b.span.from < (a.span.until ?? Infinity);
        if (overlap) out.overlappingRuns.push({ repoKey, runs: pair, problem: `epoch ${a.span.epoch} ${iso(a.span.from)}..${iso(a.span.until)} overlaps epoch ${b.span.epoch} ${iso(b.span.from)}..${iso(b.span.until)}` });
      }
    }
  }
  return out;
}

export interface HistoryVerdict {
  runs: RunFindings;
  leases: LeaseFindings;
  comments: CommentFindings;
  /** Every finding, one line each (empty: the history holds). */
  problems: string[];
  /** The summary lines a run prints. */
  lines: string[];
}

/** Every history check over one run's audit, tasks and comments; `commentsOn` gives the comments on a task's issue or pull request. */
export function checkHistory(input: {
  events: readonly AuditEvent[];
  tasks: readonly Pick<TaskRecord, 'taskId' | 'repoKey' | 'state' | 'resourceKey'>[];
  commentsOn: (task: Pick<TaskRecord, 'taskId' | 'repoKey' | 'state' | 'resourceKey'>) => readonly BotComment[];
  botLogin: string;
}): HistoryVerdict {
  const { events, tasks } = input;
  const byResource = new Map<string, readonly BotComment[]>();
  for (const t of tasks) if (!byResource.has(t.resourceKey)) byResource.set(t.resourceKey, input.commentsOn(t));
  const resourceOf = new Map(tasks.map((t) => [t.taskId, t.resourceKey]));
  const runs = checkRuns(events, tasks);
  const leases = checkLeases(events, tasks);
  const comments = checkComments(tasks, (id) => byResource.get(resourceOf.get(id)!) ?? [], input.botLogin);
  const named = (what: string, list: readonly unknown[]) => list.map((x) => `${what}: ${JSON.stringify(x)}`);
  const problems = [
    ...named('two runs at once (audit order)', runs.overlaps),
    ...named('claim without the lease', runs.claimsWithoutLease),
    ...named('double acquire', runs.doubleAcquires),
    ...named('lease epoch', runs.epochProblems),
    ...named('lease', leases.leaseProblems),
    ...named('runs under overlapping leases (database clock)', leases.overlappingRuns),
    ...named('run without a granted lease', leases.runsWithoutGrant),
    ...named('receipt', comments.receiptProblems),
    ...named('repeated failure receipt', comments.repeatedFailureReceipts),
    ...named('answer', comments.answerProblems),
  ];
  const lines = [
    `runs ${runs.runs}; overlapping runs in one repository ${runs.overlaps.length}; claims without the lease ${runs.claimsWithoutLease.length}; double acquires ${runs.doubleAcquires.length}; lease epoch problems ${runs.epochProblems.length}; lease takeovers ${runs.leaseTakeovers}, expiries ${runs.leaseExpiries}`,
    `leases on the database's clock: ${leases.grants} grants (${leases.takeovers} over an unreleased lease); ${leases.runs} runs under them; grants before the previous lease ended ${leases.leaseProblems.length}; runs under overlapping leases ${leases.overlappingRuns.length}; runs without a granted lease ${leases.runsWithoutGrant.length}`,
    `receipts: exactly one 已收到 for ${comments.receiptsOk}/${comments.tasks} tasks; repeated failure receipts ${comments.repeatedFailureReceipts.length}`,
    `answers on Gitea ${comments.answers}; tasks with >1 answer or a success without one ${comments.answerProblems.length}`,
    ...problems.slice(0, 20),
  ];
  return { runs, leases, comments, problems, lines };
}
