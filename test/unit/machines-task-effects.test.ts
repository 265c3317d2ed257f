// The task machine's effects (TASK_EFFECTS): each state with work in flight invokes its own, with the
// task and the state as input; entering starts it, leaving stops it; without an implementation it
// never settles (nothing moves the task but an event). Run on xstate itself, with recorded effects at
// the provide() seam.
import { describe, expect, it } from 'vitest';
import { createActor, fromPromise, type AnyActorRef } from 'xstate';
import { TASK_EFFECTS, taskMachine, type TaskEffectInput, type TaskEvent } from '../../machines/task-lifecycle.js';

/** Events that reach each state with work in flight, from `received`. */
const TO: Record<keyof typeof TASK_EFFECTS, TaskEvent[]> = {
  preparing: [{ type: 'ACCEPT' }, { type: 'CLAIM', leaseId: 'l1' }],
  running: [{ type: 'ACCEPT' }, { type: 'CLAIM', leaseId: 'l1' }, { type: 'WORKSPACE_READY' }],
  publishing: [{ type: 'ACCEPT' }, { type: 'CLAIM', leaseId: 'l1' }, { type: 'WORKSPACE_READY' }, { type: 'TURN_REPLIED', publish: true }],
  verifying_reply: [{ type: 'ACCEPT' }, { type: 'CLAIM', leaseId: 'l1' }, { type: 'WORKSPACE_READY' }, { type: 'TURN_REPLIED' }],
  aborting: [{ type: 'ACCEPT' }, { type: 'CLAIM', leaseId: 'l1' }, { type: 'ABORT', by: 'admin:a' }],
};

function recorded() {
  const log: Array<{ src: string; at: 'start' | 'stop'; input: TaskEffectInput }> = [];
  const logic = (src: string) =>
    fromPromise<void, TaskEffectInput>(({ input, signal }) => {
      log.push({ src, at: 'start', input });
      signal.addEventListener('abort', () => log.push({ src, at: 'stop', input }));
      return new Promise<void>(() => undefined);
    });
  const actors = Object.fromEntries(Object.values(TASK_EFFECTS).map((src) => [src, logic(src)]));
  return { log, machine: taskMachine.provide({ actors: actors as never }) };
}

const tick = () => new Promise((r) => setTimeout(r, 5));

describe('the task machine invokes its work', () => {
  it.each(Object.keys(TO) as Array<keyof typeof TASK_EFFECTS>)('%s starts its own effect with the task and the state, once', async (state) => {
    const { log, machine } = recorded();
    const actor = createActor(machine, { input: { taskId: 't1' } }).start();
    for (const e of TO[state]) actor.send(e);
    await tick();
    expect(actor.getSnapshot().value).toBe(state);
    const starts = log.filter((l) => l.at === 'start');
    expect(starts.at(-1)).toEqual({ src: TASK_EFFECTS[state], at: 'start', input: { taskId: 't1', state } });
    // Every state entered on the way started its own effect once, and stopped it on leaving.
    for (const start of starts) expect(start.src).toBe(TASK_EFFECTS[start.input.state as keyof typeof TASK_EFFECTS]);
    expect(new Set(starts.map((l) => l.input.state)).size).toBe(starts.length);
    expect(log.filter((l) => l.at === 'stop').map((l) => l.src)).toEqual(starts.slice(0, -1).map((l) => l.src));
    expect(Object.keys(actor.getSnapshot().children)).toEqual([TASK_EFFECTS[state]]);
    actor.stop();
  });

  it('states without work in flight invoke nothing', async () => {
    const { log, machine } = recorded();
    const actor = createActor(machine, { input: { taskId: 't1' } }).start();
    actor.send({ type: 'ACCEPT' });
    await tick();
    expect(actor.getSnapshot().value).toBe('queued');
    expect(log).toEqual([]);
    expect(actor.getSnapshot().children).toEqual({});
    actor.stop();
  });

  it('without implementations the effects never settle: the task stays in its state, its effect running, until an event moves it', async () => {
    const actor = createActor(taskMachine, { input: { taskId: 't1' } }).start();
    for (const e of TO.preparing) actor.send(e);
    await tick();
    const effect = actor.getSnapshot().children[TASK_EFFECTS.preparing] as AnyActorRef;
    expect(actor.getSnapshot().status).toBe('active');
    expect(actor.getSnapshot().value).toBe('preparing');
    expect(effect.getSnapshot().status).toBe('active');
    actor.send({ type: 'WORKSPACE_READY' });
    await tick();
    expect(Object.keys(actor.getSnapshot().children)).toEqual([TASK_EFFECTS.running]);
    actor.stop();
  });
});
