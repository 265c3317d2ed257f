// What the runtime asks of a kind's machine without running an actor: whether a stored state still
// exists, and from which snapshot a stored actor can be restored. (Snapshots computed purely, for a
// creation, come from xstate's public `initialTransition`/`transition`: creation-steps.ts.)
import type { ActorKind, ActorRecord } from './actor-types.js';

/** Facts about each kind's machine, remembered per kind (a machine's states never change). */
export class MachineFacts {
  readonly #knownStates = new Map<string, Map<string, boolean>>();

  stateExists(kind: ActorKind, state: string): boolean {
    // Asked for every unhosted queued task on every scheduler scan (has()): remembered per kind,
    // since a machine's states never change.
    let states = this.#knownStates.get(kind.kind);
    if (!states) this.#knownStates.set(kind.kind, (states = new Map()));
    let exists = states.get(state);
    if (exists === undefined) {
      try {
        exists = kind.machine.getStateNodeById(`${kind.machine.id}.${state}`) !== undefined;
      } catch {
        exists = false;
      }
      states.set(state, exists);
    }
    return exists;
  }
}

/**
 * The snapshot to restore a stored actor from — its own, or migrated from an older machine version —
 * or undefined when that is impossible (unknown kind, no migration, a state the machine no longer has).
 */
export function restorableSnapshot(rec: ActorRecord, kind: ActorKind | undefined, stateExists: (kind: ActorKind, state: string) => boolean): unknown {
  if (!kind) return undefined;
  const snapshot = rec.machineVersion === kind.machineVersion ? rec.snapshot : kind.migrate?.(rec.snapshot, rec.machineVersion);
  return snapshot !== undefined && stateExists(kind, rec.state) ? snapshot : undefined;
}
