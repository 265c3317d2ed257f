import { createActor, transition, type AnyActorRef, type AnyMachineSnapshot, type AnyStateMachine, type EventObject, type InspectionEvent } from 'xstate';
import { VersionConflictError, type AuditEventInput, type Store, type Tx } from '../store/types.js';
import { summarizeEvent, writeChange } from './actor-records.js';
import type { ActorKind, ActorRecord, ActorTx, PersistedChange, RuntimeOptions, SendOptions, SendResult, TransitionNotice } from './actor-types.js';
import { CreationTemplates } from './creation-steps.js';
import { MachineFacts, restorableSnapshot } from './machine-facts.js';
import { stateValueToString } from './state-value.js';
import { actorTree, canHost, createServiceRoot, hostUnder, letGo, restoredLogic, type ActorTreeNode } from './actor-system.js';

export type { ActorKind, ActorRecord, ActorTx, PersistedChange, RuntimeOptions, SendOptions, SendResult, TransitionNotice } from './actor-types.js';

type RejectReason = Extract<SendResult, { ok: false }>['reason'];

/** The actions of a transition that start or stop a state's invoked actors. */
const INVOKE_ACTIONS: ReadonlySet<string> = new Set(['xstate.spawnChild', 'xstate.stopChild']);

/** The audit event of an event the runtime refused (`send`, and `ActorTx.send` in a runtime transaction); alert level is the caller's. */
function rejectionAudit(actorId: string, event: EventObject, by: string, reason: RejectReason, at: Pick<AuditEventInput, 'taskId' | 'fromState' | 'stateVersion'>): AuditEventInput {
  return { action: 'runtime.event_rejected', actor: by, actorId, ...at, errorCode: reason, metadata: { event: summarizeEvent(event) } };
}

interface Host {
  actorId: string;
  kind: ActorKind;
  taskId: string | null;
  actor: AnyActorRef;
  state: string;
  stateVersion: number;
  lastJson: string;
  pendingBy: string | null;
  pendingEvent: EventObject | null;
  pendingGuard: SendOptions['guard'] | null;
  lastCommit: Promise<unknown>;
  failed: Error | null;
  /**
   * Set inside the transaction that found the stored version moved on: the transitions this copy
   * queued after it are refused too (in one batch they would otherwise run against the other
   * node's write and, one version later, pass the check).
   */
  stale: boolean;
  unsubscribe: () => void;
}

/**
 * Hosts live xstate actors and makes every snapshot change durable: the new snapshot, its
 * `stateVersion + 1` and an audit event `{fromState, toState, stateVersion}` go into one store
 * transaction. Events from outside are checked first: one that is not a legal transition in the
 * current state changes nothing, leaves an alert audit event and is reported to the caller.
 *
 * Effects that belong to a state are invoked actors; they start before the store acknowledges the
 * transition that started them, so every effect that touches the world first waits for that
 * acknowledgement (`committed`: the actor's own commit, on every engine).
 * Every hosted actor is spawned in one xstate system: by the service's root, or by the live actor its
 * kind names (`hostedUnder`); actor-system.ts, `tree()`.
 */
export class ActorRuntime {
  private readonly hosts = new Map<string, Host>();
  private readonly kinds = new Map<string, ActorKind>();
  private readonly store: Store;
  private readonly now: () => Date;
  private readonly inspect: RuntimeOptions['inspect'];
  private readonly onAlert: RuntimeOptions['onAlert'];
  private readonly shared: boolean;
  private readonly announce: RuntimeOptions['announce'];
  private readonly listeners = new Set<(change: TransitionNotice) => void>();
  private readonly templates = new CreationTemplates();
  private readonly facts = new MachineFacts();
  /**
   * Actors stopped because their stored version moved on without them (another node wrote them: a
   * repository that changed hands). The next event hosts them again from the store, whatever their
   * kind's restore mode.
   */
  private readonly outdated = new Set<string>();
  /** Actors that reached a final state whose transition is not committed yet: their state until it is. */
  private readonly finishing = new Map<string, { state: string; stateVersion: number; context: unknown }>();
  /** Actors a runtime transaction (`transact`) is moving: a `send` to one waits until that transaction ended. */
  private readonly moving = new Map<string, Promise<void>>();
  /** The root of the actor system every hosted actor belongs to (actor-system.ts). */
  private readonly root: AnyActorRef;
  /** Which hosted actor each live actor reference is, for the system's inspection events. */
  private readonly hostedRefs = new WeakMap<AnyActorRef, string>();

  constructor(options: RuntimeOptions) {
    this.store = options.store;
    this.now = options.now ?? (() => new Date());
    this.inspect = options.inspect;
    this.onAlert = options.onAlert;
    this.shared = options.shared === true;
    this.announce = options.announce;
    for (const k of options.kinds) this.kinds.set(k.kind, k);
    this.root = createServiceRoot(this.inspect ? (ev) => this.inspectHosted(ev) : undefined);
  }

  /** An inspection event of the system, given to `inspect` as the hosted actor's it comes from (its own, or an invoked child's). */
  private inspectHosted(ev: InspectionEvent): void {
    for (let ref = ev.actorRef as AnyActorRef | undefined; ref; ref = ref._parent) {
      const actorId = this.hostedRefs.get(ref);
      if (actorId !== undefined) return this.inspect?.(actorId, ev);
    }
  }

  /** The live actor system as a tree: the service's root, the actors hosted under it, and each one's children. */
  tree(): ActorTreeNode {
    return actorTree(this.root);
  }

  /**
   * Gives a kind's machine its implementations (`machine.provide()`: the effects its states invoke),
   * once the parts that implement them exist. Live actors of the kind are let go: their next use
   * hosts them from the store with the provided machine.
   */
  provide(kindName: string, implement: (machine: AnyStateMachine) => AnyStateMachine): void {
    const kind = this.kindOf(kindName);
    this.kinds.set(kindName, { ...kind, machine: implement(kind.machine) });
    this.release((a) => a.kind === kindName);
  }

  /**
   * Resolves once every transition of the live actor so far is durable (or failed): an effect its
   * state invoked then reads the store at that state or later, on every engine.
   */
  async committed(actorId: string): Promise<void> {
    // The invoke starts inside the transition, before the observer queues the commit: yield once first.
    await Promise.resolve();
    await this.hosts.get(actorId)?.lastCommit.catch(() => undefined);
  }

  /**
   * Listens to every durable transition of every actor (scheduler wake-ups, live admin views).
   * Listeners run after the commit and must not throw; returns an unsubscribe function.
   */
  onTransition(listener: (change: TransitionNotice) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Live, or stored unfinished and restorable on first use (lazy kinds). */
  async has(actorId: string): Promise<boolean> {
    if (this.hosts.has(actorId)) return true;
    if (this.finishing.has(actorId)) return false;
    const rec = await this.store.get<ActorRecord>('actors', actorId);
    return rec !== undefined && rec.status === 'active' && this.hostedOnUse(rec.kind, actorId) && this.restorable(rec) !== undefined;
  }

  /**
   * Live after this call if it can be: hosted already, or a stored unfinished actor hosted now from
   * the store when its kind comes to life on first use (lazy kinds; every kind on a shared store).
   */
  async ensureHosted(actorId: string): Promise<boolean> {
    return this.hosts.has(actorId) || (await this.hostLazy(actorId)) !== undefined;
  }

  /** Whether a stored actor comes to life on its first use rather than at `restoreAll`. */
  private hostedOnUse(kindName: string, actorId: string): boolean {
    return this.shared || this.kinds.get(kindName)?.restore === 'lazy' || this.outdated.has(actorId);
  }

  /**
   * On a shared store: the live copy, unless another node wrote the actor since (its stored version
   * moved on), in which case the copy is dropped and the stored one hosted instead.
   */
  private async freshHost(actorId: string): Promise<Host | undefined> {
    const host = this.hosts.get(actorId);
    if (!host || !this.shared) return host;
    // This copy's own transitions first: until they commit, the stored version lags behind it.
    await host.lastCommit.catch(() => undefined);
    if (this.hosts.get(actorId) !== host) return this.hosts.get(actorId);
    const stored = await this.store.get<ActorRecord>('actors', actorId);
    // Only a version beyond this copy's is another node's write: a lower one is this copy's own
    // transition (an invoke's, made meanwhile) still on its way to the store.
    if (this.hosts.get(actorId) !== host || host.failed || (stored !== undefined && stored.stateVersion <= host.stateVersion)) return this.hosts.get(actorId);
    this.unhost([host]);
    return undefined;
  }

  /**
   * Hosted here after this call if it can be, from the stored snapshot when another node wrote the
   * actor since this copy was made: its state's invoked effects then run from what is stored.
   */
  async refresh(actorId: string): Promise<boolean> {
    await this.freshHost(actorId);
    return this.ensureHosted(actorId);
  }

  /** Current state of a live actor, or of a stored (possibly final) one. */
  async stateOf(actorId: string): Promise<{ state: string; stateVersion: number; context: unknown } | undefined> {
    const host = this.hosts.get(actorId);
    if (host) return { state: host.state, stateVersion: host.stateVersion, context: host.actor.getSnapshot().context };
    const finished = this.finishing.get(actorId);
    if (finished) return finished;
    const rec = await this.store.get<ActorRecord>('actors', actorId);
    if (!rec) return undefined;
    return { state: rec.state, stateVersion: rec.stateVersion, context: (rec.snapshot as { context?: unknown }).context };
  }

  /**
   * Creates an actor inside the caller's transaction (so e.g. the webhook adapter can create the
   * task together with the delivery record), applying `events` purely. Call the returned `start`
   * after the transaction is durable to bring the actor to life.
   */
  async createInTx(
    tx: Tx,
    kindName: string,
    actorId: string,
    input: unknown,
    options: {
      events?: EventObject[];
      by?: string;
      taskId?: string | null;
      /**
       * For a lazy kind: `start` does not bring the actor to life; its first event does (hostLazy),
       * as after a restart. A burst of new tasks then costs no live actors (a spawned actor, a
       * subscription, heap) until each is worked on.
       */
      deferHosting?: boolean;
    } = {},
  ): Promise<{ state: string; stateVersion: number; start: () => void }> {
    const kind = this.kindOf(kindName);
    if (await tx.has('actors', actorId)) throw new Error(`actor ${actorId} already exists`);
    const by = options.by ?? 'system';
    const taskId = options.taskId ?? null;
    const steps = this.templates.steps(kind, input, options.events ?? [], actorId);
    const createdAt = this.now().toISOString();
    let fromState: string | null = null;
    let stateVersion = 0;
    for (const step of steps) {
      stateVersion += 1;
      const change: PersistedChange = { actorId, kind: kind.kind, fromState, toState: step.toState, stateVersion, snapshot: step.snapshot, event: step.event, by };
      await writeChange(tx, kind, change, taskId, { isNew: stateVersion === 1, createdAt, now: this.now().toISOString() }, step.persisted, this.announce);
      fromState = step.toState;
    }
    const last = steps.at(-1)!;
    const state = last.toState;
    return {
      state,
      stateVersion,
      start: () => {
        const deferred = options.deferHosting === true && kind.restore === 'lazy';
        // Hosted from the store meanwhile (a follower on a shared store): that copy is this one.
        if (last.snapshot.status === 'active' && !deferred && !this.hosts.has(actorId)) this.host(kind, actorId, taskId, last.persisted, state, stateVersion);
        this.emit({ actorId, kind: kind.kind, taskId, fromState: null, toState: state, stateVersion, context: last.snapshot.context, event: null, by });
      },
    };
  }

  /** Creates and starts an actor in a transaction of its own. */
  async create(
    kindName: string,
    actorId: string,
    input: unknown,
    options: { events?: EventObject[]; by?: string; taskId?: string | null } = {},
  ): Promise<{ state: string; stateVersion: number }> {
    const created = await this.store.transact((tx) => this.createInTx(tx, kindName, actorId, input, options));
    created.start();
    return { state: created.state, stateVersion: created.stateVersion };
  }

  /**
   * Runs `fn` in one store transaction in which actors are moved (`ActorTx.send`) and created
   * (`ActorTx.create`) together: every transition is kept, or none. Live copies of the actors moved are
   * replaced by the stored ones, and listeners hear of the transitions, once the transaction is durable.
   * Meanwhile a `send` to one of them waits for the transaction, so it applies to the state it leaves.
   */
  async transact<R>(fn: (atx: ActorTx) => Promise<R>): Promise<R> {
    let ended!: () => void;
    const done = new Promise<void>((resolve) => (ended = resolve));
    const touched = new Set<string>();
    let afterCommit: Array<() => void> = [];
    try {
      const result = await this.store.transact(async (tx) => {
        // The store may run fn again (a retried transaction): only the last run's transitions count.
        afterCommit = [];
        const mark = (actorId: string) => {
          touched.add(actorId);
          this.moving.set(actorId, done);
        };
        return fn({
          tx,
          send: (actorId, event, options = {}) => {
            mark(actorId);
            return this.sendInTx(tx, actorId, event, options.by ?? 'system', afterCommit);
          },
          create: async (kindName, actorId, input, options = {}) => {
            mark(actorId);
            const created = await this.createInTx(tx, kindName, actorId, input, options);
            afterCommit.push(created.start);
            return { state: created.state, stateVersion: created.stateVersion };
          },
        });
      });
      for (const apply of afterCommit) apply();
      return result;
    } finally {
      for (const actorId of touched) if (this.moving.get(actorId) === done) this.moving.delete(actorId);
      ended();
    }
  }

  /** One transition of `ActorTx.send`: from the stored snapshot, written in `tx`; `afterCommit` gets what follows it. */
  private async sendInTx(tx: Tx, actorId: string, event: EventObject, by: string, afterCommit: Array<() => void>): Promise<SendResult> {
    const rec = await tx.get<ActorRecord>('actors', actorId);
    const kind = rec ? this.kinds.get(rec.kind) : undefined;
    const persisted = rec && kind && rec.status === 'active' ? this.restorable(rec) : undefined;
    const rejected = async (reason: RejectReason): Promise<SendResult> => {
      await tx.appendAudit({ level: 'alert', ...rejectionAudit(actorId, event, by, reason, { taskId: rec?.taskId ?? null, fromState: rec?.state ?? null, stateVersion: rec?.stateVersion ?? null }) });
      return { ok: false, reason, state: rec?.state ?? null, stateVersion: rec?.stateVersion ?? null };
    };
    if (!rec || !kind) return rejected('unknown_actor');
    if (persisted === undefined) return rejected('actor_stopped');
    let current: AnyMachineSnapshot;
    try {
      // An actor made from the persisted snapshot and never started: the snapshot, resolved, and nothing run.
      current = createActor(kind.machine, { snapshot: persisted as never }).getSnapshot() as AnyMachineSnapshot;
    } catch {
      return rejected('actor_stopped');
    }
    if (event.type.startsWith('xstate.') || !current.can(event)) return rejected('illegal_transition');
    const [next, actions] = transition(kind.machine, current, event);
    // Starting and stopping the state's invoked effects is what hosting the stored snapshot after the
    // commit does (the live copy is replaced): any other action would be lost here.
    const lost = actions.filter((a) => !INVOKE_ACTIONS.has(a.type));
    if (lost.length > 0) throw new Error(`${actorId}: ${event.type} runs actions (${lost.map((a) => a.type).join(', ')}); move the actor with send, not in a runtime transaction`);
    const nextPersisted = kind.machine.getPersistedSnapshot(next);
    const toState = stateValueToString(next.value);
    if (JSON.stringify(nextPersisted) === JSON.stringify(persisted)) return { ok: true, fromState: rec.state, toState, stateVersion: rec.stateVersion };
    const change: PersistedChange = { actorId, kind: kind.kind, fromState: rec.state, toState, stateVersion: rec.stateVersion + 1, snapshot: next, event, by };
    await writeChange(tx, kind, change, rec.taskId, { isNew: false, createdAt: null, now: this.now().toISOString() }, nextPersisted, this.announce);
    afterCommit.push(() => {
      // The stored actor is now this transition's: a live copy (whatever it held) gives way to it.
      const live = this.hosts.get(actorId);
      if (live) this.unhost([live]);
      if (next.status === 'active' && (live !== undefined || !this.hostedOnUse(kind.kind, actorId))) this.host(kind, actorId, rec.taskId, nextPersisted, toState, change.stateVersion);
      this.emit({ actorId, kind: kind.kind, taskId: rec.taskId, fromState: rec.state, toState, stateVersion: change.stateVersion, context: next.context, event, by });
    });
    return { ok: true, fromState: rec.state, toState, stateVersion: change.stateVersion };
  }

  /** Sends an event; resolves once the resulting transition is durable, or with the rejection. */
  async send(actorId: string, event: EventObject, options: SendOptions = {}): Promise<SendResult> {
    const by = options.by ?? 'system';
    for (let moving = this.moving.get(actorId); moving; moving = this.moving.get(actorId)) await moving;
    const host = (await this.freshHost(actorId)) ?? (await this.hostLazy(actorId));
    if (!host) {
      const rec = await this.store.get<ActorRecord>('actors', actorId);
      // Optional news for an actor that finished meanwhile is nobody's mistake.
      if (!(options.optional === true && rec !== undefined && rec.status !== 'active'))
        await this.alert(rejectionAudit(actorId, event, by, rec ? 'actor_stopped' : 'unknown_actor', { taskId: rec?.taskId ?? null, fromState: rec?.state ?? null }));
      return rec
        ? { ok: false, reason: 'actor_stopped', state: rec.state, stateVersion: rec.stateVersion }
        : { ok: false, reason: 'unknown_actor', state: null, stateVersion: null };
    }
    if (host.failed) throw host.failed;
    const snapshot = host.actor.getSnapshot() as AnyMachineSnapshot;
    // xstate.* events (invoke done/error, timers) come only from inside the actor, never from a caller.
    if (snapshot.status !== 'active' || event.type.startsWith('xstate.') || !snapshot.can(event)) {
      if (options.optional === true && snapshot.status === 'active' && !event.type.startsWith('xstate.'))
        return { ok: false, reason: 'illegal_transition', state: host.state, stateVersion: host.stateVersion };
      await this.alert(rejectionAudit(actorId, event, by, 'illegal_transition', { taskId: host.taskId, fromState: host.state, stateVersion: host.stateVersion }));
      return { ok: false, reason: 'illegal_transition', state: host.state, stateVersion: host.stateVersion };
    }
    const fromState = host.state;
    host.pendingBy = by;
    host.pendingEvent = event;
    host.pendingGuard = options.guard ?? null;
    host.actor.send(event);
    host.pendingBy = null;
    host.pendingEvent = null;
    host.pendingGuard = null;
    await host.lastCommit;
    if (host.failed) throw host.failed;
    return { ok: true, fromState, toState: host.state, stateVersion: host.stateVersion };
  }

  /**
   * Brings every stored, unfinished actor back to life. A snapshot from another machine version is
   * migrated when the kind knows how, otherwise left stopped with an alert. In-flight invokes start
   * again (effects are idempotent by key); timers are re-armed by their owners from context deadlines.
   * `include` restores only some (a node on a shared store: its own app-server; the others come to
   * life on first use).
   */
  async restoreAll(include?: (rec: ActorRecord) => boolean): Promise<{ restored: number; skipped: number; deferred: number }> {
    let restored = 0;
    let skipped = 0;
    let deferred = 0;
    for (const rec of (await this.store.byIndex<ActorRecord>('actors', 'status', 'active')).filter((r) => include === undefined || include(r))) {
      if (this.hosts.has(rec.actorId)) continue;
      const kind = this.kinds.get(rec.kind);
      const snapshot = this.restorable(rec);
      if (!kind || snapshot === undefined) {
        skipped += 1;
        await this.alertRestoreFailed(rec);
        continue;
      }
      // On a shared store only what `include` names is hosted from the start (this node's own app-server).
      if (this.shared ? include === undefined : kind.restore === 'lazy') {
        deferred += 1;
        continue;
      }
      this.host(kind, rec.actorId, rec.taskId, snapshot, rec.state, rec.stateVersion);
      restored += 1;
    }
    return { restored, skipped, deferred };
  }

  /** The snapshot to restore a stored actor from (migrated if needed), or undefined when impossible. */
  private restorable(rec: ActorRecord): unknown {
    return restorableSnapshot(rec, this.kinds.get(rec.kind), (kind, state) => this.facts.stateExists(kind, state));
  }

  /** Brings a stored unfinished actor of a lazy kind to life on first use. */
  private async hostLazy(actorId: string): Promise<Host | undefined> {
    // Finished here, its final transition still on its way to the store: nothing to bring back.
    if (this.finishing.has(actorId)) return undefined;
    const rec = await this.store.get<ActorRecord>('actors', actorId);
    const kind = rec ? this.kinds.get(rec.kind) : undefined;
    if (!rec || !kind || rec.status !== 'active' || !this.hostedOnUse(kind.kind, actorId)) return undefined;
    const snapshot = this.restorable(rec);
    if (snapshot === undefined) {
      await this.alertRestoreFailed(rec);
      return undefined;
    }
    // Another caller may have hosted it while the alert above was being written.
    const live = this.hosts.get(actorId);
    if (live) return live;
    this.outdated.delete(actorId);
    this.host(kind, rec.actorId, rec.taskId, snapshot, rec.state, rec.stateVersion);
    return this.hosts.get(actorId);
  }

  private async alertRestoreFailed(rec: ActorRecord): Promise<void> {
    const kind = this.kinds.get(rec.kind);
    await this.alert({
      action: 'runtime.restore_failed',
      actor: 'system',
      actorId: rec.actorId,
      taskId: rec.taskId,
      fromState: rec.state,
      errorCode: kind ? 'machine_version_mismatch' : 'unknown_machine',
      metadata: { machineVersion: rec.machineVersion, expected: kind?.machineVersion ?? null },
    });
  }

  /** Stops every live actor without persisting anything more (used at shutdown and in tests). */
  stopAll(): void {
    this.unhost([...this.hosts.values()], { outdated: false });
  }

  /**
   * Stops the live actors `include` picks, without persisting anything (their stored snapshots stay
   * as they are): this node no longer runs their task. Whoever uses one next hosts it from the store,
   * whatever its kind's restore mode. Returns how many were stopped.
   */
  release(include: (actor: { actorId: string; kind: string; taskId: string | null }) => boolean): number {
    const released = [...this.hosts.values()].filter((host) => include({ actorId: host.actorId, kind: host.kind.kind, taskId: host.taskId }));
    this.unhost(released);
    return released.length;
  }

  /** Resolves when every transition so far is durable. */
  async settled(): Promise<void> {
    await Promise.all([...this.hosts.values()].map((h) => h.lastCommit.catch(() => undefined)));
    await this.store.sync();
  }

  private host(kind: ActorKind, actorId: string, taskId: string | null, persisted: unknown, state: string, stateVersion: number): void {
    const host: Host = {
      actorId,
      kind,
      taskId,
      actor: undefined as unknown as AnyActorRef,
      state,
      stateVersion,
      lastJson: JSON.stringify(persisted),
      pendingBy: null,
      pendingEvent: null,
      pendingGuard: null,
      lastCommit: Promise.resolve(),
      failed: null,
      stale: false,
      unsubscribe: () => undefined,
    };
    // Observed from its creation, before it starts: the snapshot its start makes is persisted too.
    const observe = (actor: AnyActorRef) => {
      host.actor = actor;
      this.hostedRefs.set(actor, actorId);
      this.hosts.set(actorId, host);
      const subscription = actor.subscribe({
        next: (snapshot) => this.persist(host, snapshot as AnyMachineSnapshot),
        error: (err) => {
          host.failed = err instanceof Error ? err : new Error(String(err));
          void this.alert({
            action: 'runtime.actor_error',
            actor: 'system',
            actorId,
            taskId,
            fromState: host.state,
            errorCode: 'actor_error',
            metadata: { message: host.failed.message.slice(0, 300) },
          }).catch(() => undefined); // the store may be the reason: never an unhandled rejection
        },
        complete: () => this.ended(host),
      });
      host.unsubscribe = () => subscription.unsubscribe();
    };
    try {
      hostUnder(this.parentFor(kind, taskId), actorId, restoredLogic(kind.machine, persisted, observe));
    } catch (error) {
      // Not hosted: its next use tries again from the store.
      if (this.hosts.get(actorId) === host) this.hosts.delete(actorId);
      host.unsubscribe();
      this.outdated.add(actorId);
      throw error;
    }
    this.outdated.delete(actorId);
  }

  /**
   * A hosted actor ended while observed (the runtime stops none it still observes): finished (a final
   * state arrives here, not through `next`), or stopped with its parent (a verifier whose task's
   * verification ended here).
   */
  private ended(host: Host): void {
    const { actorId, actor } = host;
    const snap = actor.getSnapshot() as AnyMachineSnapshot;
    if (this.hosts.get(actorId) === host) this.hosts.delete(actorId);
    if (snap.status === 'done') {
      this.persist(host, snap);
      // Until its final transition is committed the store still shows the state before: the
      // state is answered from here meanwhile.
      const finished = { state: host.state, stateVersion: host.stateVersion, context: snap.context };
      this.finishing.set(actorId, finished);
      const forget = () => {
        if (this.finishing.get(actorId) === finished) this.finishing.delete(actorId);
      };
      void host.lastCommit.then(forget, forget);
      letGo(actor);
      return;
    }
    // Stopped with its parent, not persisted: its stored snapshot stays `active`. It carries on from
    // there wherever it lives now (under the root while its parent is not live here), once its own
    // transitions so far are stored.
    this.outdated.add(actorId);
    void host.lastCommit
      .catch(() => undefined)
      .then(() => this.hostLazy(actorId))
      .catch(() => undefined); // the store may be the reason; the next use hosts it again
  }

  /**
   * Lets live actors go without persisting anything: stopped, the next use of one hosts it from the
   * store (when `outdated`, whatever its kind's restore mode). All are unobserved before any stops:
   * one hosted under another stops with it, and must not be taken for an actor its parent stopped.
   */
  private unhost(hosts: Host[], options: { outdated: boolean } = { outdated: true }): void {
    for (const host of hosts) host.unsubscribe();
    for (const host of hosts) {
      if (this.hosts.get(host.actorId) === host) this.hosts.delete(host.actorId);
      if (options.outdated) this.outdated.add(host.actorId);
      letGo(host.actor);
    }
  }

  /** Where a kind's actor is hosted in the system: under the live actor (or its invoked child) its kind names when that hosts actors, else the root. */
  private parentFor(kind: ActorKind, taskId: string | null): AnyActorRef {
    const under = kind.hostedUnder?.(taskId);
    const host = under ? this.hosts.get(under.actorId) : undefined;
    if (!under || !host) return this.root;
    const parent = under.child === undefined ? host.actor : ((host.actor.getSnapshot() as AnyMachineSnapshot).children[under.child] as AnyActorRef | undefined);
    return parent && canHost(parent) && (parent.getSnapshot() as AnyMachineSnapshot).status === 'active' ? parent : this.root;
  }

  private persist(host: Host, snapshot: AnyMachineSnapshot): void {
    const persisted = host.kind.machine.getPersistedSnapshot(snapshot);
    const json = JSON.stringify(persisted);
    if (json === host.lastJson) return;
    host.lastJson = json;
    const fromState = host.state;
    const toState = stateValueToString(snapshot.value);
    const stateVersion = host.stateVersion + 1;
    const change: PersistedChange = {
      actorId: host.actorId,
      kind: host.kind.kind,
      fromState,
      toState,
      stateVersion,
      snapshot,
      event: host.pendingEvent,
      by: host.pendingBy ?? 'system',
    };
    const guard = host.pendingGuard;
    host.state = toState;
    host.stateVersion = stateVersion;
    const commit = this.store.transact(async (tx) => {
      if (host.stale) throw new VersionConflictError('actors', host.actorId, change.stateVersion - 1, (await tx.get<ActorRecord>('actors', host.actorId))?.stateVersion);
      await guard?.(tx);
      try {
        await writeChange(tx, host.kind, change, host.taskId, { isNew: false, createdAt: null, now: this.now().toISOString() }, persisted, this.announce);
      } catch (error) {
        if (error instanceof VersionConflictError) host.stale = true;
        throw error;
      }
    });
    host.lastCommit = commit.then(
      () =>
        this.emit({
          actorId: host.actorId,
          kind: host.kind.kind,
          taskId: host.taskId,
          fromState,
          toState,
          stateVersion,
          context: snapshot.context,
          event: change.event,
          by: change.by,
        }),
      (err: unknown) => {
        host.failed = err instanceof Error ? err : new Error(String(err));
        // The transition was not kept (someone else wrote this actor since it was hosted here, the
        // database refused the lease change it stands for, or the store did not answer): this copy is
        // not the stored one. The caller hears of the failure; the next event starts from the stored
        // snapshot instead, so a store that comes back finds the actor working again.
        if (this.hosts.get(host.actorId) === host) this.unhost([host]);
      },
    );
  }

  private emit(notice: TransitionNotice): void {
    for (const listener of this.listeners) {
      try {
        listener(notice);
      } catch {
        // A listener's failure must not undo or block a durable transition.
      }
    }
  }

  private async alert(event: Parameters<Tx['appendAudit']>[0]): Promise<void> {
    const stored = await this.store.transact((tx) => tx.appendAudit({ level: 'alert', ...event }));
    this.onAlert?.(stored);
  }

  private kindOf(name: string): ActorKind {
    const kind = this.kinds.get(name);
    if (!kind) throw new Error(`unknown actor kind ${name}`);
    return kind;
  }
}
