import type { EventObject } from 'xstate';
import type { RepoLockEvent } from '../../machines/repo-lock.js';
import type { TaskEvent } from '../../machines/task-lifecycle.js';

// The runtime accepts any EventObject; these keep the scheduler's events checked against the machines.
export const lockEvent = (event: RepoLockEvent): EventObject => event;
export const taskEvent = (event: TaskEvent): EventObject => event;
