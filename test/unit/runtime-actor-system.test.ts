// The runtime hosts every actor in one xstate system: the service's root spawns them, except a kind
// that names where it lives (a reply verifier: under its task's verification effect), which that
// actor spawns; each actor's invoked effects are its children too. Real runtime and store.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createMachine, fromPromise } from 'xstate';
import { TASK_EFFECTS, type TaskEvent, type taskMachine } from '../../machines/task-lifecycle.js';
import type { ActorKind } from '../../src/runtime/actor-runtime.js';
import { hostingEffect, type ActorTreeNode } from '../../src/runtime/actor-system.js';
import { taskActorId, taskKind } from '../../src/tasks/task-actor.js';
import { createTestRuntime } from '../support/test-runtime.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

const idle = createMachine({ id: 'idle', initial: 'on', states: { on: {} } });
const lockKind: ActorKind = { kind: 'lock', machine: idle, machineVersion: 1 };
/** Lives where a reply verifier does: under its task's verification while that runs here. */
const verifierKind: ActorKind = {
  kind: 'verifier',
  machine: idle,
  machineVersion: 1,
  hostedUnder: (taskId) => (taskId === null ? null : { actorId: taskActorId(taskId), child: TASK_EFFECTS.verifying_reply }),
};

/** Each node as `id[child, …]`, children sorted, for a readable comparison. */
function shape(node: ActorTreeNode): string {
  const children = node.children.map(shape).sort();
  return children.length ? `${node.id}[${children.join(', ')}]` : node.id;
}

async function world() {
  const t = await createTestRuntime([taskKind(), lockKind, verifierKind]);
  cleanups.push(() => t.close());
  const { store, runtime } = t;
  // The verification effect as the executor gives it: work that never ends here, under which actors can be hosted.
  const verifying = hostingEffect(fromPromise(() => new Promise<void>(() => undefined)));
  runtime.provide('task', (m) => (m as typeof taskMachine).provide({ actors: { [TASK_EFFECTS.verifying_reply]: verifying as never } }));
  const events: TaskEvent[] = [{ type: 'ACCEPT' }, { type: 'CLAIM', leaseId: 'lease-1' }, { type: 'WORKSPACE_READY' }, { type: 'TURN_REPLIED' }];
  const created = await store.transact(async (tx) => {
    await tx.insert('tasks', 't1', { taskId: 't1', state: 'received', stateVersion: 0 });
    return runtime.createInTx(tx, 'task', taskActorId('t1'), { taskId: 't1' }, { taskId: 't1', events });
  });
  created.start();
  await runtime.create('lock', 'lock:r1', {});
  return { store, runtime };
}

describe('the actor system', () => {
  it('the root hosts the long-lived actors and the tasks; a verifying task invokes its verification, under which its verifier lives', async () => {
    const { runtime } = await world();
    expect(shape(runtime.tree())).toBe('service[lock:r1, task:t1[verifyReply[work]]]');
    await runtime.create('verifier', 'verifier:t1:1', {}, { taskId: 't1' });
    expect(shape(runtime.tree())).toBe('service[lock:r1, task:t1[verifyReply[verifier:t1:1, work]]]');
  });

  it('a verifier of a task not live here is under the root; one whose verification stopped here carries on there from its stored snapshot', async () => {
    const { runtime } = await world();
    await runtime.create('verifier', 'verifier:t9:1', {}, { taskId: 't9' });
    await runtime.create('verifier', 'verifier:t1:1', {}, { taskId: 't1' });
    expect(shape(runtime.tree())).toBe('service[lock:r1, task:t1[verifyReply[verifier:t1:1, work]], verifier:t9:1]');
    // The task let go: its verification stops, and with it the verifier it spawned.
    runtime.release((a) => a.kind === 'task');
    await vi.waitFor(() => expect(shape(runtime.tree())).toBe('service[lock:r1, verifier:t1:1, verifier:t9:1]'), { timeout: 5_000 });
    // Hosted again, the task's verification is a new actor; the verifier stays where it carries on.
    expect(await runtime.ensureHosted(taskActorId('t1'))).toBe(true);
    expect(shape(runtime.tree())).toBe('service[lock:r1, task:t1[verifyReply[work]], verifier:t1:1, verifier:t9:1]');
  });

  it('stopping every actor stops a verifier with its task for good: nothing is hosted again after it', async () => {
    const { runtime } = await world();
    await runtime.create('verifier', 'verifier:t1:1', {}, { taskId: 't1' });
    runtime.stopAll();
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(shape(runtime.tree())).toBe('service');
  });

  it('an actor hosted again takes its place in the system (its system id freed when the copy before it stopped)', async () => {
    const { runtime } = await world();
    for (let i = 0; i < 3; i++) {
      runtime.release(() => true);
      expect(await runtime.ensureHosted('lock:r1')).toBe(true);
      expect(await runtime.ensureHosted(taskActorId('t1'))).toBe(true);
    }
    expect(shape(runtime.tree())).toBe('service[lock:r1, task:t1[verifyReply[work]]]');
    // The finished task leaves the system.
    expect((await runtime.send(taskActorId('t1'), { type: 'REPLY_CONFIRMED' })).ok).toBe(true);
    expect(shape(runtime.tree())).toBe('service[lock:r1]');
  });
});
