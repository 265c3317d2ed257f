// The service's actor system: one xstate system whose root is the service. The root spawns every
// hosted actor (the repository locks, the sessions, the app-server, the tasks); a task's verification
// effect spawns its reply verifier. One system: actors find each other by `systemId` (`system.get`),
// one inspector sees them all, and the tree is each actor's children.
import {
  createActor,
  createMachine,
  enqueueActions,
  setup,
  type AnyActorLogic,
  type AnyActorRef,
  type AnyMachineSnapshot,
  type AnyStateMachine,
  type EventObject,
  type InspectionEvent,
} from 'xstate';

export const SERVICE_ROOT_ID = 'service';

const HOST = 'ccweb.host';
const LET_GO = 'ccweb.let_go';

interface HostEvent extends EventObject {
  type: typeof HOST;
  id: string;
  logic: AnyActorLogic;
}

/**
 * What a hosting machine does: spawn a stored actor as its child (its actor id as id and systemId),
 * stop one. It takes every other event and changes nothing: a child that fails or finishes reports
 * it to its parent, and news no transition took would leave the parent in error (xstate's rule for an
 * unhandled child error); the runtime hears of both from the child itself.
 */
const hostingTransitions = {
  [HOST]: {
    actions: enqueueActions(({ event, enqueue }) => {
      const { id, logic } = event as HostEvent;
      enqueue.spawnChild(logic, { id, systemId: id });
    }),
  },
  [LET_GO]: {
    actions: enqueueActions(({ event, enqueue }) => {
      enqueue.stopChild((event as EventObject & { id: string }).id);
    }),
  },
  '*': {},
};

/** The logics whose actors spawn hosted actors when asked (the root, a hosting effect). */
const hostingLogics = new WeakSet<object>();

export function canHost(actor: AnyActorRef): boolean {
  return hostingLogics.has((actor as unknown as { logic: object }).logic);
}

export function createServiceRoot(inspect?: (event: InspectionEvent) => void): AnyActorRef {
  const machine = createMachine({ id: SERVICE_ROOT_ID, on: hostingTransitions });
  hostingLogics.add(machine);
  const root = createActor(machine, { id: SERVICE_ROOT_ID, ...(inspect ? { inspect } : {}) });
  root.start();
  return root;
}

/**
 * An effect (a state's invoked work) under which stored actors can be hosted: a machine that invokes
 * `work` with its input and spawns what it is asked to. Hosted children persist themselves (each has
 * its own stored snapshot), so the effect's persisted snapshot keeps only its work; a snapshot of the
 * work alone (stored before the effect hosted anything) starts the effect afresh with its input.
 */
export function hostingEffect(work: AnyActorLogic): AnyStateMachine {
  const machine = setup({ actors: { work } }).createMachine({
    context: ({ input }) => ({ input: input as unknown }),
    invoke: { id: 'work', src: 'work', input: ({ context }: { context: { input: unknown } }) => context.input },
    on: {
      ...hostingTransitions,
      // The work failing fails the effect, as an effect invoked without this machine around it would:
      // its parent hears of the error (a task machine takes none: the task's actor fails, alerted).
      'xstate.error.actor.work': {
        actions: ({ event }: { event: EventObject & { error?: unknown } }) => {
          throw event.error;
        },
      },
    } as never,
  });
  const effect = Object.create(machine) as AnyStateMachine;
  effect.getPersistedSnapshot = (snapshot, options) => {
    const { work: ownWork } = (snapshot as AnyMachineSnapshot).children;
    return machine.getPersistedSnapshot({ ...snapshot, children: ownWork ? { work: ownWork } : {} } as never, options);
  };
  effect.restoreSnapshot = (snapshot, scope) => {
    const persisted = snapshot as { value?: unknown; input?: unknown };
    return persisted.value === undefined ? machine.getInitialSnapshot(scope as never, persisted.input) : machine.restoreSnapshot(snapshot, scope as never);
  };
  hostingLogics.add(effect);
  return effect;
}

/**
 * `machine` whose actor starts from `persisted` instead of its initial state (spawn takes no
 * snapshot); `created` sees the actor before it starts, so an observer misses none of its snapshots.
 */
export function restoredLogic(machine: AnyStateMachine, persisted: unknown, created: (actor: AnyActorRef) => void): AnyStateMachine {
  const logic = Object.create(machine) as AnyStateMachine;
  logic.getInitialSnapshot = (scope) => {
    created(scope.self);
    return machine.restoreSnapshot(persisted as never, scope);
  };
  return logic;
}

/** Asks `parent` to spawn `logic` as its child `id`; returns the started child. */
export function hostUnder(parent: AnyActorRef, id: string, logic: AnyActorLogic): AnyActorRef {
  if (parent.system.get(id)) throw new Error(`actor ${id} is in the actor system already`);
  parent.send({ type: HOST, id, logic } satisfies HostEvent);
  const child = (parent.getSnapshot() as AnyMachineSnapshot).children[id] as AnyActorRef | undefined;
  // The parent processes the event at once unless it is amid a transition of its own (then later):
  // hosting is never asked for from inside one.
  if (!child) throw new Error(`actor ${id} was not spawned under ${parent.id}`);
  return child;
}

/** Stops a hosted actor the way its parent's `stopChild` does, and takes it off the parent's children. */
export function letGo(actor: AnyActorRef): void {
  const parent = actor._parent;
  if (!parent) actor.stop();
  else if ((parent.getSnapshot() as AnyMachineSnapshot).status === 'active') parent.send({ type: LET_GO, id: actor.id });
  // A parent that ended takes no events: the child is stopped as its `stopChild` would (its system id freed).
  else (actor as unknown as { _stop(): void })._stop();
}

/** The live tree under `root`: each actor with its children (spawned and invoked alike). */
export interface ActorTreeNode {
  id: string;
  children: ActorTreeNode[];
}

export function actorTree(actor: AnyActorRef): ActorTreeNode {
  const children = Object.values((actor.getSnapshot() as { children?: Record<string, AnyActorRef> }).children ?? {});
  return { id: actor.id, children: children.map(actorTree) };
}
