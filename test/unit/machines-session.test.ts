import { initialTransition, transition } from 'xstate';
import { describe, expect, it } from 'vitest';

import {
  SESSION_EVENT_CASES,
  sessionMachine,
  sessionStatusOf,
  type SessionEvent,
} from '../../machines/session.js';

type Snap = ReturnType<typeof start>;
function start() {
  return initialTransition(sessionMachine, { sessionKey: 'default:acme/widget:issue:42' })[0];
}
function run(snapshot: Snap, ...events: SessionEvent[]): Snap {
  return events.reduce((s, e) => transition(sessionMachine, s, e)[0], snapshot);
}
function handled(snapshot: Snap, event: SessionEvent) {
  return sessionMachine.getTransitionData(snapshot, event).length > 0;
}
const active = () => run(start(), { type: 'START_THREAD' }, { type: 'THREAD_STARTED', threadId: 'thread-1' });
const inTurn = () => run(active(), { type: 'TURN_STARTED', turnId: 'turn-1', taskId: 'task-1' });
const waiting = () => run(inTurn(), { type: 'TURN_WAITING_USER', turnId: 'turn-1' });

describe('session machine', () => {
  it('starts a thread and runs turns on it', () => {
    expect(start().value).toBe('no_thread');
    const s = active();
    expect(s.value).toBe('idle');
    expect(s.context.threadId).toBe('thread-1');
    const t = inTurn();
    expect(t.value).toBe('turn_in_flight');
    expect(t.context).toMatchObject({ turnId: 'turn-1', taskId: 'task-1' });
    const done = run(t, { type: 'TURN_COMPLETED', turnId: 'turn-1' });
    expect(done.value).toBe('idle');
    expect(done.context).toMatchObject({ turnId: null, lastTurnId: 'turn-1', lastTaskId: 'task-1', threadId: 'thread-1' });
  });

  it('a failed thread start returns to no_thread and keeps the error', () => {
    const s = run(start(), { type: 'START_THREAD' }, { type: 'THREAD_START_FAILED', errorCode: 'codex_unavailable' });
    expect(s.value).toBe('no_thread');
    expect(s.context.lastErrorCode).toBe('codex_unavailable');
  });

  it('ignores turn events of another turn', () => {
    const t = inTurn();
    for (const ev of [
      { type: 'TURN_COMPLETED', turnId: 'turn-0' },
      { type: 'TURN_WAITING_USER', turnId: 'turn-0' },
      { type: 'TURN_FAILED', turnId: 'turn-0', errorCode: 'x' },
    ] as SessionEvent[]) {
      expect(handled(t, ev)).toBe(false);
      expect(run(t, ev).value).toBe('turn_in_flight');
    }
    const failed = run(t, { type: 'TURN_FAILED', turnId: 'turn-1', errorCode: 'turn_failed' });
    expect(failed.value).toBe('idle');
    expect(failed.context.lastErrorCode).toBe('turn_failed');
  });

  it('resumes to where it rested before the restart', () => {
    expect(run(active(), { type: 'RESTARTED' }).value).toBe('resuming');
    expect(run(active(), { type: 'RESTARTED' }, { type: 'RESUME_OK' }).value).toBe('idle');
    expect(run(waiting(), { type: 'RESTARTED' }, { type: 'RESUME_OK' }).value).toBe('waiting_user');
    const lostTurn = run(inTurn(), { type: 'RESTARTED' }, { type: 'RESUME_OK' });
    expect(lostTurn.value).toBe('idle');
    expect(lostTurn.context).toMatchObject({ turnId: null, lastTurnId: 'turn-1', threadId: 'thread-1', resumeTo: null });
  });

  it('a failed resume keeps the thread; only NEW_THREAD_APPROVED leads to a new one', () => {
    const failed = run(active(), { type: 'RESTARTED' }, { type: 'RESUME_FAILED', errorCode: 'thread_not_found' });
    expect(failed.value).toBe('resume_failed');
    expect(failed.context.threadId).toBe('thread-1');
    for (const ev of [
      { type: 'START_THREAD' },
      { type: 'THREAD_STARTED', threadId: 'thread-2' },
      { type: 'RESTARTED' },
      { type: 'RESUME_OK' },
      { type: 'TURN_STARTED', turnId: 'turn-2', taskId: 'task-2' },
    ] as SessionEvent[]) {
      expect(handled(failed, ev), ev.type).toBe(false);
    }
    const approved = run(failed, { type: 'NEW_THREAD_APPROVED', reason: 'thread lost', by: 'admin' });
    expect(approved.value).toBe('thread_starting');
    expect(approved.context).toMatchObject({
      threadId: null,
      previousThreadIds: ['thread-1'],
      lastApproval: { reason: 'thread lost', by: 'admin', replacedThreadId: 'thread-1' },
    });
    const renewed = run(approved, { type: 'THREAD_STARTED', threadId: 'thread-2' });
    expect(renewed.value).toBe('idle');
    expect(renewed.context.threadId).toBe('thread-2');
    expect(renewed.context.previousThreadIds).toEqual(['thread-1']);
  });

  it('never replaces a thread id except through NEW_THREAD_APPROVED (random walk)', () => {
    let seed = 7;
    const rand = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    let s = start();
    let approvals = 0;
    for (let i = 0; i < 1_000; i++) {
      if (s.status !== 'active') s = start();
      const cases = SESSION_EVENT_CASES(s);
      const ev = cases[Math.floor(rand() * cases.length)]!;
      const next = run(s, ev);
      if (s.context.threadId !== null && next.context.threadId !== s.context.threadId) {
        expect(ev.type).toBe('NEW_THREAD_APPROVED');
        expect(next.context.threadId).toBeNull();
        expect(next.context.previousThreadIds.at(-1)).toBe(s.context.threadId);
        approvals++;
      }
      if (s.context.threadId === null && next.context.threadId !== null) {
        expect(ev.type).toBe('THREAD_STARTED');
      }
      s = next;
    }
    expect(approvals).toBeGreaterThan(0);
  });

  it('closes from every non-final state and then takes nothing', () => {
    const states: Snap[] = [
      start(),
      run(start(), { type: 'START_THREAD' }),
      active(),
      inTurn(),
      waiting(),
      run(active(), { type: 'RESTARTED' }),
      run(active(), { type: 'RESTARTED' }, { type: 'RESUME_FAILED', errorCode: 'x' }),
    ];
    for (const s of states) {
      const closed = run(s, { type: 'CLOSE' });
      expect(closed.value, JSON.stringify(s.value)).toBe('closed');
      expect(closed.status).toBe('done');
      expect(run(closed, { type: 'START_THREAD' }).value).toBe('closed');
    }
    expect(sessionStatusOf('closed')).toBe('closed');
    expect(sessionStatusOf('waiting_user')).toBe('waiting_user');
    expect(sessionStatusOf('turn_in_flight')).toBe('active');
  });
});
