/**
 * Repository lock: one actor per `repoKey` (architecture §3, §7).
 *
 * A lease is `{leaseId, owner, taskId, expiresAt}`. Only one lease is ever valid: the context holds
 * at most one, and a new holder can only replace it after it has expired (a takeover, recorded in
 * `lastEnded` so the runtime audits it). Releasing checks the `leaseId`, so a stale worker cannot
 * unlock the lease of a newer one: a stale RELEASE is not handled by any transition, the runtime
 * rejects it and the state stays unchanged.
 *
 * Pure: no I/O, no clock. Time arrives in events (`now`, epoch ms). There is no `after` timer: the
 * runtime re-arms a timer from `expiresAt` and sends EXPIRE.
 */
import { assign, setup } from 'xstate';
import { stateHasTag } from './state-nodes.js';

export const REPO_LOCK_MACHINE_ID = 'repoLock';
export const REPO_LOCK_MACHINE_VERSION = 1;

export interface RepoLockInput {
  repoKey: string;
}

/** How the previous lease ended; kept so the runtime can audit it. */
export interface EndedLease {
  leaseId: string;
  owner: string;
  taskId: string;
  expiresAt: number;
  endedBy: 'released' | 'expired' | 'taken_over';
  /** `now` of the event that ended it; null for RELEASE (which carries no time). */
  endedAt: number | null;
  /** For a takeover: the lease that replaced it. */
  replacedBy: string | null;
}

export interface RepoLockContext {
  repoKey: string;
  leaseId: string | null;
  owner: string | null;
  taskId: string | null;
  expiresAt: number | null;
  acquiredAt: number | null;
  lastEnded: EndedLease | null;
}

export type RepoLockEvent =
  | { type: 'ACQUIRE'; leaseId: string; owner: string; taskId: string; now: number; ttlMs: number }
  | { type: 'HEARTBEAT'; leaseId: string; now: number; ttlMs: number }
  | { type: 'RELEASE'; leaseId: string }
  | { type: 'EXPIRE'; now: number };

function endedLease(
  context: RepoLockContext,
  endedBy: EndedLease['endedBy'],
  endedAt: number | null,
  replacedBy: string | null,
): EndedLease | null {
  if (context.leaseId === null) return null;
  return {
    leaseId: context.leaseId,
    owner: context.owner ?? '',
    taskId: context.taskId ?? '',
    expiresAt: context.expiresAt ?? 0,
    endedBy,
    endedAt,
    replacedBy,
  };
}

const NO_LEASE = {
  leaseId: null,
  owner: null,
  taskId: null,
  expiresAt: null,
  acquiredAt: null,
} as const;

type AcquireEvent = Extract<RepoLockEvent, { type: 'ACQUIRE' }>;

/** The lease an ACQUIRE grants (a first acquire or a takeover alike). */
function leaseFrom(event: AcquireEvent) {
  return {
    leaseId: event.leaseId,
    owner: event.owner,
    taskId: event.taskId,
    acquiredAt: event.now,
    expiresAt: event.now + event.ttlMs,
  };
}

/** The event names the lease currently held (a stale leaseId never matches). */
function namesHeldLease(context: RepoLockContext, event: RepoLockEvent): boolean {
  return 'leaseId' in event && context.leaseId !== null && event.leaseId === context.leaseId;
}

/** The held lease has expired at the event's `now` (now ≥ expiresAt). */
function expiredAt(context: RepoLockContext, event: RepoLockEvent): boolean {
  return 'now' in event && context.expiresAt !== null && event.now >= context.expiresAt;
}

export const repoLockMachine = setup({
  types: {
    context: {} as RepoLockContext,
    events: {} as RepoLockEvent,
    input: {} as RepoLockInput,
  },
  guards: {
    isLeaseExpired: ({ context, event }) => expiredAt(context, event),
    isCurrentLease: ({ context, event }) => namesHeldLease(context, event),
    /** A heartbeat of the lease currently held, before it expires (an expired lease is not revived). */
    isCurrentLeaseAlive: ({ context, event }) =>
      event.type === 'HEARTBEAT' && namesHeldLease(context, event) && context.expiresAt !== null && !expiredAt(context, event),
  },
  actions: {
    grantLease: assign(({ event }) => (event.type === 'ACQUIRE' ? leaseFrom(event) : {})),
    takeOverLease: assign(({ context, event }) =>
      event.type === 'ACQUIRE'
        ? { lastEnded: endedLease(context, 'taken_over', event.now, event.leaseId), ...leaseFrom(event) }
        : {},
    ),
    extendLease: assign(({ context, event }) => {
      if (event.type !== 'HEARTBEAT') return {};
      return { expiresAt: Math.max(context.expiresAt ?? 0, event.now + event.ttlMs) };
    }),
    clearReleasedLease: assign(({ context }) => ({
      ...NO_LEASE,
      lastEnded: endedLease(context, 'released', null, null),
    })),
    clearExpiredLease: assign(({ context, event }) => ({
      ...NO_LEASE,
      lastEnded: endedLease(context, 'expired', event.type === 'EXPIRE' ? event.now : null, null),
    })),
  },
}).createMachine({
  id: REPO_LOCK_MACHINE_ID,
  description:
    'Lease on one repository (repoKey). At most one valid lease; release checks leaseId; ' +
    'takeover only after expiry. Time comes in events; the runtime sends EXPIRE from expiresAt.',
  context: ({ input }) => ({ repoKey: input.repoKey, ...NO_LEASE, lastEnded: null }),
  initial: 'free',
  states: {
    free: {
      description: 'Nobody holds the repository. Any worker may acquire it.',
      on: {
        ACQUIRE: { target: 'held', actions: 'grantLease' },
      },
    },
    held: {
      tags: ['leased'],
      description:
        'One lease (leaseId, owner, taskId) holds the repository until expiresAt. ACQUIRE is only ' +
        'accepted once it has expired (takeover, audited); a RELEASE or HEARTBEAT naming another ' +
        'lease is not handled and is rejected by the runtime.',
      on: {
        ACQUIRE: {
          guard: 'isLeaseExpired',
          target: 'held',
          reenter: true,
          actions: 'takeOverLease',
        },
        HEARTBEAT: {
          guard: 'isCurrentLeaseAlive',
          target: 'held',
          reenter: false,
          actions: 'extendLease',
        },
        RELEASE: { guard: 'isCurrentLease', target: 'free', actions: 'clearReleasedLease' },
        EXPIRE: { guard: 'isLeaseExpired', target: 'free', actions: 'clearExpiredLease' },
      },
    },
  },
});

export type RepoLockMachine = typeof repoLockMachine;

/**
 * Whether a repository lock in `state` holds a lease (tag `leased`): its repository is taken until
 * the lease is released or expires. Any other state leaves the repository free for a claim.
 */
export function isLockStateLeased(state: string | null | undefined): boolean {
  return stateHasTag(repoLockMachine, state, 'leased');
}

/** Whether a lease record (or the lock actor's record), as stored, holds its repository; a missing one does not. */
export function isLeaseHeld(record: { state: string } | null | undefined): boolean {
  return isLockStateLeased(record?.state);
}

/** The part of a snapshot the model traversal needs: the state and the guards' inputs. */
interface RepoLockSnapshotLike {
  value: unknown;
  context: RepoLockContext;
}

/** Base time used by sample events when no lease gives a reference point. */
const SAMPLE_T0 = 1_700_000_000_000;
const SAMPLE_TTL_MS = 30_000;

/**
 * Sample events for model-based traversal. Times are relative to the held lease's `expiresAt`, so
 * both sides of every guard are exercised: expired / not yet expired, current / stale leaseId.
 */
export function REPO_LOCK_EVENT_CASES(snapshot: RepoLockSnapshotLike): RepoLockEvent[] {
  const ctx = snapshot.context;
  const expiresAt = ctx.expiresAt ?? SAMPLE_T0;
  const current = ctx.leaseId ?? 'lease-none';
  const nextLease = `lease-${(ctx.acquiredAt ?? SAMPLE_T0) + 1}`;
  const ttlMs = SAMPLE_TTL_MS;
  return [
    // free: plain acquire; held: takeover after expiry (true) / refused before expiry (false)
    { type: 'ACQUIRE', leaseId: nextLease, owner: 'worker-b', taskId: 'task-b', now: expiresAt, ttlMs },
    { type: 'ACQUIRE', leaseId: nextLease, owner: 'worker-b', taskId: 'task-b', now: expiresAt - 1, ttlMs },
    // heartbeat: current & alive (true) / current but expired / stale lease (false)
    { type: 'HEARTBEAT', leaseId: current, now: expiresAt - 1, ttlMs },
    { type: 'HEARTBEAT', leaseId: current, now: expiresAt, ttlMs },
    { type: 'HEARTBEAT', leaseId: 'lease-stale', now: expiresAt - 1, ttlMs },
    // release: current (true) / stale (false)
    { type: 'RELEASE', leaseId: current },
    { type: 'RELEASE', leaseId: 'lease-stale' },
    // expire: due (true) / early (false)
    { type: 'EXPIRE', now: expiresAt },
    { type: 'EXPIRE', now: expiresAt - 1 },
  ];
}

/**
 * Graph serialization: the state only. Every guard compares an event with the held lease, and the
 * sample events are derived from that lease, so no context value changes a guard's outcome.
 */
export function serializeRepoLockForGraph(snapshot: RepoLockSnapshotLike): string {
  return JSON.stringify({ value: snapshot.value, held: snapshot.context.leaseId !== null });
}
