/**
 * Repository lease oracle, written from spec §7 (and §5.2.3, §5.5.1): a lease per repoKey with
 * `leaseId/owner/expiresAt`; acquire when free; heartbeats renew it while it is alive; release
 * must name the matching leaseId ("防止旧 worker 解锁新 worker 的租约"); an expired lease is
 * released by the expiry check and may be taken over by a new holder; a live one never.
 *
 * Readings where §7 is silent: a heartbeat for a lease that has already expired is refused (an
 * expired lease is not renewed: someone may already be entitled to take it over); a renewal never
 * moves expiresAt backwards.
 */
import type { AnyEventObject } from 'xstate';
import type { Oracle } from './oracle.js';

export interface LeaseSpecState {
  held: { leaseId: string; expiresAt: number } | null;
}

const T0 = 1_700_000_000_000;
const TTL = 30_000;

export const repoLockOracle: Oracle<LeaseSpecState> = {
  name: 'repo-lock',
  source: 'spec §7 (lease, heartbeat, release by leaseId), §5.2.3, §5.5.1 (expiry, takeover)',
  states: ['free', 'held'],
  initial: () => ({ held: null }),
  alphabet(s) {
    // Times relative to the held lease's expiry: both sides of "expired?" for every event.
    const t = s.held?.expiresAt ?? T0;
    const current = s.held?.leaseId ?? 'lease-none';
    const fresh = `lease-at-${t}`;
    return [
      { type: 'ACQUIRE', leaseId: fresh, owner: 'worker-o', taskId: 'task-o', now: t, ttlMs: TTL },
      { type: 'ACQUIRE', leaseId: fresh, owner: 'worker-o', taskId: 'task-o', now: t - 1, ttlMs: TTL },
      { type: 'HEARTBEAT', leaseId: current, now: t - 1, ttlMs: TTL },
      { type: 'HEARTBEAT', leaseId: current, now: t, ttlMs: TTL },
      { type: 'HEARTBEAT', leaseId: 'lease-of-an-old-worker', now: t - 1, ttlMs: TTL },
      { type: 'RELEASE', leaseId: current },
      { type: 'RELEASE', leaseId: 'lease-of-an-old-worker' },
      { type: 'EXPIRE', now: t },
      { type: 'EXPIRE', now: t - 1 },
    ];
  },
  next(s, e) {
    const ev = e as AnyEventObject & { leaseId?: string; now?: number; ttlMs?: number };
    const alive = (now: number) => s.held !== null && now < s.held.expiresAt;
    const grant = (): LeaseSpecState => ({ held: { leaseId: ev.leaseId!, expiresAt: ev.now! + ev.ttlMs! } });
    if (s.held === null) {
      // Free: only an acquire means anything; there is nothing to renew, release or expire.
      return e.type === 'ACQUIRE' ? grant() : null;
    }
    switch (e.type) {
      case 'ACQUIRE': // takeover only after expiry
        return alive(ev.now!) ? null : grant();
      case 'HEARTBEAT': // renew: the holder's lease, still alive; a renewal never shortens it (a heartbeat may arrive late)
        return ev.leaseId === s.held.leaseId && alive(ev.now!)
          ? { held: { ...s.held, expiresAt: Math.max(s.held.expiresAt, ev.now! + ev.ttlMs!) } }
          : null;
      case 'RELEASE': // only by the matching leaseId
        return ev.leaseId === s.held.leaseId ? { held: null } : null;
      case 'EXPIRE': // the expiry check frees it once expiresAt has passed
        return alive(ev.now!) ? null : { held: null };
      default:
        return null;
    }
  },
  value: (s) => (s.held ? 'held' : 'free'),
  key: (s) => (s.held ? 'held' : 'free'),
  observe: (s) => ({ leaseId: s.held?.leaseId ?? null, expiresAt: s.held?.expiresAt ?? null }),
};
