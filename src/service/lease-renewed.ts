import { taskStateHas } from '../../machines/task-lifecycle.js';
import type { TaskRecord } from '../domain/records.js';
import type { Store } from '../store/types.js';

export interface LeaseRenewedPorts {
  store: Store;
  /** Moves the gate's write deadline on (the lease now lives longer). */
  refreshGate(task: TaskRecord): Promise<void> | void;
  /** Stops the task's work in flight here (as a stop notification does). */
  abort(taskId: string): void;
  warn(fields: Record<string, unknown>, msg: string): void;
}

/**
 * What a node does each time it renews a running task's lease on a shared database: it reads the task
 * again, moves the gate's write deadline on, and stops the turn when the task is being stopped. A stop
 * taken on another node reaches this one by a notification, which a dropped listening session can lose;
 * the stop itself is in the task's state, so it is seen here at the next renewal at the latest.
 */
export async function onLeaseRenewed(ports: LeaseRenewedPorts, taskId: string): Promise<void> {
  try {
    const task = await ports.store.get<TaskRecord>('tasks', taskId);
    if (!task) return;
    if (taskStateHas(task.state, 'stopping')) ports.abort(taskId);
    await ports.refreshGate(task);
  } catch (err) {
    ports.warn({ taskId, err: String(err) }, "the task was not read again after its lease was renewed (the gate's write deadline stays)");
  }
}
