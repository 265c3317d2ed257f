import { initialTransition, transition } from 'xstate';
import { describe, expect, it } from 'vitest';
import { appServerMachine, type AppServerEvent } from '../../machines/app-server.js';

type Snap = ReturnType<typeof start>;
const T0 = 1_700_000_000_000;
function start() {
  return initialTransition(appServerMachine, { serviceId: 'default' })[0];
}
function run(s: Snap, ...events: AppServerEvent[]): Snap {
  return events.reduce((acc, e) => transition(appServerMachine, acc, e)[0], s);
}
const handled = (s: Snap, e: AppServerEvent) => appServerMachine.getTransitionData(s, e).length > 0;
const ready = () =>
  run(start(), { type: 'START', now: T0 }, { type: 'SPAWNED', pid: 7, now: T0 }, { type: 'INITIALIZED', now: T0 + 120, model: 'm', userAgent: 'codex/x' });
const exit = (now: number): AppServerEvent => ({ type: 'EXITED', code: null, signal: 'SIGKILL', reason: 'exited', now });

describe('app-server machine', () => {
  it('runs the start-up chain to ready and records what the server reported', () => {
    const s = ready();
    expect(s.value).toBe('ready');
    expect(s.context).toMatchObject({ pid: 7, startedAt: T0, readyAt: T0 + 120, model: 'm', userAgent: 'codex/x', consecutiveFailures: 0 });
  });

  it('records each capability downgrade once, during start-up or later; a repeat is not handled', () => {
    let s = run(start(), { type: 'START', now: T0 }, { type: 'SPAWNED', pid: 7, now: T0 });
    s = run(s, { type: 'CAPABILITY_DOWNGRADE', capability: 'goals', reason: 'x' });
    expect(s.value).toBe('initializing');
    expect(handled(s, { type: 'CAPABILITY_DOWNGRADE', capability: 'goals', reason: 'again' })).toBe(false);
    s = run(s, { type: 'INITIALIZED', now: T0, model: null, userAgent: null }, { type: 'CAPABILITY_DOWNGRADE', capability: 'collaborationMode', reason: 'y' });
    expect(s.value).toBe('ready');
    expect(s.context.downgrades).toEqual(['goals', 'collaborationMode']);
  });

  it('exit → restarting with a deadline; RESTART_DUE only at or after it; backoff counter resets once ready', () => {
    let s = run(ready(), exit(T0 + 1000));
    expect(s.value).toBe('exited');
    expect(s.context).toMatchObject({ pid: null, consecutiveFailures: 1, lastExit: { signal: 'SIGKILL', at: T0 + 1000 } });
    s = run(s, { type: 'SCHEDULE_RESTART', now: T0 + 1000, delayMs: 500 });
    expect(s.value).toBe('restarting');
    expect(s.context).toMatchObject({ restartAt: T0 + 1500, restarts: 1 });
    expect(handled(s, { type: 'RESTART_DUE', now: T0 + 1499 })).toBe(false);
    s = run(s, { type: 'RESTART_DUE', now: T0 + 1500 });
    expect(s.value).toBe('starting');
    expect(s.context).toMatchObject({ restartAt: null, downgrades: [] });
    // A failed start counts again, then ready resets the counter.
    s = run(s, exit(T0 + 1600));
    expect(s.context.consecutiveFailures).toBe(2);
    s = run(s, { type: 'SCHEDULE_RESTART', now: T0 + 1600, delayMs: 1000 }, { type: 'RESTART_DUE', now: T0 + 2600 }, { type: 'SPAWNED', pid: 8, now: T0 + 2600 }, { type: 'INITIALIZED', now: T0 + 2700, model: 'm', userAgent: null });
    expect(s.context).toMatchObject({ consecutiveFailures: 0, restarts: 2, pid: 8 });
  });

  it('stop: closing → closed on exit; closed can start again; an exit while closing is not a crash', () => {
    let s = run(ready(), { type: 'STOP', now: T0 });
    expect(s.value).toBe('closing');
    expect(handled(s, { type: 'SCHEDULE_RESTART', now: T0, delayMs: 0 })).toBe(false);
    s = run(s, { type: 'EXITED', code: 0, signal: null, reason: 'exited', now: T0 + 5 });
    expect(s.value).toBe('closed');
    expect(s.context.consecutiveFailures).toBe(0);
    expect(run(s, { type: 'START', now: T0 + 10 }).value).toBe('starting');
    expect(run(run(ready(), exit(T0), { type: 'SCHEDULE_RESTART', now: T0, delayMs: 10 }), { type: 'STOP', now: T0 }).value).toBe('closed');
  });
});
