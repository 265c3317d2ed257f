import type { TaskRecord } from '../domain/records.js';
import type { Tx } from '../store/types.js';
import type { ActorKind, PersistedChange } from '../runtime/actor-runtime.js';
import { TASK_MACHINE_VERSION, taskMachine, type TaskContext, type TaskState } from '../../machines/task-lifecycle.js';

export const TASK_KIND = 'task';

export function taskActorId(taskId: string): string {
  return `task:${taskId}`;
}

/**
 * The task actor kind: every transition also rewrites the task record's mirror fields (spec §4.4)
 * in the same transaction, with a compare-and-swap on `stateVersion` so a stale writer can never
 * overwrite a newer state. The caller inserts the task record (stateVersion 0) before creating the actor.
 */
export function taskKind(machine: typeof taskMachine = taskMachine): ActorKind<typeof taskMachine> {
  return {
    kind: TASK_KIND,
    machine,
    machineVersion: TASK_MACHINE_VERSION,
    project: projectTask,
    // The context copies `taskId` from the input and no guard or action of the creation events reads it.
    templateInput: ['taskId'],
    // A task's effects run only where its lease is held (src/executor/task-effects.ts), and that worker
    // hosts it: a restart restores the others when they are next used.
    restore: 'lazy',
    invokesOnRestore: true,
  };
}

async function projectTask(tx: Tx, change: PersistedChange): Promise<void> {
  const ctx = change.snapshot.context as TaskContext;
  const task = await tx.get<TaskRecord>('tasks', ctx.taskId);
  if (!task) throw new Error(`task record ${ctx.taskId} missing for ${change.actorId}`);
  await tx.put<TaskRecord>(
    'tasks',
    ctx.taskId,
    {
      ...task,
      state: change.toState as TaskState,
      attempt: ctx.attempt,
      replyAttempt: ctx.replyAttempt,
      errorCode: ctx.errorCode,
      mcpFailureReason: ctx.mcpFailureReason,
      nextRetryAt: ctx.nextRetryAt === null ? null : new Date(ctx.nextRetryAt).toISOString(),
      leaseId: ctx.leaseId,
      stoppedBy: ctx.stoppedBy,
      updatedAt: new Date().toISOString(),
    },
    { expectVersion: change.stateVersion - 1, versionField: 'stateVersion' },
  );
}
