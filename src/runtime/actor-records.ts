// What one durable transition of an actor writes: its `actors` record (with the persisted snapshot),
// the kind's projection, and a `<kind>.transition` audit event — all in the caller's transaction.
// The record and the event are built purely (actorRecord, transitionAudit); writeChange does the I/O.
import type { EventObject } from 'xstate';
import { recordDocument } from './record-document.js';
import type { AuditEventInput, Tx } from '../store/types.js';
import type { ActorKind, ActorRecord, PersistedChange, RuntimeOptions } from './actor-types.js';

const MAX_EVENT_AUDIT_BYTES = 2_000;

/** The stored actor after `change`. `createdAt` is kept from the previous record when there is one. */
export function actorRecord(kind: ActorKind, change: PersistedChange, taskId: string | null, persisted: unknown, createdAt: string, now: string): ActorRecord {
  return {
    actorId: change.actorId,
    kind: kind.kind,
    machineId: kind.machine.id,
    machineVersion: kind.machineVersion,
    state: change.toState,
    status: change.snapshot.status,
    stateVersion: change.stateVersion,
    snapshot: persisted,
    taskId,
    createdAt,
    updatedAt: now,
  };
}

/** The audit event of a transition: from/to state, the new version, the event (bounded) and why it failed if it did. */
export function transitionAudit(kind: ActorKind, change: PersistedChange, taskId: string | null): AuditEventInput {
  return {
    action: `${kind.kind}.transition`,
    actor: change.by,
    actorId: change.actorId,
    taskId,
    fromState: change.fromState,
    toState: change.toState,
    stateVersion: change.stateVersion,
    // The context's error code, when the machine keeps one: why a task went to retry_wait/failed.
    errorCode: errorCodeOf(change.snapshot.context),
    metadata: change.event ? { event: summarizeEvent(change.event) } : {},
  };
}

/**
 * Writes one transition: insert (a new actor) or compare-and-swap on `stateVersion`, the kind's
 * projection, the audit event. `persisted` defaults to the machine's persisted form of the snapshot.
 */
export async function writeChange(
  tx: Tx,
  kind: ActorKind,
  change: PersistedChange,
  taskId: string | null,
  at: { isNew: boolean; createdAt: string | null; now: string },
  persisted?: unknown,
  announce?: RuntimeOptions['announce'],
): Promise<void> {
  // The actor's record (its persisted snapshot) as a lowdb document bound to its row in `tx`.
  const doc = recordDocument<ActorRecord>(tx, 'actors', change.actorId, at.isNew ? { create: true } : { create: false, put: { expectVersion: change.stateVersion - 1, versionField: 'stateVersion' } });
  if (!at.isNew) await doc.read();
  doc.data = actorRecord(kind, change, taskId, persisted ?? kind.machine.getPersistedSnapshot(change.snapshot), doc.data?.createdAt ?? at.createdAt ?? at.now, at.now);
  await doc.write();
  await kind.project?.(tx, change);
  await tx.appendAudit(transitionAudit(kind, change, taskId));
  await announce?.(tx, change);
}

export function errorCodeOf(context: unknown): string | null {
  const code = (context as { errorCode?: unknown } | null)?.errorCode;
  return typeof code === 'string' ? code : null;
}

/** Event fields for the audit log: bounded, and never free text that could carry a secret. */
export function summarizeEvent(event: EventObject): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(event as unknown as Record<string, unknown>)) {
    if (k === 'output' || k === 'error') {
      out[k] = v instanceof Error ? { message: v.message.slice(0, 200) } : v;
    } else if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' || v === null) {
      out[k] = v;
    }
  }
  const json = JSON.stringify(out);
  return json.length > MAX_EVENT_AUDIT_BYTES ? { type: event.type, truncated: true } : out;
}
