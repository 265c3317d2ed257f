// Whether this node acts for a task's comments now: its repository is owned here; a comment whose
// task is gone is the leading node's to give up. One node acts for every task without reading it
// (a long queue's rows are looked at on every pass).
import type { TaskRecord } from '../domain/records.js';
import { EVERY_REPOSITORY, type RepositoryScope } from '../domain/repository-scope.js';
import type { Store } from '../store/types.js';

export async function actsForTask(store: Store, scope: Pick<RepositoryScope, 'owns' | 'leads'>, taskId: string): Promise<boolean> {
  if (scope === EVERY_REPOSITORY) return true;
  const task = await store.get<TaskRecord>('tasks', taskId);
  return task ? scope.owns(task.repoKey) : scope.leads();
}
