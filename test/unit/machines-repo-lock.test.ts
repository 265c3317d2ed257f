import { initialTransition, transition } from 'xstate';
import { describe, expect, it } from 'vitest';

import {
  REPO_LOCK_EVENT_CASES,
  repoLockMachine,
  type RepoLockEvent,
} from '../../machines/repo-lock.js';

const T0 = 1_700_000_000_000;
const TTL = 30_000;

function start() {
  return initialTransition(repoLockMachine, { repoKey: 'default:acme/widget' })[0];
}
function send(snapshot: ReturnType<typeof start>, event: RepoLockEvent) {
  return transition(repoLockMachine, snapshot, event)[0];
}
function held() {
  return send(start(), { type: 'ACQUIRE', leaseId: 'lease-a', owner: 'worker-a', taskId: 'task-a', now: T0, ttlMs: TTL });
}
/** The runtime rejects an event that selects no transition. */
function handled(snapshot: ReturnType<typeof start>, event: RepoLockEvent) {
  return repoLockMachine.getTransitionData(snapshot, event).length > 0;
}

describe('repo lock machine', () => {
  it('starts free and grants a lease with expiresAt = now + ttl', () => {
    expect(start().value).toBe('free');
    const s = held();
    expect(s.value).toBe('held');
    expect(s.context).toMatchObject({
      leaseId: 'lease-a',
      owner: 'worker-a',
      taskId: 'task-a',
      acquiredAt: T0,
      expiresAt: T0 + TTL,
    });
  });

  it('refuses a second ACQUIRE while the lease is valid', () => {
    const s = held();
    const ev: RepoLockEvent = { type: 'ACQUIRE', leaseId: 'lease-b', owner: 'w-b', taskId: 't-b', now: T0 + TTL - 1, ttlMs: TTL };
    expect(handled(s, ev)).toBe(false);
    expect(send(s, ev).context).toEqual(s.context);
  });

  it('allows a takeover only once the lease has expired, and records it', () => {
    const s = held();
    const next = send(s, { type: 'ACQUIRE', leaseId: 'lease-b', owner: 'w-b', taskId: 't-b', now: T0 + TTL, ttlMs: TTL });
    expect(next.value).toBe('held');
    expect(next.context).toMatchObject({ leaseId: 'lease-b', owner: 'w-b', expiresAt: T0 + 2 * TTL });
    expect(next.context.lastEnded).toEqual({
      leaseId: 'lease-a',
      owner: 'worker-a',
      taskId: 'task-a',
      expiresAt: T0 + TTL,
      endedBy: 'taken_over',
      endedAt: T0 + TTL,
      replacedBy: 'lease-b',
    });
  });

  it('extends the lease on a heartbeat of the current, unexpired lease', () => {
    const s = held();
    const next = send(s, { type: 'HEARTBEAT', leaseId: 'lease-a', now: T0 + 10_000, ttlMs: TTL });
    expect(next.value).toBe('held');
    expect(next.context.expiresAt).toBe(T0 + 10_000 + TTL);
    expect(next.context.leaseId).toBe('lease-a');
  });

  it('ignores a heartbeat of a stale lease or of an expired one', () => {
    const s = held();
    const stale: RepoLockEvent = { type: 'HEARTBEAT', leaseId: 'lease-old', now: T0 + 1, ttlMs: TTL };
    const late: RepoLockEvent = { type: 'HEARTBEAT', leaseId: 'lease-a', now: T0 + TTL, ttlMs: TTL };
    for (const ev of [stale, late]) {
      expect(handled(s, ev)).toBe(false);
      expect(send(s, ev).context).toEqual(s.context);
    }
  });

  it('a stale release changes nothing; the current one frees the lock', () => {
    const s = held();
    const stale: RepoLockEvent = { type: 'RELEASE', leaseId: 'lease-old' };
    expect(handled(s, stale)).toBe(false);
    const after = send(s, stale);
    expect(after.value).toBe('held');
    expect(after.context).toEqual(s.context);

    const freed = send(s, { type: 'RELEASE', leaseId: 'lease-a' });
    expect(freed.value).toBe('free');
    expect(freed.context).toMatchObject({ leaseId: null, owner: null, taskId: null, expiresAt: null });
    expect(freed.context.lastEnded).toMatchObject({ leaseId: 'lease-a', endedBy: 'released' });
  });

  it('a release of the old lease after a takeover does not unlock the new holder', () => {
    const taken = send(held(), { type: 'ACQUIRE', leaseId: 'lease-b', owner: 'w-b', taskId: 't-b', now: T0 + TTL, ttlMs: TTL });
    const after = send(taken, { type: 'RELEASE', leaseId: 'lease-a' });
    expect(after.value).toBe('held');
    expect(after.context.leaseId).toBe('lease-b');
  });

  it('expires only at or after expiresAt', () => {
    const s = held();
    expect(handled(s, { type: 'EXPIRE', now: T0 + TTL - 1 })).toBe(false);
    const expired = send(s, { type: 'EXPIRE', now: T0 + TTL });
    expect(expired.value).toBe('free');
    expect(expired.context.lastEnded).toMatchObject({ leaseId: 'lease-a', endedBy: 'expired', endedAt: T0 + TTL });
  });

  it('never holds two valid leases: a random walk keeps one lease, replaced only after expiry', () => {
    let seed = 42;
    const rand = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    let s = start();
    for (let i = 0; i < 600; i++) {
      const cases = REPO_LOCK_EVENT_CASES(s);
      const ev = cases[Math.floor(rand() * cases.length)]!;
      const next = send(s, ev);
      expect(next.value === 'held').toBe(next.context.leaseId !== null);
      if (s.context.leaseId !== null && next.context.leaseId !== null && next.context.leaseId !== s.context.leaseId) {
        // A different lease replaced a held one: only an ACQUIRE at or after expiry may do that.
        expect(ev.type).toBe('ACQUIRE');
        expect('now' in ev && ev.now >= (s.context.expiresAt ?? Infinity)).toBe(true);
      }
      s = next;
    }
  });
});
