// The readers the machines export for the code around them (src/ asks these instead of comparing a
// state with its name): each one against the states written out here by hand, from the machine's
// description, and against what is not a state at all (a missing record, a name no machine has, a
// name every object has).
import { describe, expect, it } from 'vitest';
import { appServerStateHas, appServerStateTakes } from '../../machines/app-server.js';
import { replyVerdictOf } from '../../machines/reply-verifier.js';
import { isLeaseHeld, isLockStateLeased } from '../../machines/repo-lock.js';
import { isSessionClosed, sessionStateTakes } from '../../machines/session.js';
import { TASK_STATE, TASK_STATES, taskStateHas, taskStatesWith, taskStateTakes } from '../../machines/task-lifecycle.js';

const NOT_STATES = [undefined, null, '', 'nope', 'toString', '__proto__', 'constructor'];

describe('the task machine', () => {
  it('taskStateHas agrees with taskStatesWith for every state and role, and no non-state has a role', () => {
    for (const role of ['holdsLease', 'stopping', 'failureReceipt', 'refused'] as const) {
      for (const s of TASK_STATES) expect(taskStateHas(s, role), `${s} ${role}`).toBe(taskStatesWith(role).includes(s));
      for (const s of NOT_STATES) expect(taskStateHas(s, role)).toBe(false);
    }
  });

  it('taskStateTakes: the claim events, the publisher, an unblock', () => {
    expect(TASK_STATES.filter((s) => taskStateTakes(s, 'CLAIM'))).toEqual(['queued']);
    expect(TASK_STATES.filter((s) => taskStateTakes(s, 'RETRY_DUE'))).toEqual(['retry_wait']);
    expect(TASK_STATES.filter((s) => taskStateTakes(s, 'PUBLISHED'))).toEqual(['publishing']);
    expect(TASK_STATES.filter((s) => taskStateTakes(s, 'UNBLOCK'))).toEqual(['blocked_workspace']);
    for (const s of NOT_STATES) expect(taskStateTakes(s, 'CLAIM')).toBe(false);
  });

  it('TASK_STATE names each state by itself, and nothing else', () => {
    expect(Object.entries(TASK_STATE)).toEqual(TASK_STATES.map((s) => [s, s]));
  });
});

describe('the repository lock', () => {
  it('only `held` holds a lease; a missing record or another name does not', () => {
    expect(isLockStateLeased('held')).toBe(true);
    expect(isLockStateLeased('free')).toBe(false);
    expect(isLeaseHeld({ state: 'held' })).toBe(true);
    expect(isLeaseHeld({ state: 'free' })).toBe(false);
    expect(isLeaseHeld(undefined)).toBe(false);
    expect(isLeaseHeld(null)).toBe(false);
    for (const s of NOT_STATES) expect(isLockStateLeased(s)).toBe(false);
  });
});

describe('the session', () => {
  const STATES = ['no_thread', 'thread_starting', 'idle', 'turn_in_flight', 'waiting_user', 'resuming', 'resume_failed', 'closed'];

  it('what each state waits for', () => {
    const taking = (type: Parameters<typeof sessionStateTakes>[1]) => STATES.filter((s) => sessionStateTakes(s, type));
    expect(taking('TURN_STARTED')).toEqual(['idle', 'waiting_user']);
    expect(taking('RESTARTED')).toEqual(['idle', 'turn_in_flight', 'waiting_user']);
    expect(taking('RESUME_OK')).toEqual(['resuming']);
    expect(taking('NEW_THREAD_APPROVED')).toEqual(['resume_failed']);
    expect(taking('START_THREAD')).toEqual(['no_thread']);
    expect(taking('THREAD_STARTED')).toEqual(['thread_starting']);
    for (const s of NOT_STATES) expect(sessionStateTakes(s, 'TURN_STARTED')).toBe(false);
  });

  it('only `closed` is closed', () => {
    expect(STATES.filter((s) => isSessionClosed(s))).toEqual(['closed']);
    for (const s of NOT_STATES) expect(isSessionClosed(s)).toBe(false);
  });
});

describe('the reply verifier', () => {
  const STATES = ['querying', 'awaiting_retry_turn', 'fallback_posting', 'fallback_checking', 'confirmed', 'confirmed_via_fallback', 'failed'];

  it('a final state is its verdict; no other state has one', () => {
    expect(STATES.map((s) => replyVerdictOf(s))).toEqual([null, null, null, null, 'confirmed', 'confirmed_via_fallback', 'failed']);
    for (const s of NOT_STATES) expect(replyVerdictOf(s)).toBeNull();
  });
});

describe('the app-server', () => {
  const STATES = ['stopped', 'starting', 'initializing', 'ready', 'exited', 'restarting', 'closing', 'closed'];

  it('roles', () => {
    expect(STATES.filter((s) => appServerStateHas(s, 'processUp'))).toEqual(['starting', 'initializing', 'ready']);
    expect(STATES.filter((s) => appServerStateHas(s, 'serving'))).toEqual(['ready']);
    expect(STATES.filter((s) => appServerStateHas(s, 'exitRecorded'))).toEqual(['exited', 'restarting']);
    for (const s of NOT_STATES) expect(appServerStateHas(s, 'serving')).toBe(false);
  });

  it('what the supervisor reads from the events a state takes', () => {
    expect(STATES.filter((s) => appServerStateTakes(s, 'SCHEDULE_RESTART'))).toEqual(['exited']);
    expect(STATES.filter((s) => appServerStateTakes(s, 'RESTART_DUE'))).toEqual(['restarting']);
    expect(STATES.filter((s) => appServerStateTakes(s, 'EXITED'))).toEqual(['starting', 'initializing', 'ready', 'closing']);
    for (const s of NOT_STATES) expect(appServerStateTakes(s, 'EXITED')).toBe(false);
  });
});
