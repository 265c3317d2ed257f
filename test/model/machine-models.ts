/**
 * The five machines under model-based test: for each, the machine file's sample events and
 * guard-relevant serialization (for @xstate/graph), its independent oracle, and how the machine's
 * context shows the facts the oracle observes.
 */
import type { AnyEventObject, AnyMachineSnapshot, AnyStateMachine } from 'xstate';
import {
  APP_SERVER_EVENT_CASES,
  REPLY_VERIFIER_EVENT_CASES,
  SESSION_EVENT_CASES,
  appServerMachine,
  replyVerifierMachine,
  repoLockMachine,
  serializeAppServerForGraph,
  serializeReplyVerifierForGraph,
  serializeSessionForGraph,
  serializeTaskForGraph,
  sessionMachine,
  taskEventCases,
  taskMachine,
} from '../../machines/index.js';
import { appServerOracle } from './oracles/app-server-oracle.js';
import type { Oracle } from './oracles/oracle.js';
import { replyVerifierOracle } from './oracles/reply-verifier-oracle.js';
import { repoLockOracle } from './oracles/repo-lock-oracle.js';
import { sessionOracle } from './oracles/session-oracle.js';
import { taskOracle } from './oracles/task-oracle.js';

export interface MachineModel {
  name: string;
  machine: AnyStateMachine;
  input: (id: string) => unknown;
  events: (s: AnyMachineSnapshot) => readonly AnyEventObject[];
  serialize: (s: AnyMachineSnapshot) => string;
  oracle: Oracle<any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- each oracle has its own state type
  observeMachine: (s: AnyMachineSnapshot) => Record<string, unknown>;
  /** Depth bound of the oracle comparison, when `serialize` is not bounded under the oracle's events. */
  compareDepth?: number;
  /** Why @xstate/graph's getSimplePaths is not enumerated for this machine (absent: it is). */
  noSimplePaths?: string;
  /**
   * Event types left out of the cycle-free path enumeration (absent: none), each because it leads only
   * where enumerated events lead from the same state (checked per state by the simple-paths test; what
   * it does to the context is compared with the oracle in every reachable state by machines.oracle.test.ts):
   * every path it adds copies one already checked, with another event on one step.
   */
  simplePathsWithout?: { types: readonly string[]; why: string };
}

const ctx = <T>(s: AnyMachineSnapshot) => s.context as T;

/**
 * Repository-lock sample events at absolute times. The machine file's REPO_LOCK_EVENT_CASES derive
 * their times from the held lease's expiresAt; @xstate/graph then builds a path from events computed
 * for one snapshot of a vertex and replays them on another snapshot of the same vertex (another
 * expiresAt), which is not the same test. With a few absolute instants the lease context is finite
 * (expiresAt = max(old, now + ttl)), so the vertex can carry it whole and every path is replayable.
 */
const LOCK_T0 = 1_700_000_000_000;
const LOCK_TTL = 10_000;
const LOCK_NOWS = [0, 5_000, 10_000, 15_000].map((d) => LOCK_T0 + d);
function repoLockGraphEvents(s: AnyMachineSnapshot): AnyEventObject[] {
  const current = ctx<{ leaseId: string | null }>(s).leaseId ?? 'lease-none';
  return [
    ...LOCK_NOWS.map((now) => ({ type: 'ACQUIRE', leaseId: `lease-${now - LOCK_T0}`, owner: 'worker', taskId: 'task', now, ttlMs: LOCK_TTL })),
    ...LOCK_NOWS.map((now) => ({ type: 'HEARTBEAT', leaseId: current, now, ttlMs: LOCK_TTL })),
    { type: 'HEARTBEAT', leaseId: 'lease-stale', now: LOCK_T0, ttlMs: LOCK_TTL },
    { type: 'RELEASE', leaseId: current },
    { type: 'RELEASE', leaseId: 'lease-stale' },
    ...LOCK_NOWS.map((now) => ({ type: 'EXPIRE', now })),
  ];
}

export const MACHINE_MODELS: MachineModel[] = [
  {
    name: 'task-lifecycle',
    machine: taskMachine,
    input: (id) => ({ taskId: id }),
    events: () => taskEventCases(),
    serialize: (s) => serializeTaskForGraph(s as never),
    oracle: taskOracle,
    // Where LEASE_LOST and STEP_FAILED are taken they lead where PREPARE_FAILED, TURN_FAILED,
    // PUBLISH_FAILED, REPLY_FAILED or ABORT_TIMEOUT lead, so every cycle-free path through them copies one
    // already enumerated (with them the ~20k paths grow several times over). Each of their
    // (state, event) pairs is still compared with the oracle in every reachable state
    // (machines.oracle.test.ts) and replayed on the runtime (machines.model.test.ts).
    simplePathsWithout: { types: ['LEASE_LOST', 'STEP_FAILED'], why: 'each takes the transitions of an enumerated failure event' },
    observeMachine: (s) => {
      const c = ctx<Record<string, unknown>>(s);
      const { attempt, replyAttempt, errorCode, nextRetryAt, leaseId, mcpFailureReason, stoppedBy } = c;
      // `asking` is absent until a turn asks (the initial context leaves it out: task-lifecycle.ts).
      return { attempt, replyAttempt, errorCode, nextRetryAt, leaseId, mcpFailureReason, stoppedBy, asking: c['asking'] === true };
    },
  },
  {
    name: 'repo-lock',
    machine: repoLockMachine,
    input: (id) => ({ repoKey: `default:acme/${id}` }),
    events: repoLockGraphEvents,
    serialize: (s) => {
      const c = ctx<{ leaseId: string | null; expiresAt: number | null }>(s);
      return JSON.stringify({ value: s.value, leaseId: c.leaseId, expiresAt: c.expiresAt });
    },
    oracle: repoLockOracle,
    // The oracle's own events are relative to the lease's expiry, so expiresAt grows without bound
    // along heartbeats: the comparison explores every sequence of up to 4 events instead.
    compareDepth: 4,
    noSimplePaths:
      'its 19 vertices are densely cyclic (heartbeats, takeovers, re-acquires): enumerating every cycle-free path did not ' +
      'finish in 10 minutes; the shortest paths and the exhaustive oracle comparison cover it',
    observeMachine: (s) => {
      const c = ctx<{ leaseId: string | null; expiresAt: number | null }>(s);
      return { leaseId: c.leaseId, expiresAt: c.expiresAt };
    },
  },
  {
    name: 'session',
    machine: sessionMachine,
    input: (id) => ({ sessionKey: `default:acme/widget:issue:${id}` }),
    events: (s) => SESSION_EVENT_CASES(s as never),
    serialize: (s) => serializeSessionForGraph(s as never),
    oracle: sessionOracle,
    observeMachine: (s) => {
      const c = ctx<{ threadId: string | null; turnId: string | null }>(s);
      return { threadId: c.threadId, turnId: c.turnId };
    },
  },
  {
    name: 'reply-verifier',
    machine: replyVerifierMachine,
    input: (id) => ({
      taskId: id,
      turnKey: `${id}:a1`,
      resourceKey: 'default:acme/widget:issue:1',
      marker: `<!-- ccweb taskId=${id} -->`,
      botLogin: 'ccweb-bot',
      turnStartedAt: 1_700_000_000_000,
    }),
    events: (s) => REPLY_VERIFIER_EVENT_CASES(s as never),
    serialize: (s) => serializeReplyVerifierForGraph(s as never),
    oracle: replyVerifierOracle,
    observeMachine: (s) => {
      const c = ctx<{ replyRetries: number; errorCode: string | null }>(s);
      return { replyRetries: c.replyRetries, errorCode: c.errorCode };
    },
  },
  {
    name: 'app-server',
    machine: appServerMachine,
    input: (id) => ({ serviceId: id }),
    events: (s) => APP_SERVER_EVENT_CASES(s as never),
    serialize: (s) => serializeAppServerForGraph(s as never),
    oracle: appServerOracle,
    observeMachine: (s) => {
      const c = ctx<{ downgrades: string[]; restartAt: number | null }>(s);
      return { downgrades: [...c.downgrades].sort(), restartAt: c.restartAt };
    },
  },
];
