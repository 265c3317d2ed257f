/**
 * The chaos run's invariants, as pure functions over what the run leaves behind: the deliveries it
 * sent (and what each got back), and the history checks (history-check.ts) over the store's tasks and
 * audit log and the comments on the sandbox.
 * Kept apart from the run so each check can be shown to fail on a hand-made history.
 */
import { isTerminalTaskState } from '../../machines/task-lifecycle.js';
import type { TaskRecord } from '../../src/domain/records.js';
import type { AuditEvent } from '../../src/store/types.js';
import { checkHistory, type BotComment, type CommentFindings, type HistoryVerdict, type LeaseFindings, type RunFindings } from './history-check.js';

export { checkComments, checkRuns, RUN_STATES, type BotComment } from './history-check.js';

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

export function nonTerminal(tasks: readonly Pick<TaskRecord, 'taskId' | 'state'>[]): Array<{ taskId: string; state: string }> {
  return tasks.filter((t) => !isTerminalTaskState(t.state)).map((t) => ({ taskId: t.taskId, state: t.state }));
}

export interface ChaosVerdict {
  deliveries: DeliveryFindings;
  runs: RunFindings;
  leases: LeaseFindings;
  comments: CommentFindings;
  /** Every finding of the history checks, one line each. */
  history: HistoryVerdict['problems'];
  open: Array<{ taskId: string; state: string }>;
  byState: Record<string, number>;
  repositories: number;
  /** The summary's lines every chaos run prints (what it sent, the tasks, runs, leases, receipts, answers). */
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
  const deliveries = checkDeliveries(sent, tasks);
  const byId = new Map(tasks.map((t) => [t.taskId, t]));
  const history = checkHistory({ events, tasks, commentsOn: (t) => input.commentsOn(byId.get(t.taskId)!), botLogin });
  const open = nonTerminal(tasks);
  const byState: Record<string, number> = {};
  for (const t of tasks) byState[t.state] = (byState[t.state] ?? 0) + 1;
  const repositories = new Set(tasks.map((t) => t.repoKey)).size;
  const lines = [
    `deliveries sent ${deliveries.sent}: 202 ${deliveries.got202}, failed ${deliveries.failed}, other status ${deliveries.otherStatus}`,
    `tasks ${tasks.length} over ${repositories} repositories; 202 without task ${deliveries.missing.length}; deliveries with >1 task ${deliveries.doubled.length}; tasks whose 202 was lost to a kill ${deliveries.tasksWithoutAck}`,
    `final states ${JSON.stringify(byState)}; non-terminal ${open.length}`,
    ...history.lines,
  ];
  return { deliveries, runs: history.runs, leases: history.leases, comments: history.comments, history: history.problems, open, byState, repositories, lines };
}
