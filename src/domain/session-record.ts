// The session record (spec §4.3) as it is first inserted, version 0. Intake inserts it with the
// task and the session manager when it opens a thread; the session actor's projection keeps it
// current from there (src/sessions/session-actor.ts). Pure, so both sides may import it.
import type { SessionRecord, TaskRecord } from './records.js';

/** The record inserted (version 0) together with the actor; the projection keeps it current. */
export function newSessionRecord(task: TaskRecord, hostRef: string, now: string): SessionRecord {
  return {
    sessionKey: task.sessionKey,
    resourceKey: task.resourceKey,
    repoKey: task.repoKey,
    kind: task.resource.kind,
    number: task.resource.number,
    threadId: null,
    runtime: { app: 'codexapp', mode: 'yolo' },
    mcp: { server: 'gitea', transport: 'stdio', hostRef },
    status: 'active',
    lastTaskId: null,
    lastTurnId: null,
    createdAt: now,
    updatedAt: now,
    version: 0,
  };
}
