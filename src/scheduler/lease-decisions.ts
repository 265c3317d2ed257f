import { isLeaseHeld } from '../../machines/repo-lock.js';
import { taskStatesWith } from '../../machines/task-lifecycle.js';
import type { LeaseRecord } from '../domain/records.js';

/** Held leases whose expiry has come (a lease without an expiry never expires by time). */
export function expiredLeases(leases: readonly LeaseRecord[], now: number): LeaseRecord[] {
  return leases.filter((l) => isLeaseHeld(l) && l.expiresAt !== null && Date.parse(l.expiresAt) <= now);
}

/** The lease's new expiry after an accepted heartbeat: never earlier than it already was. */
export function renewedExpiry(expiresAt: number, now: number, ttlMs: number): number {
  return Math.max(expiresAt, now + ttlMs);
}

/** Steps resumed after a restart (publishing, verifying_reply): they run under a lease the task never recorded. */
const RESUMED: ReadonlySet<string> = new Set(taskStatesWith('resumable'));

/**
 * Why work under `leaseId` is the task's current work, or null when it is not: the task recorded that
 * lease (`recorded`), or it is a resumed step, which records none (`resumed`: only the holder of the
 * repository's one lease can be driving it).
 */
export function workUnder(state: string, taskLeaseId: string | null | undefined, leaseId: string): 'recorded' | 'resumed' | null {
  if (taskLeaseId === leaseId) return 'recorded';
  return RESUMED.has(state) ? 'resumed' : null;
}
