// The `session` actor kind: machines/session.ts hosted by the runtime, projected into the
// `sessions` collection (spec §4.3) in the same transaction as each transition, with a CAS on
// `version` (= the actor's stateVersion) so a stale writer never overwrites a newer session.
import type { Tx } from '../store/types.js';
import type { ActorKind, PersistedChange } from '../runtime/actor-runtime.js';
import type { SessionRecord } from '../domain/records.js';
import { SESSION_MACHINE_VERSION, sessionMachine, sessionStatusOf, type SessionContext } from '../../machines/session.js';

// Lives in src/domain/ (intake inserts it too); re-exported where the session manager and tests look for it.
export { newSessionRecord } from '../domain/session-record.js';

export const SESSION_KIND = 'session';

export function sessionActorId(sessionKey: string): string {
  return `session:${sessionKey}`;
}

export function sessionKind(machine: typeof sessionMachine = sessionMachine): ActorKind<typeof sessionMachine> {
  return { kind: SESSION_KIND, machine, machineVersion: SESSION_MACHINE_VERSION, project: projectSession };
}

async function projectSession(tx: Tx, change: PersistedChange): Promise<void> {
  const ctx = change.snapshot.context as SessionContext;
  const rec = await tx.get<SessionRecord>('sessions', ctx.sessionKey);
  if (!rec) throw new Error(`session record ${ctx.sessionKey} missing for ${change.actorId}`);
  await tx.put<SessionRecord>(
    'sessions',
    ctx.sessionKey,
    {
      ...rec,
      threadId: ctx.threadId,
      status: sessionStatusOf(change.snapshot.value),
      lastTaskId: ctx.taskId ?? ctx.lastTaskId,
      lastTurnId: ctx.turnId ?? ctx.lastTurnId,
      updatedAt: new Date().toISOString(),
    },
    { expectVersion: change.stateVersion - 1, versionField: 'version' },
  );
}
