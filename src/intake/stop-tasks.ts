// `@ccweb-bot stop`: which tasks of a resource a stop reaches, and the event each one gets (in
// every non-terminal state). A task with nothing in flight is cancelled at once; one whose work is
// in flight (workspace, turn, publishing, verification) is aborted: the executor stops that work,
// publishes nothing more, and releases the lease only once it has stopped. A task already
// `aborting` is reached without an event (it is stopping); `received` never lasts past intake.
import { taskStatesWith, type TaskEvent } from '../../machines/task-lifecycle.js';
import type { TaskRecord } from '../domain/records.js';
import type { ActorRuntime, SendResult } from '../runtime/actor-runtime.js';
import type { Store } from '../store/types.js';
import { taskActorId } from '../tasks/task-actor.js';

export type StopEvent = 'CANCEL' | 'ABORT';

/** The event a stop sends a task in each state it reaches (the machine's stop tags); `aborting`: none. */
const STOP_EVENT: Partial<Record<string, StopEvent | null>> = {
  ...Object.fromEntries(taskStatesWith('cancelledByStop').map((s) => [s, 'CANCEL'])),
  ...Object.fromEntries(taskStatesWith('abortedByStop').map((s) => [s, 'ABORT'])),
  aborting: null,
};

export interface StopTarget {
  taskId: string;
  /** Null: the task is already stopping; nothing is sent. */
  event: StopEvent | null;
}

/** Tasks of `resourceKey` a stop applies to, in arrival order. Reads the store's current state. */
export async function stopTargets(store: Pick<Store, 'byIndex'>, resourceKey: string): Promise<StopTarget[]> {
  return (await store.byIndex<TaskRecord>('tasks', 'resourceKey', resourceKey))
    .filter((t) => STOP_EVENT[t.state] !== undefined)
    .sort((a, b) => a.queueSeq - b.queueSeq)
    .map((t) => ({ taskId: t.taskId, event: STOP_EVENT[t.state]! }));
}

/**
 * Sends each target its event, one after another. A task that moved on in between is sent the event
 * its new state takes, once more (a stop must not lose a race with the scheduler's CLAIM); one that
 * ended meanwhile is reported (and alert-audited by the runtime) rather than failing the stop.
 */
export async function sendStops(
  runtime: Pick<ActorRuntime, 'send' | 'stateOf'>,
  targets: readonly StopTarget[],
  by: string,
): Promise<Array<StopTarget & { result: SendResult | null }>> {
  const out: Array<StopTarget & { result: SendResult | null }> = [];
  for (const target of targets) {
    const actorId = taskActorId(target.taskId);
    let event = target.event;
    let result: SendResult | null = null;
    for (let attempt = 0; attempt < 2 && event !== null; attempt++) {
      const stop: TaskEvent = { type: event, by };
      result = await runtime.send(actorId, stop, { by });
      if (result.ok) break;
      const now = (await runtime.stateOf(actorId))?.state;
      event = now === undefined ? null : (STOP_EVENT[now] ?? null);
    }
    out.push({ ...target, event, result });
  }
  return out;
}
