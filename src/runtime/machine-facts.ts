// What the runtime asks of a kind's machine without running an actor: whether a stored state still
// exists, and from which snapshot a stored actor can be restored. (Snapshots computed purely, for a
// creation, come from xstate's public `initialTransition`/`transition`: creation-steps.ts.)
import type { ActorKind, ActorRecord } from './actor-types.js';

/** The kind's machine's state node named `state` (a top-level state), or undefined when it has none. */
function stateNodeOf(kind: ActorKind, state: string) {
  try {
    return kind.machine.getStateNodeById(`${kind.machine.id}.${state}`);
  } catch {
    return undefined;
  }
}

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
      exists = stateNodeOf(kind, state) !== undefined;
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
  if (snapshot === undefined || !stateExists(kind, rec.state)) return undefined;
  return kind.invokesOnRestore === true ? withStateInvokes(kind, snapshot as PersistedMachineSnapshot) : snapshot;
}

interface PersistedMachineSnapshot {
  value: unknown;
  context: unknown;
  children?: Record<string, unknown>;
}

/**
 * The snapshot with a child for each invoke of its state that it lacks: one written before the state
 * invoked anything, restored as it is, would start no effect and never move again. xstate restarts
 * an active child when it restores the snapshot, so the added one starts the state's effect.
 */
export function withStateInvokes(kind: ActorKind, snapshot: PersistedMachineSnapshot): PersistedMachineSnapshot {
  const node = typeof snapshot.value === 'string' ? stateNodeOf(kind, snapshot.value) : undefined;
  if (!node) return snapshot;
  const children = { ...(snapshot.children ?? {}) };
  let added = false;
  for (const invoke of node.invoke) {
    if (typeof invoke.src !== 'string' || invoke.id in children) continue;
    const input: unknown = typeof invoke.input === 'function' ? (invoke.input as (args: { context: unknown; event: { type: string } }) => unknown)({ context: snapshot.context, event: { type: 'xstate.init' } }) : invoke.input;
    children[invoke.id] = { snapshot: { status: 'active', input }, src: invoke.src, syncSnapshot: false };
    added = true;
  }
  return added ? { ...snapshot, children } : snapshot;
}
