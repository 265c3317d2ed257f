/**
 * Reading a machine's own declaration of its states: their tags, the events they take, whether they
 * are final. The predicates the machines export are built on these, so what a state means to the
 * parts around a machine is read from that machine and nowhere restated.
 */
import type { AnyStateMachine } from 'xstate';

interface TopStateNode {
  type: string;
  tags: readonly string[];
  transitions: ReadonlyMap<string, unknown>;
}

/**
 * The top-level state node named `state`, or undefined for a name the machine does not have (a
 * missing state reads as the name `null` or `undefined`, which no machine has; an inherited name such
 * as `toString` is no state).
 */
function topState(machine: AnyStateMachine, state: string | null | undefined): TopStateNode | undefined {
  const nodes = machine.root.states as Record<string, TopStateNode>;
  const name = String(state);
  return Object.hasOwn(nodes, name) ? nodes[name] : undefined;
}

/** Whether `state` carries `tag` (an unknown or missing state carries none). */
export function stateHasTag(machine: AnyStateMachine, state: string | null | undefined, tag: string): boolean {
  return topState(machine, state)?.tags.includes(tag) ?? false;
}

/** Whether `state` has a transition for events of `type` (guards aside: whether it may fire is the machine's business). */
export function stateTakes(machine: AnyStateMachine, state: string | null | undefined, type: string): boolean {
  return topState(machine, state)?.transitions.has(type) ?? false;
}

/** Whether `state` is final (an unknown or missing state is not). */
export function stateIsFinal(machine: AnyStateMachine, state: string | null | undefined): boolean {
  return topState(machine, state)?.type === 'final';
}
