// Which repository a stored actor belongs to, so that a node that shares the cluster hosts only the
// actors of the repositories it owns (src/cluster/ownership.ts). Actors of a task (the task, its
// reply verifier) go with the task's repository; a repository's lock and its sessions with theirs.
// An app-server is a process of one node: its actor id names the node (appServerActorId(nodeId)).
import type { SessionRecord, TaskRecord } from '../domain/records.js';
import type { ActorRecord } from '../runtime/actor-runtime.js';
import type { Store } from '../store/types.js';
import { LOCK_KIND } from '../leases/repo-lock-actor.js';
import { SESSION_KIND } from '../sessions/session-actor.js';

/** The actor's repository, or null for an actor of no repository (a node's own app-server). */
export async function repositoryOfActor(store: Store, rec: Pick<ActorRecord, 'actorId' | 'kind' | 'taskId'>): Promise<string | null> {
  if (rec.taskId !== null) return (await store.get<TaskRecord>('tasks', rec.taskId))?.repoKey ?? null;
  if (rec.kind === LOCK_KIND) return rec.actorId.slice('lock:'.length);
  if (rec.kind === SESSION_KIND) return (await store.get<SessionRecord>('sessions', rec.actorId.slice('session:'.length)))?.repoKey ?? null;
  return null;
}
