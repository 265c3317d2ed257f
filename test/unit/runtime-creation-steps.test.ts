// createInTx's creation templates: for a kind that declares `templateInput`, the records, audit
// events and answers written must be exactly those xstate's own computation gives, and a kind whose
// context derives a value from the declared field is caught (by the stand-in check or the first
// use's comparison with xstate) and still gets xstate's answer. (A kind whose creation events branch on the field
// must not declare it: that the task kind's do not is what the first tests check.)
import { describe, expect, it, vi } from 'vitest';
import { setup } from 'xstate';
import { taskMachine } from '../../machines/task-lifecycle.js';
import type { ActorKind, ActorRecord } from '../../src/runtime/actor-runtime.js';
import { taskKind } from '../../src/tasks/task-actor.js';
import { createTestRuntime } from '../support/test-runtime.js';

/** Everything a creation wrote, with the fields that differ between two runs (ids, times) taken out. */
async function created(kind: ActorKind, inputs: Array<Record<string, unknown>>, events: Array<{ type: string }>, withTask: boolean) {
  const env = await createTestRuntime([kind]);
  try {
    const out: unknown[] = [];
    for (const [i, input] of inputs.entries()) {
      const id = `t${i}`;
      const result = await env.store.transact(async (tx) => {
        if (withTask) await tx.insert('tasks', String(input['taskId']), { taskId: input['taskId'], state: 'received', stateVersion: 0 });
        return env.runtime.createInTx(tx, kind.kind, `${kind.kind}:${id}`, input, { events, taskId: id, deferHosting: true });
      });
      const actor = (await env.store.get<ActorRecord>('actors', `${kind.kind}:${id}`))!;
      const audit = (await env.store.audit({ actorId: `${kind.kind}:${id}` })).map(({ eventId: _e, timestamp: _t, seq: _s, ...rest }) => rest);
      const task = withTask ? await env.store.get('tasks', String(input['taskId'])) : undefined;
      const { createdAt: _c, updatedAt: _u, ...actorRest } = actor;
      const { updatedAt: _tu, ...taskRest } = (task ?? {}) as Record<string, unknown>;
      out.push({ state: result.state, stateVersion: result.stateVersion, actor: actorRest, audit, task: taskRest });
    }
    return out;
  } finally {
    await env.close();
  }
}

function withoutTemplate(kind: ActorKind): ActorKind {
  const { templateInput: _t, ...rest } = kind;
  return rest;
}

describe('creation templates (ActorRuntime.createInTx)', () => {
  const inputs = ['gitea-task-aaaaaaaaaaaaaaaaaaaaaaaa', 'gitea-task-0123456789abcdef01234567', 'x"quoted\\and$&special', '@@ccweb-template-taskId-1-abc@@'].map((taskId) => ({ taskId }));

  for (const events of [[{ type: 'ACCEPT' }], [{ type: 'REJECT' }], [], [{ type: 'ACCEPT' }, { type: 'CLAIM', leaseId: 'l1' }]]) {
    it(`task kind, events ${JSON.stringify(events.map((e) => e.type))}: the same records and audit events as xstate computes`, async () => {
      const spy = vi.spyOn(taskMachine, 'getInitialSnapshot');
      let fast: unknown[];
      let slow: unknown[];
      try {
        // Creations xstate computed: the calls given an input (xstate's initialTransition/transition
        // also build a throwaway actor per call, which asks for an initial snapshot without one).
        const computed = () => spy.mock.calls.filter(([, input]) => input !== undefined).length;
        fast = await created(taskKind(), inputs, events, true);
        // The template with stand-ins and the check on first use: not once per task.
        expect(computed()).toBe(2);
        spy.mockClear();
        slow = await created(withoutTemplate(taskKind()), inputs, events, true);
        expect(computed()).toBe(inputs.length);
      } finally {
        spy.mockRestore();
      }
      expect(fast).toStrictEqual(slow);
      // And the task ids really are the inputs' (nothing left over from a template's stand-in).
      expect(fast.map((r) => (r as { actor: { snapshot: { context: { taskId: string } } } }).actor.snapshot.context.taskId)).toEqual(inputs.map((i) => i.taskId));
    });
  }

  it('a kind whose context derives from the declared field still gets what xstate computes', async () => {
    const machine = setup({ types: { input: {} as { taskId: string }, context: {} as { taskId: string; label: string } } }).createMachine({
      id: 'derived',
      context: ({ input }) => ({ taskId: input.taskId, label: `task ${input.taskId.toUpperCase()}` }),
      initial: 'a',
      states: { a: { on: { GO: 'b' } }, b: {} },
    });
    const kind: ActorKind = { kind: 'derived', machine, machineVersion: 1, templateInput: ['taskId'], restore: 'lazy' };
    const fast = await created(kind, [{ taskId: 'one' }, { taskId: 'two' }, { taskId: 'three' }], [{ type: 'GO' }], false);
    const slow = await created(withoutTemplate(kind), [{ taskId: 'one' }, { taskId: 'two' }, { taskId: 'three' }], [{ type: 'GO' }], false);
    expect(fast).toStrictEqual(slow);
  });

  it('deferHosting: a new lazy actor is not live until its first event, which then finds it', async () => {
    const env = await createTestRuntime([taskKind(taskMachine)]);
    try {
      const hosts = (env.runtime as unknown as { hosts: Map<string, unknown> }).hosts;
      const created = await env.store.transact(async (tx) => {
        await tx.insert('tasks', 'd1', { taskId: 'd1', state: 'received', stateVersion: 0 });
        return env.runtime.createInTx(tx, 'task', 'task:d1', { taskId: 'd1' }, { events: [{ type: 'ACCEPT' }], taskId: 'd1', deferHosting: true });
      });
      const notices: string[] = [];
      env.runtime.onTransition((n) => notices.push(`${n.actorId} ${n.toState}`));
      created.start();
      expect(notices).toEqual(['task:d1 queued']);
      expect(hosts.has('task:d1')).toBe(false);
      expect(await env.runtime.has('task:d1')).toBe(true);
      const sent = await env.runtime.send('task:d1', { type: 'CLAIM', leaseId: 'lease-1' } as never, { by: 'test' });
      expect(sent).toMatchObject({ ok: true, fromState: 'queued', toState: 'preparing', stateVersion: 3 });
      expect(hosts.has('task:d1')).toBe(true);
      expect(await env.store.get<ActorRecord>('actors', 'task:d1')).toMatchObject({ state: 'preparing', stateVersion: 3 });
    } finally {
      await env.close();
    }
  });
});
