// Why a task was stopped, for the operators' views: who stopped it (an operator through the control
// API, a commenter's `@bot stop` on the thread, the service), the operator's reason, when, and how
// the stop ended. Read from what is stored — the task's `stoppedBy`, its CANCEL/ABORT transition
// and the control request's audit event — never guessed. Pure: the caller passes the task's own
// audit events (`store.audit({ taskId })`).
import { TASK_STATE, taskStateHas } from '../../machines/task-lifecycle.js';
import type { TaskRecord } from '../domain/records.js';
import type { AuditEvent } from '../store/types.js';

export interface TaskStopView {
  /** Who asked: an operator (control API), a commenter's stop comment on the thread, or the service. */
  kind: 'operator' | 'stop_comment' | 'service';
  /** As stored: `admin:<operator>`, `gitea:user:<login>`, `system`. */
  by: string;
  /** The operator or the commenter. */
  login: string | null;
  /** The reason the operator gave (the control API requires one); a stop comment has none. */
  reason: string | null;
  /** When the stop arrived. */
  at: string | null;
  /**
   * How it ended: `stopped`; `stopped_at_restart` (the service restarted while stopping, so nothing
   * ran any more); `timed_out` (the work in flight did not confirm in time: failed `abort_timeout`);
   * `stopping` (not over yet).
   */
  outcome: 'stopped' | 'stopped_at_restart' | 'timed_out' | 'stopping';
}

const STOP_EVENTS = new Set(['CANCEL', 'ABORT']);
const MAX_REASON = 500;

function eventOf(e: AuditEvent): { type?: unknown; requestId?: unknown } {
  const ev = e.metadata?.['event'];
  return ev && typeof ev === 'object' ? (ev as { type?: unknown; requestId?: unknown }) : {};
}

function kindOf(by: string): TaskStopView['kind'] {
  if (by.startsWith('admin:')) return 'operator';
  if (by.startsWith('gitea:user:')) return 'stop_comment';
  return 'service';
}

function loginOf(by: string): string | null {
  for (const prefix of ['admin:', 'gitea:user:']) if (by.startsWith(prefix)) return by.slice(prefix.length) || null;
  return null;
}

/** Null for a task nobody stopped. `events`: the task's own audit events, in any order. */
export function taskStop(task: Pick<TaskRecord, 'state' | 'errorCode' | 'stoppedBy'>, events: readonly AuditEvent[]): TaskStopView | null {
  const transitions = events.filter((e) => e.action === 'task.transition').sort((a, b) => a.seq - b.seq);
  const stop = transitions.filter((e) => STOP_EVENTS.has(String(eventOf(e).type))).at(-1);
  const by = task.stoppedBy ?? stop?.actor ?? null;
  if (by === null) return null;
  const requestId = stop ? eventOf(stop).requestId : undefined;
  const control =
    typeof requestId === 'string'
      ? events.find((e) => (e.action === 'control.task_cancel' || e.action === 'control.task_abort') && e.metadata?.['requestId'] === requestId)
      : undefined;
  const reason = control?.metadata?.['reason'];
  const last = transitions.at(-1);
  const outcome: TaskStopView['outcome'] =
    taskStateHas(task.state, 'stopping')
      ? 'stopping'
      : task.state === TASK_STATE.failed && task.errorCode === 'abort_timeout'
        ? 'timed_out'
        : task.state === TASK_STATE.aborted && last !== undefined && eventOf(last).type === 'RECOVER_INTERRUPTED'
          ? 'stopped_at_restart'
          : 'stopped';
  return {
    kind: kindOf(by),
    by,
    login: loginOf(by),
    reason: typeof reason === 'string' ? reason.slice(0, MAX_REASON) : null,
    at: stop?.timestamp ?? null,
    outcome,
  };
}
