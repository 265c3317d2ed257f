// The actor runtime's public types: what a kind of actor declares, what is persisted per actor, and
// what callers and listeners get back. (actor-runtime.ts re-exports them.)
import type { AnyMachineSnapshot, AnyStateMachine, EventObject, InspectionEvent } from 'xstate';
import type { AuditEvent, Store, Tx } from '../store/types.js';

/**
 * One kind of actor the runtime hosts: a machine (with its effects already injected through
 * `machine.provide()`), its id and version (persisted with every snapshot), and an optional
 * projection that mirrors the snapshot into a domain collection (e.g. `tasks`) in the same write.
 */
export interface ActorKind<M extends AnyStateMachine = AnyStateMachine> {
  kind: string;
  machine: M;
  machineVersion: number;
  project?: (tx: Tx, change: PersistedChange) => void | Promise<void>;
  /**
   * Input fields the initial context takes over verbatim and nothing else reads (e.g. `taskId`):
   * `createInTx` then computes a creation with xstate once per event list and reuses it with the
   * values put in (checked against xstate on first use). See creation-steps.ts.
   */
  templateInput?: readonly string[];
  /** Upgrades a snapshot written by an older machine version; return undefined when impossible. */
  migrate?: (snapshot: unknown, fromVersion: number) => unknown;
  /**
   * Its stored snapshots may lack the child of their state's invoke (written before that state
   * invoked an effect): restoring one adds it, so the effect starts (machine-facts.ts withStateInvokes).
   */
  invokesOnRestore?: boolean;
  /**
   * Where in the actor system an actor of this kind lives while the actor it names is hosted here:
   * under that actor, or under its invoked child `child` (a reply verifier under its task's
   * verification); otherwise, and for kinds without it, under the service's root.
   */
  hostedUnder?: (taskId: string | null) => { actorId: string; child?: string } | null;
  /**
   * `lazy`: after a restart, brought back to life on first use instead of in `restoreAll()`. For
   * actors whose invoked effects run only once someone uses them (a task's, once a worker drives it),
   * so ten thousand queued tasks do not delay start-up or hold memory until the scheduler reaches them.
   */
  restore?: 'eager' | 'lazy';
}

export interface PersistedChange {
  actorId: string;
  kind: string;
  fromState: string | null;
  toState: string;
  stateVersion: number;
  snapshot: AnyMachineSnapshot;
  event: EventObject | null;
  by: string;
}

export interface ActorRecord {
  actorId: string;
  kind: string;
  machineId: string;
  machineVersion: number;
  state: string;
  status: string;
  stateVersion: number;
  snapshot: unknown;
  taskId: string | null;
  createdAt: string;
  updatedAt: string;
}

export type SendResult =
  | { ok: true; fromState: string; toState: string; stateVersion: number }
  | { ok: false; reason: 'illegal_transition' | 'unknown_actor' | 'actor_stopped'; state: string | null; stateVersion: number | null };

/** What `onTransition` listeners get, once the transition is durable. */
export interface TransitionNotice {
  actorId: string;
  kind: string;
  taskId: string | null;
  fromState: string | null;
  toState: string;
  stateVersion: number;
  context: unknown;
  event: EventObject | null;
  by: string;
}

export interface SendOptions {
  /** Who caused the event, e.g. `system`, `admin:alice`, `gitea:user:bob`. */
  by?: string;
  /**
   * Checked in the transaction that keeps the transition, before it is written: throwing keeps
   * nothing of it (e.g. the lease the sender works under is no longer the current one).
   */
  guard?: (tx: Tx) => Promise<void>;
  /**
   * The event is news the machine may not take in every state (a lease that ended, work that
   * failed): one the current state does not take is answered `illegal_transition` without the alert.
   */
  optional?: boolean;
}

/**
 * A store transaction in which actors move together (`ActorRuntime.transact`): each transition is
 * computed from the actor's stored snapshot, read (and on PostgreSQL locked) in `tx`, and written in
 * `tx` with the usual compare-and-swap, projection and audit. All of them are kept or none; live
 * copies follow once the transaction is durable.
 */
export interface ActorTx {
  readonly tx: Tx;
  /**
   * `ActorRuntime.send` inside the transaction. Only for transitions that run no effect (no invoke,
   * no action but `assign`): one that would throws, and the transaction keeps nothing.
   */
  send(actorId: string, event: EventObject, options?: { by?: string }): Promise<SendResult>;
  /** `ActorRuntime.createInTx`, started once the transaction is durable. */
  create(kindName: string, actorId: string, input: unknown, options?: { events?: EventObject[]; by?: string; taskId?: string | null }): Promise<{ state: string; stateVersion: number }>;
}

export interface RuntimeOptions {
  store: Store;
  kinds: ActorKind[];
  now?: () => Date;
  /** Receives every inspection event of every hosted actor (coverage measurement, visualizer). */
  inspect?: (actorId: string, event: InspectionEvent) => void;
  onAlert?: (event: AuditEvent) => void;
  /**
   * The store is shared with other nodes, any of which may write any actor: every kind is hosted on
   * its first use (none at `restoreAll` but those its filter picks), and an event for a hosted actor
   * first checks that the stored version is still this copy's (else the copy is read again).
   */
  shared?: boolean;
  /** Called in the transaction of every transition, after it is written (a notification other nodes act on). */
  announce?: (tx: Tx, change: { kind: string; toState: string }) => Promise<void>;
}
