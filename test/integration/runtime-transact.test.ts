// ActorRuntime.transact: actors moved and created in one store transaction (real store, runtime and
// machines): all of it kept or none; the live copies and the listeners follow once it is durable; a
// send to an actor being moved waits for it; a transition that would run an effect is refused.
import { afterEach, describe, expect, it } from 'vitest';
import { setup, type EventObject } from 'xstate';
import type { LeaseRecord, TaskRecord } from '../../src/domain/records.js';
import { lockActorId } from '../../src/leases/repo-lock-actor.js';
import type { ActorRecord, TransitionNotice } from '../../src/runtime/actor-runtime.js';
import { taskActorId } from '../../src/tasks/task-actor.js';
import { ev, schedulerKinds, submitTask } from '../support/scheduler-harness.js';
import { createTestRuntime } from '../support/test-runtime.js';

const R = 'default:org/alpha';
const acquire = (taskId: string): EventObject => ({ type: 'ACQUIRE', leaseId: 'L1', owner: 'node/1/1', taskId, now: Date.now(), ttlMs: 60_000 }) as EventObject;

/** A kind whose only transition runs an effect (an action other than assign). */
const effectMachine = setup({ actions: { ring: () => undefined } }).createMachine({
  id: 'bell',
  initial: 'quiet',
  states: { quiet: { on: { RING: { target: 'rung', actions: 'ring' } } }, rung: {} },
});

let teardown: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const t of teardown.reverse()) await t();
  teardown = [];
});

async function rig() {
  const rt = await createTestRuntime([...schedulerKinds(), { kind: 'bell', machine: effectMachine, machineVersion: 1 }]);
  teardown.push(() => rt.close());
  const notices: TransitionNotice[] = [];
  rt.runtime.onTransition((n) => notices.push(n));
  await submitTask(rt.store, rt.runtime, 'A', R);
  notices.length = 0;
  return { ...rt, notices };
}

describe('ActorRuntime.transact', () => {
  it('creates one actor and moves another in one transaction; listeners and the live copy follow once it is durable', async () => {
    const { store, runtime, notices } = await rig();
    const heardInside: number[] = [];
    const out = await runtime.transact(async ({ send, create }) => {
      await create('lock', lockActorId(R), { repoKey: R }, { events: [acquire('A')], by: 'scheduler' });
      const moved = await send(taskActorId('A'), ev({ type: 'CLAIM', leaseId: 'L1' }), { by: 'scheduler' });
      heardInside.push(notices.length);
      return moved;
    });
    expect(out).toEqual({ ok: true, fromState: 'queued', toState: 'preparing', stateVersion: 3 });
    expect(heardInside).toEqual([0]);
    expect(notices.map((n) => [n.actorId, n.toState, n.stateVersion])).toEqual([
      [lockActorId(R), 'held', 2],
      [taskActorId('A'), 'preparing', 3],
    ]);
    expect(await store.get<TaskRecord>('tasks', 'A')).toMatchObject({ state: 'preparing', leaseId: 'L1', stateVersion: 3 });
    expect(await store.get<LeaseRecord>('leases', R)).toMatchObject({ state: 'held', leaseId: 'L1', epoch: 1 });
    expect((await store.audit({ taskId: 'A' })).filter((e) => e.action === 'task.transition').map((e) => e.toState)).toEqual(['received', 'queued', 'preparing']);
    // The live copy is the stored one: the next event starts from `preparing`.
    expect(await runtime.stateOf(taskActorId('A'))).toMatchObject({ state: 'preparing', stateVersion: 3 });
    expect(await runtime.send(taskActorId('A'), { type: 'WORKSPACE_READY' })).toMatchObject({ ok: true, fromState: 'preparing', toState: 'running', stateVersion: 4 });
  });

  it('a transaction that throws keeps nothing: no actor made, none moved, nobody told; the live copy is unchanged', async () => {
    const { store, runtime, notices } = await rig();
    await expect(
      runtime.transact(async ({ send, create }) => {
        await create('lock', lockActorId(R), { repoKey: R }, { events: [acquire('A')] });
        await send(taskActorId('A'), ev({ type: 'CLAIM', leaseId: 'L1' }));
        throw new Error('changed my mind');
      }),
    ).rejects.toThrow('changed my mind');
    expect(notices).toEqual([]);
    expect(await store.get<ActorRecord>('actors', lockActorId(R))).toBeUndefined();
    expect(await store.get('leases', R)).toBeUndefined();
    expect(await store.get<TaskRecord>('tasks', 'A')).toMatchObject({ state: 'queued', stateVersion: 2 });
    expect((await store.audit({})).filter((e) => e.action === 'lease.granted' || e.toState === 'preparing')).toEqual([]);
    expect(await runtime.send(taskActorId('A'), ev({ type: 'CANCEL', by: 'admin:test' }))).toMatchObject({ ok: true, fromState: 'queued' });
  });

  it('a send to an actor being moved waits for the transaction, and applies to the state it leaves', async () => {
    const { runtime } = await rig();
    let cancel: Promise<unknown> | null = null;
    await runtime.transact(async ({ send }) => {
      await send(taskActorId('A'), ev({ type: 'CLAIM', leaseId: 'L1' }));
      cancel = runtime.send(taskActorId('A'), ev({ type: 'CANCEL', by: 'admin:test' }), { by: 'admin:test' });
      await new Promise((resolve) => setTimeout(resolve, 20));
    });
    expect(await cancel).toMatchObject({ ok: true, fromState: 'preparing', toState: 'aborting', stateVersion: 4 });
  });

  it('an illegal event is refused and alert-audited in the transaction; a transition that would run an effect throws, keeping nothing', async () => {
    const { store, runtime } = await rig();
    const refused = await runtime.transact(({ send }) => send(taskActorId('A'), { type: 'WORKSPACE_READY' }, { by: 'scheduler' }));
    expect(refused).toEqual({ ok: false, reason: 'illegal_transition', state: 'queued', stateVersion: 2 });
    expect((await store.audit({ level: 'alert' })).map((e) => [e.action, e.errorCode, e.actorId])).toEqual([['runtime.event_rejected', 'illegal_transition', taskActorId('A')]]);

    await runtime.create('bell', 'bell:1', undefined);
    await expect(runtime.transact(({ send }) => send('bell:1', { type: 'RING' }))).rejects.toThrow(/RING runs actions .*move the actor with send/);
    expect(await runtime.stateOf('bell:1')).toMatchObject({ state: 'quiet', stateVersion: 1 });
    expect(await runtime.send('bell:1', { type: 'RING' })).toMatchObject({ ok: true, toState: 'rung' });
  });
});
