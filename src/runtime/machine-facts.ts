// What the runtime asks of a kind's machine without running an actor: a scope that executes nothing
// (for computing snapshots purely), whether a stored state still exists, and from which snapshot a
// stored actor can be restored.
import { createActor, type AnyActorScope } from 'xstate';
import type { ActorKind, ActorRecord } from './actor-types.js';

/**
 * A scope that executes nothing, made once per kind, for computing snapshots purely (what xstate's
 * `initialTransition`/`transition` do, minus building a throwaway actor per call — that actor also
 * evaluates the machine's context factory without input, which throws for ours: both were most of
 * the cost of creating a task at intake).
 */
export class MachineFacts {
  readonly #scopes = new Map<string, AnyActorScope>();
  readonly #knownStates = new Map<string, Map<string, boolean>>();

  inertScope(kind: ActorKind): AnyActorScope {
    let scope = this.#scopes.get(kind.kind);
    if (!scope) {
      const self = createActor(kind.machine, { input: {} as never });
      scope = {
        self,
        defer: () => undefined,
        id: '',
        logger: () => undefined,
        sessionId: '',
        stopChild: () => undefined,
        system: self.system,
        emit: () => undefined,
        actionExecutor: () => undefined,
      } as unknown as AnyActorScope;
      this.#scopes.set(kind.kind, scope);
    }
    return scope;
  }

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
