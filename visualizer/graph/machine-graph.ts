import type { AnyStateMachine, StateNode, TransitionDefinition } from 'xstate';

/**
 * A statechart as plain data, read from the machine's own state nodes (`machine.root`), so every
 * drawing (the visualizer page, Mermaid, SVG exports) shows exactly what the runtime executes.
 * State ids are the dotted paths the runtime stores (`running`, `a.b`), so an actor record's
 * `state` and an audit event's `toState` name a node directly.
 */
export interface MachineGraph {
  id: string;
  description: string | null;
  /** Path of the root's initial state. */
  initial: string | null;
  nodes: GraphNode[];
  edges: GraphEdge[];
}

export interface GraphNode {
  /** Dotted path from the root (`queued`, `parent.child`). */
  id: string;
  key: string;
  parent: string | null;
  type: 'atomic' | 'compound' | 'parallel' | 'final' | 'history';
  description: string | null;
  /** Path of the initial child of a compound state. */
  initial: string | null;
  /** Actor logic invoked while in this state (`queryReply`). */
  invokes: { id: string; src: string }[];
}

export interface GraphEdge {
  id: string;
  source: string;
  /** Null for a targetless transition (actions only, the state does not change). */
  target: string | null;
  /** The event type as the machine sees it (`CLAIM`, `xstate.done.actor.queryReply`, `` for always). */
  event: string;
  /** A short label for drawings: `CLAIM`, `done: queryReply`, `always`. */
  label: string;
  guard: string | null;
  actions: string[];
  /** Position among the transitions for the same event from the same source (guard order). */
  order: number;
}

type AnyNode = StateNode<any, any>;
type AnyTransition = TransitionDefinition<any, any>;

export function machineGraph(machine: AnyStateMachine): MachineGraph {
  const nodes: GraphNode[] = [];
  const edges: GraphEdge[] = [];
  const root = machine.root as AnyNode;
  const visit = (node: AnyNode): void => {
    for (const child of Object.values(node.states) as AnyNode[]) {
      nodes.push({
        id: pathOf(child),
        key: child.key,
        parent: child.parent && child.parent !== root ? pathOf(child.parent) : null,
        type: child.type,
        description: child.description ?? null,
        initial: initialOf(child),
        invokes: child.invoke.map((inv) => ({ id: String(inv.id), src: typeof inv.src === 'string' ? inv.src : String(inv.id) })),
      });
      for (const [event, list] of child.transitions) addEdges(edges, child, event, list);
      if (child.always) addEdges(edges, child, '', child.always);
      visit(child);
    }
  };
  visit(root);
  return {
    id: machine.id,
    description: root.description ?? null,
    initial: initialOf(root),
    nodes,
    edges,
  };
}

function addEdges(edges: GraphEdge[], node: AnyNode, event: string, list: readonly AnyTransition[]): void {
  list.forEach((t, order) => {
    const source = pathOf(node);
    const targets = t.target ?? [];
    const targetPaths = targets.length === 0 ? [null] : targets.map((n) => pathOf(n as AnyNode));
    for (const target of targetPaths) {
      edges.push({
        id: `${source}|${event}|${order}|${target ?? ''}`,
        source,
        target,
        event,
        label: eventLabel(event),
        guard: guardName(t.guard),
        actions: (t.actions ?? []).map(implementationName),
        order,
      });
    }
  });
}

function pathOf(node: AnyNode): string {
  return node.path.join('.');
}

function initialOf(node: AnyNode): string | null {
  if (node.type !== 'compound') return null;
  const target = node.initial?.target?.[0] as AnyNode | undefined;
  return target ? pathOf(target) : null;
}

/** `xstate.done.actor.queryReply` → `done: queryReply`; after/always get readable names too. */
export function eventLabel(event: string): string {
  if (event === '') return 'always';
  const m = /^xstate\.(done|error)\.actor\.(.+)$/.exec(event);
  if (m) return `${m[1]}: ${m[2]}`;
  const after = /^xstate\.after\.([^.]+)\./.exec(event);
  if (after) return `after ${after[1]}`;
  return event;
}

function guardName(guard: unknown): string | null {
  if (guard === undefined || guard === null) return null;
  return implementationName(guard);
}

/** The name of a guard/action/actor reference: a string, `{type}`, or an inline function. */
export function implementationName(impl: unknown): string {
  if (typeof impl === 'string') return impl;
  if (typeof impl === 'function') {
    // xstate's built-in action creators carry their type (`xstate.assign`) on the function.
    const typed = (impl as { type?: unknown }).type;
    if (typeof typed === 'string') return typed;
    return impl.name && impl.name !== 'anonymous' ? impl.name : 'inline';
  }
  if (impl && typeof impl === 'object' && 'type' in impl) return implementationName((impl as { type: unknown }).type);
  return 'inline';
}
