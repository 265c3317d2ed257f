// Model-based tests. For every machine, @xstate/graph generates the paths (TestModel /
// getShortestPaths over vertices that carry the transition that led to them, so together the paths
// take every transition: see test/support/graph-model.ts for what @xstate/graph does and what it
// cannot express) and replays them with `TestPath.test()` against the real runtime and store. After
// each step: the persisted state, stateVersion + 1, and an audit event with the right from/to.
//
// The machine's own paths cannot show a transition that is missing or wrong, so the independent
// oracle of each machine (test/model/oracles/, from the spec) walks along in lock-step: it must allow
// every step and name the same next state, and at every state every event the oracle forbids is
// sent to the runtime and must be rejected with nothing changed and an alert in the audit log.
// (machines.oracle.test.ts compares each machine with its oracle exhaustively, both ways.)
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { fromPromise, type AnyEventObject, type AnyMachineSnapshot, type AnyStateMachine } from 'xstate';
import {
  APP_SERVER_MACHINE_VERSION,
  REPLY_VERIFIER_MACHINE_VERSION,
  REPO_LOCK_MACHINE_VERSION,
  SESSION_MACHINE_VERSION,
  appServerMachine,
  replyVerifierMachine,
  repoLockMachine,
  sessionMachine,
} from '../../machines/index.js';
import { ActorRuntime, type ActorKind, type ActorRecord } from '../../src/runtime/actor-runtime.js';
import { stateValueToString } from '../../src/runtime/state-value.js';
import { createStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/types.js';
import { taskKind } from '../../src/tasks/task-actor.js';
import { TASK_EFFECTS, taskMachine } from '../../machines/task-lifecycle.js';
import {
  createCoverageInspector,
  createGraphModel,
  createPureScope,
  definedStates,
  enumerateEdges,
  planPaths,
  stateValueKey,
} from '../support/graph-model.js';
import { MACHINE_MODELS, type MachineModel } from './machine-models.js';

/** Invoked effects scripted by the path: the step's done/error event settles the pending call. */
class ScriptedInvokes {
  private pending = new Map<string, { resolve: (v: unknown) => void; reject: (e: unknown) => void }>();
  /** Keyed by the invoke id (the actor's own id), which names its done/error events. */
  logic() {
    return fromPromise(
      ({ self }) =>
        new Promise((resolve, reject) => {
          this.pending.set(self.id, { resolve, reject });
        }),
    );
  }
  settle(event: AnyEventObject): boolean {
    const m = /^xstate\.(done|error)\.actor\.(.+)$/.exec(event.type);
    if (!m) return false;
    const call = this.pending.get(m[2]!);
    if (!call) throw new Error(`no pending invoke ${m[2]}`);
    this.pending.delete(m[2]!);
    if (m[1] === 'done') call.resolve((event as { output?: unknown }).output);
    else call.reject((event as { error?: unknown }).error);
    return true;
  }
  /** Invokes started and not settled: which effects the machine is running right now. */
  running(): string[] {
    return [...this.pending.keys()].sort();
  }
}

/**
 * Effect actors recorded at the `provide()` seam: each start and each stop (its state left), per
 * actor. They never settle by themselves, as the real ones report by event (src/executor/task-effects.ts).
 */
class RecordedEffects {
  readonly log: Array<{ taskId: string; src: string; at: 'start' | 'stop' }> = [];
  logic(src: string) {
    return fromPromise<void, { taskId: string }>(({ input, signal }) => {
      this.log.push({ taskId: input.taskId, src, at: 'start' });
      return new Promise<void>((resolve) =>
        signal.addEventListener('abort', () => {
          this.log.push({ taskId: input.taskId, src, at: 'stop' });
          resolve();
        }),
      );
    });
  }
  actors(srcs: readonly string[]) {
    return Object.fromEntries(srcs.map((src) => [src, this.logic(src)]));
  }
  /** The effects of the task running now (started, not stopped). */
  running(taskId: string): string[] {
    const count = new Map<string, number>();
    for (const e of this.log.filter((l) => l.taskId === taskId)) count.set(e.src, (count.get(e.src) ?? 0) + (e.at === 'start' ? 1 : -1));
    return [...count].filter(([, n]) => n > 0).map(([src]) => src);
  }
  starts(taskId: string): string[] {
    return this.log.filter((l) => l.taskId === taskId && l.at === 'start').map((l) => l.src);
  }
}

const taskEffects = new RecordedEffects();
const verifierInvokes = new ScriptedInvokes();
const KINDS: Record<string, { kind: ActorKind; invokes?: ScriptedInvokes; effects?: RecordedEffects }> = {
  'task-lifecycle': {
    kind: taskKind(taskMachine.provide({ actors: taskEffects.actors(Object.values(TASK_EFFECTS)) as never }) as typeof taskMachine),
    effects: taskEffects,
  },
  'repo-lock': { kind: { kind: 'lock', machine: repoLockMachine, machineVersion: REPO_LOCK_MACHINE_VERSION } },
  session: { kind: { kind: 'session', machine: sessionMachine, machineVersion: SESSION_MACHINE_VERSION } },
  'reply-verifier': {
    kind: {
      kind: 'verifier',
      machine: replyVerifierMachine.provide({
        actors: { queryReply: verifierInvokes.logic(), postFallback: verifierInvokes.logic() } as never,
      }) as AnyStateMachine,
      machineVersion: REPLY_VERIFIER_MACHINE_VERSION,
    },
    invokes: verifierInvokes,
  },
  'app-server': { kind: { kind: 'app_server', machine: appServerMachine, machineVersion: APP_SERVER_MACHINE_VERSION } },
};

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

async function waitForVersion(store: Store, runtime: ActorRuntime, actorId: string, version: number): Promise<void> {
  for (let i = 0; i < 2_000; i++) {
    await runtime.settled();
    const rec = await store.get<ActorRecord>('actors', actorId);
    if (rec && rec.stateVersion >= version) return;
    await new Promise((r) => setTimeout(r, 1));
  }
  throw new Error(`${actorId} never reached stateVersion ${version}`);
}

const spec = (m: MachineModel) => ({ machine: m.machine, input: m.input('plan'), events: m.events, serialize: m.serialize });

/** The effect a state invokes (the machine's TASK_EFFECTS), none for the others. */
const effectOf = (state: string): string[] => {
  const src = (TASK_EFFECTS as Record<string, string>)[state];
  return src ? [src] : [];
};

describe.each(MACHINE_MODELS)('model-based paths: $name', (m) => {
  const { kind, invokes, effects } = KINDS[m.name]!;

  it('@xstate/graph paths take every transition through the runtime and store; the oracle agrees with every step and every event it forbids is rejected and audited', async () => {
    const dir = mkdtempSync(join(tmpdir(), `ccweb-model-${m.name}-`));
    dirs.push(dir);
    const store = createStore({ dir });
    await store.open();
    const coverage = createCoverageInspector(m.machine.id);
    const runtime = new ActorRuntime({ store, kinds: [kind], inspect: (_id, ev) => coverage.inspect(ev) });
    const edges = enumerateEdges(m.machine);
    const states = definedStates(m.machine);
    const plan = planPaths(spec(m));
    const reached = new Set<string>();

    let rejectedProbes = 0;
    let effectRuns = 0;
    let unchangedSteps = 0;
    let acceptedChecks = 0;
    const probed = new Set<string>();
    for (const [i, path] of plan.paths.entries()) {
      const id = `p${i}`;
      const actorId = `${kind.kind}:${id}`;
      if (kind.kind === 'task') {
        const created = await store.transact(async (tx) => {
          await tx.insert('tasks', id, { taskId: id, state: 'received', stateVersion: 0 });
          return runtime.createInTx(tx, 'task', actorId, m.input(id), { taskId: id });
        });
        created.start();
      } else {
        await runtime.create(kind.kind, actorId, m.input(id), { taskId: id });
      }
      let version = 1;
      let oracleState = m.oracle.initial();
      /** The states the path entered, in order (for the effects each must have started). */
      const entered: string[] = [];
      // The same path stepped purely, with this actor's input: tells whether a step changes the snapshot.
      const pureScope = createPureScope(m.machine);
      let pure = m.machine.getInitialSnapshot(pureScope, m.input(id)) as AnyMachineSnapshot;
      expect((await store.get<ActorRecord>('actors', actorId))?.stateVersion).toBe(1);

      /** Executes one step of the @xstate/graph path on the runtime; the oracle must agree with it. */
      const exec = async (step: { event: AnyEventObject; state: AnyMachineSnapshot }) => {
        const before = (await store.get<ActorRecord>('actors', actorId))!;
        const expected = m.oracle.next(oracleState, step.event);
        expect(expected, `oracle forbids ${JSON.stringify(step.event)} in ${before.state}`).not.toBeNull();
        expect(m.oracle.value(expected), `oracle's next state for ${step.event.type} in ${before.state}`).toBe(stateValueKey(step.state.value));
        oracleState = expected;
        // A step that changes nothing (e.g. a heartbeat that does not move expiresAt) is accepted
        // but has nothing to persist: no new stateVersion, no audit event.
        const nextPure = m.machine.transition(pure, step.event, pureScope) as AnyMachineSnapshot;
        const persisted = (x: AnyMachineSnapshot) => JSON.stringify(m.machine.getPersistedSnapshot(x));
        const changes = persisted(nextPure) !== persisted(pure);
        pure = nextPure;
        const auditBefore = (await store.audit({ actorId })).length;
        if (invokes?.settle(step.event)) {
          await waitForVersion(store, runtime, actorId, version + 1);
        } else {
          const r = await runtime.send(actorId, step.event, { by: 'model-test' });
          expect(r.ok, `${step.event.type} in ${before.state}`).toBe(true);
        }
        const rec = (await store.get<ActorRecord>('actors', actorId))!;
        expect(rec.state).toBe(stateValueToString(step.state.value));
        if (effects) {
          // The state's own effect runs, and nothing else: a state left has stopped its effect.
          expect(effects.running(id), `effects running in ${rec.state}`).toEqual(effectOf(rec.state));
          if (rec.state !== before.state) entered.push(rec.state);
        }
        if (!changes) {
          unchangedSteps += 1;
          expect(rec.stateVersion).toBe(version);
          expect((await store.audit({ actorId })).length).toBe(auditBefore);
          return;
        }
        version += 1;
        expect(rec.stateVersion).toBe(version);
        expect((await store.audit({ actorId })).at(-1)!).toMatchObject({
          action: `${kind.kind}.transition`,
          fromState: before.state,
          toState: stateValueToString(step.state.value),
          stateVersion: version,
        });
        if (kind.kind === 'task') {
          expect(await store.get<{ state: string; stateVersion: number }>('tasks', id)).toMatchObject({ state: rec.state, stateVersion: version });
        }
      };

      /** At every state of the path: persisted state as planned; every forbidden event rejected and audited. */
      const check = async (planned: AnyMachineSnapshot) => {
        const before = (await store.get<ActorRecord>('actors', actorId))!;
        expect(before.state).toBe(stateValueToString(planned.value));
        reached.add(before.state);
        // The planned snapshot: the same context as the live actor's (same events), and still there
        // once a final state has ended the live actor.
        const snap = planned;
        const candidates = new Map<string, AnyEventObject>();
        for (const e of [...m.oracle.alphabet(oracleState), ...m.events(snap)]) candidates.set(JSON.stringify(e), e);
        // Every event the oracle allows here is one the live actor accepts (asked, not sent).
        const host = (runtime as unknown as { hosts: Map<string, { actor: { getSnapshot(): AnyMachineSnapshot } }> }).hosts.get(actorId);
        const liveSnap = host?.actor.getSnapshot();
        for (const e of candidates.values()) {
          if (e.type.startsWith('xstate.') || m.oracle.next(oracleState, e) === null) continue;
          expect(liveSnap?.status === 'active' && liveSnap.can(e), `the oracle allows ${JSON.stringify(e)} in ${before.state}; the actor refuses it`).toBe(true);
          acceptedChecks += 1;
        }
        for (const probe of candidates.values()) {
          const forbidden = m.oracle.next(oracleState, probe) === null;
          // xstate.* events come only from the machine's own invoked actors: never from outside.
          if (!forbidden && !probe.type.startsWith('xstate.')) continue;
          const key = `${m.oracle.key(oracleState)}|${m.serialize(snap)}|${JSON.stringify(probe)}`;
          if (probed.has(key)) continue;
          probed.add(key);
          const auditBefore = (await store.audit({ actorId })).length;
          const r = await runtime.send(actorId, probe, { by: 'model-test' });
          expect(r.ok, `${probe.type} in ${before.state} must be rejected`).toBe(false);
          const after = (await store.get<ActorRecord>('actors', actorId))!;
          expect(after.stateVersion).toBe(before.stateVersion);
          expect(after.state).toBe(before.state);
          const newEvents = (await store.audit({ actorId })).slice(auditBefore);
          expect(newEvents.map((e) => [e.action, e.level])).toEqual([['runtime.event_rejected', 'alert']]);
          rejectedProbes += 1;
        }
      };

      const executors = new Proxy({} as Record<string, unknown>, {
        get: (_t, type) => (type === 'xstate.init' ? undefined : exec),
        has: () => true,
      });
      await path.test({ events: executors as never, states: { '*': check } });
      if (effects) {
        // Each entry into a state with work started its effect once, in the path's order: a path
        // through publishing published once per entry, and none published after a stop.
        const starts = effects.starts(id);
        expect(starts, `effects started along ${entered.join(' → ')}`).toEqual(entered.flatMap(effectOf));
        const stopped = entered.indexOf('aborting');
        if (stopped >= 0) expect(starts.slice(entered.slice(0, stopped).flatMap(effectOf).length)).toEqual(['stopWork']);
        effectRuns += starts.length;
      }
    }
    await runtime.settled();
    runtime.stopAll();
    await store.close();

    const covered = edges.filter((e) => coverage.covered.has(e.id));
    const reachedDefined = states.filter((s) => reached.has(s));
    console.log(
      `transitions covered: ${covered.length}/${edges.length} (${m.name}) by ${plan.paths.length} @xstate/graph paths over ${plan.vertices} vertices; ` +
        `states reached: ${reachedDefined.length}/${states.length}; ${rejectedProbes} events the oracle forbids rejected and audited, ` +
        `${acceptedChecks} it allows accepted` +
        (unchangedSteps ? `; ${unchangedSteps} accepted steps changed nothing (not persisted)` : '') +
        (effects ? `; ${effectRuns} effects started, each by its state` : ''),
    );
    expect(edges.filter((e) => !coverage.covered.has(e.id)).map((e) => e.id), 'transitions no path took').toEqual([]);
    expect(states.filter((s) => !reached.has(s)), 'states no path reached').toEqual([]);
    expect(rejectedProbes).toBeGreaterThan(0);
    if (effects) expect(effectRuns).toBeGreaterThan(0);
  }, 180_000);
});
