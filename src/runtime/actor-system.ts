// The service's actor system: one xstate system whose root is the service, under which the runtime
// hosts every actor (the repository locks, the sessions, the app-server, the tasks), and under a
// task's verification effect its reply verifier. One system: actors find each other by `systemId`
// (`system.get`), and one inspector sees them all.
import { createActor, createMachine, type AnyActorRef, type InspectionEvent } from 'xstate';

export const SERVICE_ROOT_ID = 'service';

/**
 * The root takes every event and changes nothing: a hosted actor that fails or finishes reports it to
 * its parent, and news no transition took would leave the root in error (xstate's rule for an
 * unhandled child error); the runtime hears of both from the actor itself.
 */
const serviceMachine = createMachine({ id: SERVICE_ROOT_ID, on: { '*': {} } });

export function createServiceRoot(inspect?: (event: InspectionEvent) => void): AnyActorRef {
  const root = createActor(serviceMachine, { id: SERVICE_ROOT_ID, ...(inspect ? { inspect } : {}) });
  root.start();
  return root;
}

/**
 * Stops a hosted actor. Each is restored from its own stored snapshot, which `spawn` cannot take, so
 * the runtime creates it as its parent's child itself (`createActor` with `parent`, as spawn does);
 * xstate's `stop()` is for a system's root only, and a child is stopped the way its parent's
 * `stopChild` does it.
 */
export function stopHosted(actor: AnyActorRef): void {
  if (actor._parent) (actor as unknown as { _stop(): void })._stop();
  else actor.stop();
}

/** The live tree under `root`: each actor with the actors whose parent it is (hosted and invoked alike). */
export interface ActorTreeNode {
  id: string;
  children: ActorTreeNode[];
}

export function actorTree(root: AnyActorRef, hosted: readonly AnyActorRef[]): ActorTreeNode {
  const childrenOf = new Map<AnyActorRef, AnyActorRef[]>();
  const add = (parent: AnyActorRef, child: AnyActorRef) => {
    if (!childrenOf.has(parent)) childrenOf.set(parent, []);
    if (!childrenOf.get(parent)!.includes(child)) childrenOf.get(parent)!.push(child);
  };
  const invoked = (actor: AnyActorRef): AnyActorRef[] => Object.values((actor.getSnapshot() as { children?: Record<string, AnyActorRef> }).children ?? {});
  const seen = new Set<AnyActorRef>();
  const visit = (actor: AnyActorRef) => {
    if (seen.has(actor)) return;
    seen.add(actor);
    for (const child of invoked(actor)) {
      add(actor, child);
      visit(child);
    }
  };
  for (const actor of hosted) {
    if (actor._parent) add(actor._parent, actor);
    visit(actor);
  }
  // An actor whose parent has stopped (a verifier whose task's verification was restarted) is still
  // live: it is shown under the root rather than left out.
  const reached = new Set<AnyActorRef>();
  const reach = (actor: AnyActorRef) => {
    reached.add(actor);
    for (const child of childrenOf.get(actor) ?? []) reach(child);
  };
  reach(root);
  for (const actor of hosted) if (!reached.has(actor)) add(root, actor);
  const node = (actor: AnyActorRef): ActorTreeNode => ({ id: actor.id, children: (childrenOf.get(actor) ?? []).map(node) });
  return node(root);
}
