// `@ccweb-bot stop`: which tasks of a resource a stop reaches, and the event each one gets.
// Waiting tasks are cancelled; the running one is aborted (its turn is interrupted by whoever hosts
// it). `preparing`, `retry_wait`, `verifying_reply` and `aborting` take neither event in the task
// machine, so a stop does not reach them (documented gap: it reaches the task once it runs or waits).
import type { TaskEvent } from '../../machines/task-lifecycle.js';
import type { TaskRecord } from '../domain/records.js';
import type { ActorRuntime, SendResult } from '../runtime/actor-runtime.js';
import type { Store } from '../store/types.js';
import { taskActorId } from '../tasks/task-actor.js';

export type StopEvent = 'CANCEL' | 'ABORT';

const STOP_EVENT: Partial<Record<string, StopEvent>> = {
  queued: 'CANCEL',
  waiting_user: 'CANCEL',
  blocked_workspace: 'CANCEL',
  running: 'ABORT',
};

export interface StopTarget {
  taskId: string;
  event: StopEvent;
}

/** Tasks of `resourceKey` a stop applies to, in arrival order. Reads the store's current (in-memory) state. */
export function stopTargets(store: Pick<Store, 'byIndex'>, resourceKey: string): StopTarget[] {
  return store
    .byIndex<TaskRecord>('tasks', 'resourceKey', resourceKey)
    .filter((t) => STOP_EVENT[t.state] !== undefined)
    .sort((a, b) => a.queueSeq - b.queueSeq)
    .map((t) => ({ taskId: t.taskId, event: STOP_EVENT[t.state]! }));
}

/**
 * Sends each target its event, one after another. A task that moved on in between is reported
 * (and alert-audited by the runtime) rather than failing the stop as a whole.
 */
export async function sendStops(
  runtime: Pick<ActorRuntime, 'send'>,
  targets: readonly StopTarget[],
  by: string,
): Promise<Array<StopTarget & { result: SendResult }>> {
  const out: Array<StopTarget & { result: SendResult }> = [];
  for (const target of targets) {
    const event: TaskEvent = { type: target.event, by };
    const result = await runtime.send(taskActorId(target.taskId), event, { by });
    out.push({ ...target, result });
  }
  return out;
}
