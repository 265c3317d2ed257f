// Model-based tests: for every machine, paths generated from the machine itself that together take
// every transition, replayed against the real runtime and store. After each step: the persisted
// state, stateVersion + 1, and an audit event with the right from/to. At every visited state, every
// sample event the model does not allow is sent and shown rejected with nothing changed.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { fromPromise, type AnyEventObject, type AnyMachineSnapshot, type AnyStateMachine } from 'xstate';
import {
  APP_SERVER_EVENT_CASES,
  APP_SERVER_MACHINE_VERSION,
  appServerMachine,
  serializeAppServerForGraph,
  REPLY_VERIFIER_EVENT_CASES,
  REPLY_VERIFIER_MACHINE_VERSION,
  REPO_LOCK_EVENT_CASES,
  REPO_LOCK_MACHINE_VERSION,
  SESSION_EVENT_CASES,
  SESSION_MACHINE_VERSION,
  replyVerifierMachine,
  repoLockMachine,
  serializeReplyVerifierForGraph,
  serializeRepoLockForGraph,
  serializeSessionForGraph,
  serializeTaskForGraph,
  sessionMachine,
  taskEventCases,
  taskMachine,
} from '../../machines/index.js';
import { ActorRuntime, type ActorKind, type ActorRecord } from '../../src/runtime/actor-runtime.js';
import { stateValueToString } from '../../src/runtime/state-value.js';
import { createStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/types.js';
import { taskKind } from '../../src/tasks/task-actor.js';
import { createCoverageInspector, enumerateEdges, formatCoverage, generateCoveringPaths } from '../support/model-paths.js';

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
}

interface MachineUnderTest {
  name: string;
  kind: ActorKind;
  events: (s: AnyMachineSnapshot) => readonly AnyEventObject[];
  serialize: (s: AnyMachineSnapshot) => unknown;
  input: (id: string) => unknown;
  invokes?: ScriptedInvokes;
}

const verifierInvokes = new ScriptedInvokes();
const MACHINES: MachineUnderTest[] = [
  {
    name: 'task-lifecycle',
    kind: taskKind(),
    events: () => taskEventCases(),
    serialize: (s) => serializeTaskForGraph(s as never),
    input: (id) => ({ taskId: id }),
  },
  {
    name: 'repo-lock',
    kind: { kind: 'lock', machine: repoLockMachine, machineVersion: REPO_LOCK_MACHINE_VERSION },
    events: (s) => REPO_LOCK_EVENT_CASES(s as never),
    serialize: (s) => serializeRepoLockForGraph(s as never),
    input: (id) => ({ repoKey: `default:acme/${id}` }),
  },
  {
    name: 'session',
    kind: { kind: 'session', machine: sessionMachine, machineVersion: SESSION_MACHINE_VERSION },
    events: (s) => SESSION_EVENT_CASES(s as never),
    serialize: (s) => serializeSessionForGraph(s as never),
    input: (id) => ({ sessionKey: `default:acme/widget:issue:${id}` }),
  },
  {
    name: 'reply-verifier',
    kind: {
      kind: 'verifier',
      machine: replyVerifierMachine.provide({
        actors: {
          queryReply: verifierInvokes.logic(),
          postFallback: verifierInvokes.logic(),
        } as never,
      }) as AnyStateMachine,
      machineVersion: REPLY_VERIFIER_MACHINE_VERSION,
    },
    events: (s) => REPLY_VERIFIER_EVENT_CASES(s as never),
    serialize: (s) => serializeReplyVerifierForGraph(s as never),
    input: (id) => ({
      taskId: id,
      turnKey: `${id}:a1`,
      resourceKey: 'default:acme/widget:issue:1',
      marker: `<!-- ccweb taskId=${id} -->`,
      botLogin: 'ccweb-bot',
      turnStartedAt: 1_700_000_000_000,
    }),
    invokes: verifierInvokes,
  },
  {
    name: 'app-server',
    kind: { kind: 'app_server', machine: appServerMachine, machineVersion: APP_SERVER_MACHINE_VERSION },
    events: (s) => APP_SERVER_EVENT_CASES(s as never),
    serialize: (s) => serializeAppServerForGraph(s as never),
    input: (id) => ({ serviceId: id }),
  },
];

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

async function waitForVersion(store: Store, runtime: ActorRuntime, actorId: string, version: number): Promise<void> {
  for (let i = 0; i < 2_000; i++) {
    await runtime.settled();
    const rec = store.get<ActorRecord>('actors', actorId);
    if (rec && rec.stateVersion >= version) return;
    await new Promise((r) => setTimeout(r, 1));
  }
  throw new Error(`${actorId} never reached stateVersion ${version}`);
}

describe.each(MACHINES)('model-based paths: $name', (m) => {
  it('takes every transition through the runtime and store, and rejects every disallowed event', async () => {
    const dir = mkdtempSync(join(tmpdir(), `ccweb-model-${m.name}-`));
    dirs.push(dir);
    const store = createStore({ dir });
    await store.open();
    const coverage = createCoverageInspector(m.kind.machine.id);
    const runtime = new ActorRuntime({ store, kinds: [m.kind], inspect: (_id, ev) => coverage.inspect(ev) });
    const edges = enumerateEdges(m.kind.machine);
    const plan = generateCoveringPaths(m.kind.machine, { events: m.events, serialize: m.serialize, input: m.input('plan') as never });
    expect(plan.uncovered, 'edges no generated path takes').toEqual([]);

    let rejectedProbes = 0;
    const probed = new Set<string>();
    for (const [i, path] of plan.paths.entries()) {
      const id = `p${i}`;
      const actorId = `${m.kind.kind}:${id}`;
      if (m.kind.kind === 'task') {
        const created = await store.transact((tx) => {
          tx.insert('tasks', id, { taskId: id, state: 'received', stateVersion: 0 });
          return runtime.createInTx(tx, 'task', actorId, m.input(id), { taskId: id });
        });
        created.start();
      } else {
        await runtime.create(m.kind.kind, actorId, m.input(id), { taskId: id });
      }
      let version = 1;
      expect(store.get<ActorRecord>('actors', actorId)?.stateVersion).toBe(1);

      for (const step of path.steps) {
        const before = store.get<ActorRecord>('actors', actorId)!;
        expect(before.state).toBe(stateValueToString(step.before));

        // Every sample event this state does not allow: rejected, nothing changed, an alert left.
        const live = (runtime as unknown as { hosts: Map<string, { actor: { getSnapshot(): AnyMachineSnapshot } }> }).hosts.get(actorId)!;
        const snap = live.actor.getSnapshot();
        for (const probe of m.events(snap)) {
          const internal = probe.type.startsWith('xstate.');
          if (!internal && snap.can(probe)) continue;
          const key = `${String(m.serialize(snap))}|${JSON.stringify(probe)}`;
          if (probed.has(key)) continue;
          probed.add(key);
          const alertsBefore = store.audit({ actorId }).length;
          const r = await runtime.send(actorId, probe, { by: 'model-test' });
          expect(r.ok, `${probe.type} in ${before.state} must be rejected`).toBe(false);
          const after = store.get<ActorRecord>('actors', actorId)!;
          expect(after.stateVersion).toBe(before.stateVersion);
          expect(after.state).toBe(before.state);
          const newEvents = store.audit({ actorId }).slice(alertsBefore);
          expect(newEvents.map((e) => [e.action, e.level])).toEqual([['runtime.event_rejected', 'alert']]);
          rejectedProbes += 1;
        }

        if (m.invokes?.settle(step.event)) {
          await waitForVersion(store, runtime, actorId, version + 1);
        } else {
          const r = await runtime.send(actorId, step.event, { by: 'model-test' });
          expect(r.ok, `${step.event.type} in ${before.state}`).toBe(true);
        }
        version += 1;
        const rec = store.get<ActorRecord>('actors', actorId)!;
        expect(rec.state).toBe(stateValueToString(step.after));
        expect(rec.stateVersion).toBe(version);
        const last = store.audit({ actorId }).at(-1)!;
        expect(last).toMatchObject({
          action: `${m.kind.kind}.transition`,
          fromState: stateValueToString(step.before),
          toState: stateValueToString(step.after),
          stateVersion: version,
        });
        if (m.kind.kind === 'task') {
          expect(store.get<{ state: string; stateVersion: number }>('tasks', id)).toMatchObject({ state: rec.state, stateVersion: version });
        }
      }
    }
    await runtime.settled();
    runtime.stopAll();
    await store.close();

    const covered = edges.filter((e) => coverage.covered.has(e.id));
    console.log(`${formatCoverage(m.name, covered.length, edges.length)} — ${plan.paths.length} paths, ${rejectedProbes} disallowed events rejected`);
    expect(covered.length).toBe(edges.length);
    expect(rejectedProbes).toBeGreaterThan(0);
  }, 120_000);
});
