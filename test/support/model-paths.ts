/**
 * Model-based paths for any XState v5 machine: enumerate every transition (edge), then generate
 * paths from the initial state that together take every edge, replayable purely with
 * `transition()` or against a persisted runtime.
 *
 * An edge is `<source state node id>|<event descriptor>|<index of the candidate transition>`, e.g.
 * `task.running|TURN_FAILED|1` (second guard branch), `replyVerifier.querying|xstate.done.actor.queryReply|0`,
 * `toy.check|always|0`. It includes invoke done/error edges and `always` edges, which the
 * @xstate/graph traversal does not see.
 *
 * Which edges an event takes is measured, not guessed: the pure step runs the machine's own
 * `transition(snapshot, event, scope)` with a scope that executes nothing and records the
 * `@xstate.microstep` inspection events (their `_transitions`), the same stream a runtime can record
 * with `createCoverageInspector()`.
 */
import { getStateNodes } from '@xstate/graph';
import {
  __unsafe_getAllOwnEventDescriptors,
  createActor,
  type AnyActor,
  type AnyActorScope,
  type AnyEventObject,
  type AnyMachineSnapshot,
  type AnyStateMachine,
  type AnyTransitionDefinition,
  type InputFrom,
  type InspectionEvent,
  type StateValue,
} from 'xstate';

export type EdgeKind = 'event' | 'always' | 'done' | 'error' | 'after';

export interface ModelEdge {
  /** `<source>|<eventType>|<index>`; eventType is `always` for eventless transitions. */
  id: string;
  source: string;
  eventType: string;
  index: number;
  kind: EdgeKind;
  /** Target state node ids; empty for a targetless (internal) transition. */
  targets: string[];
  /** Guard name (`inline` for a function guard), null when unguarded. */
  guard: string | null;
}

export interface PathStep {
  event: AnyEventObject;
  before: StateValue;
  after: StateValue;
  statusAfter: AnyMachineSnapshot['status'];
  /** The first edge the event took (the event's own transition). */
  edgeId: string;
  /** Every edge taken in this macrostep, in order (the event's, then `always`/raised ones). */
  edgeIds: string[];
}

export interface ModelPath {
  description: string;
  steps: PathStep[];
  /** State value at the end of the path. */
  end: StateValue;
}

export interface CoveringPlan {
  machineId: string;
  edges: ModelEdge[];
  paths: ModelPath[];
  /** Edge ids the paths take (and `always` edges of the initial macrostep). */
  covered: string[];
  /** Enumerated edges no sample event reached: missing event cases or dead transitions. */
  uncovered: string[];
  /** Distinct serialized states found by the traversal. */
  vertices: number;
}

export interface GenerateOptions<TMachine extends AnyStateMachine> {
  /** Sample events to try in a snapshot (they may be derived from its context). */
  events: (snapshot: AnyMachineSnapshot) => readonly AnyEventObject[];
  /**
   * What distinguishes two states for the traversal: exactly the context guards read, bounded.
   * The state value and status are always added.
   */
  serialize: (snapshot: AnyMachineSnapshot) => unknown;
  input?: InputFrom<TMachine>;
  /**
   * Also try the snapshot's own event descriptors that `events` gave no sample for (`{type}`, and
   * `xstate.done.actor.<id>` / `xstate.error.actor.<id>` synthesized). Default true.
   */
  includeDescriptorEvents?: boolean;
  /** Traversal bound (distinct serialized states). Default 10 000. */
  maxVertices?: number;
}

// ---------------------------------------------------------------------------------------------
// Edges

function kindOf(eventType: string): EdgeKind {
  if (eventType === '') return 'always';
  if (eventType.startsWith('xstate.done.')) return 'done';
  if (eventType.startsWith('xstate.error.')) return 'error';
  if (eventType.startsWith('xstate.after.')) return 'after';
  return 'event';
}

function guardName(guard: unknown): string | null {
  if (guard === undefined || guard === null) return null;
  if (typeof guard === 'string') return guard;
  if (typeof guard === 'function') return guard.name ? `inline:${guard.name}` : 'inline';
  if (typeof guard === 'object' && 'type' in guard) return String((guard as { type: unknown }).type);
  return 'inline';
}

function edgeIdParts(source: string, eventType: string, index: number): string {
  return `${source}|${eventType === '' ? 'always' : eventType}|${index}`;
}

/** The stable edge id of a transition definition (works for any `machine.provide()` variant). */
export function edgeIdOf(transition: AnyTransitionDefinition): string {
  const source = transition.source;
  const list = transition.eventType === '' ? (source.always ?? []) : (source.transitions.get(transition.eventType) ?? []);
  const index = list.indexOf(transition);
  return edgeIdParts(source.id, transition.eventType, index);
}

/**
 * Every legal transition of the machine: state node × event descriptor × candidate index (guard
 * branch), including invoke done/error edges and `always` edges. Sorted by document order.
 */
export function enumerateEdges(machine: AnyStateMachine): ModelEdge[] {
  const nodes = [machine.root, ...getStateNodes(machine)];
  const seen = new Set<string>();
  const edges: ModelEdge[] = [];
  for (const node of nodes) {
    if (seen.has(node.id)) continue;
    seen.add(node.id);
    const lists: Array<[string, AnyTransitionDefinition[]]> = [...node.transitions.entries()];
    if (node.always?.length) lists.push(['', node.always]);
    for (const [eventType, list] of lists) {
      list.forEach((t, index) => {
        edges.push({
          id: edgeIdParts(node.id, eventType, index),
          source: node.id,
          eventType: eventType === '' ? 'always' : eventType,
          index,
          kind: kindOf(eventType),
          targets: (t.target ?? []).map((n) => n.id),
          guard: guardName(t.guard),
        });
      });
    }
  }
  return edges;
}

// ---------------------------------------------------------------------------------------------
// Pure stepping with edge capture

export interface PureStepper {
  initial(): { snapshot: AnyMachineSnapshot; edgeIds: string[] };
  step(snapshot: AnyMachineSnapshot, event: AnyEventObject): { snapshot: AnyMachineSnapshot; edgeIds: string[] };
}

/**
 * Steps the machine purely (no action, no actor runs: the scope executes nothing) and reports the
 * edges each macrostep took, from the machine's own `@xstate.microstep` inspection events.
 */
export function createPureStepper<TMachine extends AnyStateMachine>(
  machine: TMachine,
  input?: InputFrom<TMachine>,
): PureStepper {
  const captured: AnyTransitionDefinition[] = [];
  let self: AnyActor | undefined;
  const actor: AnyActor = createActor(machine as AnyStateMachine, {
    input,
    inspect: (ev: InspectionEvent) => {
      if (ev.type === '@xstate.microstep' && self !== undefined && ev.actorRef === self) {
        captured.push(...ev._transitions);
      }
    },
  });
  self = actor;
  const noop = () => {};
  const scope = {
    self: actor,
    defer: noop,
    id: '',
    logger: noop,
    sessionId: '',
    stopChild: noop,
    system: actor.system,
    emit: noop,
    actionExecutor: noop,
  } as unknown as AnyActorScope;
  const take = () => {
    const ids = captured.map(edgeIdOf);
    captured.length = 0;
    return ids;
  };
  return {
    initial() {
      captured.length = 0;
      const snapshot = machine.getInitialSnapshot(scope, input) as AnyMachineSnapshot;
      return { snapshot, edgeIds: take() };
    },
    step(snapshot, event) {
      captured.length = 0;
      const next = machine.transition(snapshot, event, scope) as AnyMachineSnapshot;
      return { snapshot: next, edgeIds: take() };
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Events

function synthesizeEvent(descriptor: string): AnyEventObject | undefined {
  if (descriptor === '' || descriptor.includes('*')) return undefined;
  if (descriptor.startsWith('xstate.done.actor.')) return { type: descriptor, output: undefined };
  if (descriptor.startsWith('xstate.error.actor.')) {
    return { type: descriptor, error: { name: 'Error', message: `model: synthetic failure (${descriptor})` } };
  }
  return { type: descriptor };
}

function eventsFor<TMachine extends AnyStateMachine>(
  options: GenerateOptions<TMachine>,
  snapshot: AnyMachineSnapshot,
): AnyEventObject[] {
  const cases = [...options.events(snapshot)];
  if (options.includeDescriptorEvents !== false) {
    const typed = new Set(cases.map((e) => e.type));
    for (const descriptor of __unsafe_getAllOwnEventDescriptors(snapshot) as string[]) {
      if (typed.has(descriptor)) continue;
      const synthesized = synthesizeEvent(descriptor);
      if (synthesized) cases.push(synthesized);
    }
  }
  const unique = new Map<string, AnyEventObject>();
  for (const e of cases) {
    const key = JSON.stringify(e);
    if (!unique.has(key)) unique.set(key, e);
  }
  return [...unique.values()];
}

function vertexKey(snapshot: AnyMachineSnapshot, serialized: unknown): string {
  const s = typeof serialized === 'string' ? serialized : JSON.stringify(serialized);
  return `${JSON.stringify(snapshot.value)}|${snapshot.status}|${s}`;
}

// ---------------------------------------------------------------------------------------------
// Covering paths

interface Vertex {
  key: string;
  snapshot: AnyMachineSnapshot;
  depth: number;
  parent: { key: string; event: AnyEventObject } | null;
}

interface Arc {
  from: string;
  event: AnyEventObject;
  edgeIds: string[];
}

function describe(steps: PathStep[]): string {
  return steps.length === 0 ? '(initial)' : steps.map((s) => s.event.type).join(' → ');
}

/**
 * Paths from the initial state that together take every reachable edge.
 *
 * 1. Breadth-first traversal over serialized states (`serialize` + state value + status), trying
 *    `events(snapshot)` (plus synthesized descriptor events) in every state, stepping purely and
 *    recording which edges each (state, event) takes.
 * 2. For each arc that takes a not-yet-covered edge (deepest first): the shortest path to its source,
 *    the arc, then a greedy extension that keeps taking uncovered edges; coverage is measured by
 *    replaying the path concretely. Paths that are prefixes of others are dropped.
 */
export function generateCoveringPaths<TMachine extends AnyStateMachine>(
  machine: TMachine,
  options: GenerateOptions<TMachine>,
): CoveringPlan {
  const edges = enumerateEdges(machine);
  const stepper = createPureStepper(machine, options.input);
  const maxVertices = options.maxVertices ?? 10_000;

  const init = stepper.initial();
  const rootKey = vertexKey(init.snapshot, options.serialize(init.snapshot));
  const vertices = new Map<string, Vertex>([[rootKey, { key: rootKey, snapshot: init.snapshot, depth: 0, parent: null }]]);
  const arcs: Arc[] = [];
  const queue: Vertex[] = [vertices.get(rootKey)!];
  while (queue.length > 0) {
    const vertex = queue.shift()!;
    if (vertex.snapshot.status !== 'active') continue;
    for (const event of eventsFor(options, vertex.snapshot)) {
      const { snapshot: next, edgeIds: taken } = stepper.step(vertex.snapshot, event);
      if (taken.length === 0) continue; // not handled: no edge
      arcs.push({ from: vertex.key, event, edgeIds: taken });
      const key = vertexKey(next, options.serialize(next));
      if (!vertices.has(key)) {
        if (vertices.size >= maxVertices) {
          throw new Error(
            `model-paths: more than ${maxVertices} states in ${machine.id}; serialize() keeps unbounded context`,
          );
        }
        const v: Vertex = { key, snapshot: next, depth: vertex.depth + 1, parent: { key: vertex.key, event } };
        vertices.set(key, v);
        queue.push(v);
      }
    }
  }

  const covered = new Set<string>(init.edgeIds);
  const replay = (events: AnyEventObject[]) => {
    let snapshot = init.snapshot;
    const steps: PathStep[] = [];
    for (const event of events) {
      const before = snapshot.value;
      const r = stepper.step(snapshot, event);
      snapshot = r.snapshot;
      steps.push({
        event,
        before,
        after: snapshot.value,
        statusAfter: snapshot.status,
        edgeId: r.edgeIds[0] ?? '',
        edgeIds: r.edgeIds,
      });
    }
    return { snapshot, steps };
  };
  const treeEvents = (key: string): AnyEventObject[] => {
    const events: AnyEventObject[] = [];
    for (let v = vertices.get(key); v?.parent; v = vertices.get(v.parent.key)) events.unshift(v.parent.event);
    return events;
  };

  const ordered = arcs
    .map((arc, order) => ({ arc, order, depth: vertices.get(arc.from)!.depth }))
    .sort((a, b) => b.depth - a.depth || a.order - b.order)
    .map((x) => x.arc);
  const maxExtension = edges.length * 2 + 10;
  const paths: ModelPath[] = [];
  for (const arc of ordered) {
    if (arc.edgeIds.every((id) => covered.has(id))) continue;
    const events = [...treeEvents(arc.from), arc.event];
    let { snapshot, steps } = replay(events);
    const pathCovered = new Set(steps.flatMap((s) => s.edgeIds));
    // Greedy extension: keep taking edges nobody has covered yet.
    for (let i = 0; i < maxExtension && snapshot.status === 'active'; i++) {
      let extended = false;
      for (const event of eventsFor(options, snapshot)) {
        const r = stepper.step(snapshot, event);
        if (r.edgeIds.some((id) => !covered.has(id) && !pathCovered.has(id))) {
          steps.push({
            event,
            before: snapshot.value,
            after: r.snapshot.value,
            statusAfter: r.snapshot.status,
            edgeId: r.edgeIds[0] ?? '',
            edgeIds: r.edgeIds,
          });
          r.edgeIds.forEach((id) => pathCovered.add(id));
          snapshot = r.snapshot;
          extended = true;
          break;
        }
      }
      if (!extended) break;
    }
    const before = covered.size;
    pathCovered.forEach((id) => covered.add(id));
    if (covered.size === before) continue; // replay diverged from the traversal; nothing gained
    paths.push({ description: describe(steps), steps, end: snapshot.value });
  }

  const signature = (p: ModelPath) => p.steps.map((s) => JSON.stringify(s.event));
  const kept = paths.filter((p, i) => {
    const sig = signature(p);
    return !paths.some((q, j) => {
      if (j === i || q.steps.length < p.steps.length) return false;
      if (q.steps.length === p.steps.length && j > i) return false; // identical: keep the first
      const qs = signature(q);
      return sig.every((s, k) => s === qs[k]);
    });
  });

  return {
    machineId: machine.id,
    edges,
    paths: kept,
    covered: edges.map((e) => e.id).filter((id) => covered.has(id)),
    uncovered: edges.map((e) => e.id).filter((id) => !covered.has(id)),
    vertices: vertices.size,
  };
}

// ---------------------------------------------------------------------------------------------
// Replay and coverage

export interface PureReplayResult {
  covered: Set<string>;
  /** One message per step whose edges or resulting state differ from the recorded path. */
  mismatches: string[];
  end: AnyMachineSnapshot;
}

/** Replays a path purely from the initial state, checking every step's edges and state. */
export function replayPathPurely<TMachine extends AnyStateMachine>(
  machine: TMachine,
  path: ModelPath,
  input?: InputFrom<TMachine>,
): PureReplayResult {
  const stepper = createPureStepper(machine, input);
  const init = stepper.initial();
  const covered = new Set<string>(init.edgeIds);
  const mismatches: string[] = [];
  let snapshot = init.snapshot;
  path.steps.forEach((step, i) => {
    const before = JSON.stringify(snapshot.value);
    if (before !== JSON.stringify(step.before)) {
      mismatches.push(`step ${i} ${step.event.type}: before ${before}, expected ${JSON.stringify(step.before)}`);
    }
    const r = stepper.step(snapshot, step.event);
    snapshot = r.snapshot;
    r.edgeIds.forEach((id) => covered.add(id));
    if (r.edgeIds.join(',') !== step.edgeIds.join(',')) {
      mismatches.push(`step ${i} ${step.event.type}: took [${r.edgeIds.join(', ')}], expected [${step.edgeIds.join(', ')}]`);
    }
    if (JSON.stringify(snapshot.value) !== JSON.stringify(step.after)) {
      mismatches.push(
        `step ${i} ${step.event.type}: after ${JSON.stringify(snapshot.value)}, expected ${JSON.stringify(step.after)}`,
      );
    }
  });
  return { covered, mismatches, end: snapshot };
}

function belongsTo(transition: AnyTransitionDefinition, machineId: string | undefined): boolean {
  return machineId === undefined || transition.source.machine.id === machineId;
}

/**
 * Edge ids taken according to an inspection stream (`@xstate.microstep` events carry the
 * transitions actually taken). `machineId` keeps only that machine's edges.
 */
export function coverageFromMicrosteps(events: Iterable<InspectionEvent>, machineId?: string): Set<string> {
  const covered = new Set<string>();
  for (const ev of events) {
    if (ev.type !== '@xstate.microstep') continue;
    for (const t of ev._transitions) if (belongsTo(t, machineId)) covered.add(edgeIdOf(t));
  }
  return covered;
}

/** An `inspect` callback for `createActor(machine, { inspect })` that accumulates edge coverage. */
export function createCoverageInspector(machineId?: string): {
  inspect: (ev: InspectionEvent) => void;
  covered: Set<string>;
} {
  const covered = new Set<string>();
  return {
    covered,
    inspect: (ev) => {
      if (ev.type !== '@xstate.microstep') return;
      for (const t of ev._transitions) if (belongsTo(t, machineId)) covered.add(edgeIdOf(t));
    },
  };
}

function countOf(x: number | ReadonlySet<unknown> | readonly unknown[]): number {
  if (typeof x === 'number') return x;
  return 'size' in x ? x.size : x.length;
}

/** `transitions covered: N/M (machine-name)`. */
export function formatCoverage(
  name: string,
  covered: number | ReadonlySet<unknown> | readonly unknown[],
  total: number | ReadonlySet<unknown> | readonly unknown[],
): string {
  return `transitions covered: ${countOf(covered)}/${countOf(total)} (${name})`;
}
