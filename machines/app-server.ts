/**
 * Codex app-server connection: one actor per service (architecture §5.3, §8 "Codex App 不可达").
 *
 * The service keeps ONE long-lived `codex app-server` process. Its life:
 * stopped → starting (spawned) → initializing (`initialize`/`initialized`, probes, `config/read`)
 * → ready. A failed probe is a CAPABILITY_DOWNGRADE (recorded once per capability, never fatal).
 * When the process dies: exited (lastExit recorded) → restarting (a backoff deadline `restartAt`
 * in context) → RESTART_DUE at or after the deadline → starting … A deliberate STOP goes through
 * closing (stdin closed, then SIGTERM) to closed; START from closed brings it back.
 *
 * Pure: no I/O, no clock, no `after`. Time arrives in events (`now`, epoch ms); the supervisor
 * (src/sessions/app-server-supervisor.ts) computes the backoff and re-arms a timer from `restartAt`.
 */
import { assign, setup } from 'xstate';
import { stateHasTag, stateTakes } from './state-nodes.js';

export const APP_SERVER_MACHINE_ID = 'appServer';
export const APP_SERVER_MACHINE_VERSION = 1;

export interface AppServerInput {
  serviceId: string;
}

export interface AppServerExit {
  code: number | null;
  signal: string | null;
  /** Why it ended: `exited` (process died), `spawn_failed`, `initialize_failed`, `service_restart`. */
  reason: string;
  at: number;
}

export interface AppServerContext {
  serviceId: string;
  pid: number | null;
  startedAt: number | null;
  readyAt: number | null;
  /** Effective model after start-up (`CCWEB_CODEX_MODEL` or `config/read`). */
  model: string | null;
  userAgent: string | null;
  /** Capabilities recorded as downgraded since the last start (each at most once). */
  downgrades: string[];
  /** Exits since the last time the server became ready: drives the backoff. */
  consecutiveFailures: number;
  /** Total restarts over the actor's life. */
  restarts: number;
  /** When the pending restart is due (epoch ms), set in `restarting`. */
  restartAt: number | null;
  lastExit: AppServerExit | null;
}

export type AppServerEvent =
  | { type: 'START'; now: number }
  | { type: 'SPAWNED'; pid: number | null; now: number }
  | { type: 'INITIALIZED'; now: number; model: string | null; userAgent: string | null }
  | { type: 'CAPABILITY_DOWNGRADE'; capability: string; reason: string }
  | { type: 'EXITED'; code: number | null; signal: string | null; reason: string; now: number }
  | { type: 'SCHEDULE_RESTART'; now: number; delayMs: number }
  | { type: 'RESTART_DUE'; now: number }
  | { type: 'STOP'; now: number };

/**
 * While the process is alive (starting, initializing, ready): its exit is recorded and a restart
 * follows; a deliberate STOP closes it in order (stdin, then SIGTERM).
 */
const whileAlive = {
  EXITED: { target: 'exited', actions: 'recordExit' as const },
  STOP: { target: 'closing' },
};
/** Once it is up (initializing, ready): a rejected capability is recorded, once. */
const downgradeOnce = { guard: 'isNewDowngrade' as const, actions: 'recordDowngrade' as const };
/** No process to stop (never started, exited, waiting to restart): STOP closes at once. */
const closeNow = { target: 'closed', actions: 'recordClosed' as const };

export const appServerMachine = setup({
  types: {
    context: {} as AppServerContext,
    events: {} as AppServerEvent,
    input: {} as AppServerInput,
  },
  guards: {
    /** A capability not yet recorded as downgraded (a repeat is not handled: recorded once). */
    isNewDowngrade: ({ context, event }) =>
      event.type === 'CAPABILITY_DOWNGRADE' && !context.downgrades.includes(event.capability),
    /** The backoff deadline has passed at the event's `now`. */
    isRestartDue: ({ context, event }) =>
      event.type === 'RESTART_DUE' && context.restartAt !== null && event.now >= context.restartAt,
  },
  actions: {
    recordStart: assign(({ event }) =>
      event.type === 'START' || event.type === 'RESTART_DUE'
        ? { startedAt: event.now, pid: null, readyAt: null, restartAt: null, downgrades: [] }
        : {},
    ),
    recordSpawn: assign(({ event }) => (event.type === 'SPAWNED' ? { pid: event.pid } : {})),
    recordReady: assign(({ event }) =>
      event.type === 'INITIALIZED'
        ? { readyAt: event.now, model: event.model, userAgent: event.userAgent, consecutiveFailures: 0 }
        : {},
    ),
    recordDowngrade: assign(({ context, event }) =>
      event.type === 'CAPABILITY_DOWNGRADE' ? { downgrades: [...context.downgrades, event.capability] } : {},
    ),
    recordExit: assign(({ context, event }) =>
      event.type === 'EXITED'
        ? {
            pid: null,
            readyAt: null,
            consecutiveFailures: context.consecutiveFailures + 1,
            lastExit: { code: event.code, signal: event.signal, reason: event.reason, at: event.now },
          }
        : {},
    ),
    recordClosed: assign(({ context, event }) =>
      event.type === 'EXITED'
        ? { pid: null, readyAt: null, lastExit: { code: event.code, signal: event.signal, reason: 'closed', at: event.now } }
        : { pid: null, readyAt: null, restartAt: null, lastExit: context.lastExit },
    ),
    scheduleRestart: assign(({ context, event }) =>
      event.type === 'SCHEDULE_RESTART'
        ? { restartAt: event.now + Math.max(0, event.delayMs), restarts: context.restarts + 1 }
        : {},
    ),
  },
}).createMachine({
  id: APP_SERVER_MACHINE_ID,
  description:
    'The one long-lived codex app-server process of the service: start-up chain, best-effort probes ' +
    '(downgrades recorded once, never fatal), restart with backoff after an exit, orderly shutdown.',
  context: ({ input }) => ({
    serviceId: input.serviceId,
    pid: null,
    startedAt: null,
    readyAt: null,
    model: null,
    userAgent: null,
    downgrades: [],
    consecutiveFailures: 0,
    restarts: 0,
    restartAt: null,
    lastExit: null,
  }),
  initial: 'stopped',
  states: {
    stopped: {
      description: 'Never started in this actor life. START spawns the process.',
      on: {
        START: { target: 'starting', actions: 'recordStart' },
        STOP: closeNow,
      },
    },
    starting: {
      tags: ['processUp'],
      description: 'The process is being spawned.',
      on: {
        SPAWNED: { target: 'initializing', actions: 'recordSpawn' },
        ...whileAlive,
      },
    },
    initializing: {
      tags: ['processUp'],
      description: 'initialize → initialized → probes (goals, collaborationMode/list) → config/read.',
      on: {
        INITIALIZED: { target: 'ready', actions: 'recordReady' },
        CAPABILITY_DOWNGRADE: downgradeOnce,
        ...whileAlive,
      },
    },
    ready: {
      tags: ['processUp', 'serving'],
      description:
        'Serving threads and turns. A capability rejected later (collaborationMode on turn/start) is ' +
        'recorded here, once.',
      on: {
        CAPABILITY_DOWNGRADE: downgradeOnce,
        ...whileAlive,
      },
    },
    exited: {
      tags: ['exitRecorded'],
      description:
        'The process died (or never came up). Every turn in it is lost (tasks go to retry_wait); a ' +
        'restart is scheduled with backoff.',
      on: {
        SCHEDULE_RESTART: { target: 'restarting', actions: 'scheduleRestart' },
        STOP: closeNow,
      },
    },
    restarting: {
      tags: ['exitRecorded'],
      description: 'Waiting for the backoff deadline restartAt; the supervisor re-arms a timer from it.',
      on: {
        RESTART_DUE: { guard: 'isRestartDue', target: 'starting', actions: 'recordStart' },
        STOP: closeNow,
      },
    },
    closing: {
      description: 'Orderly shutdown: stdin closed, then SIGTERM after a grace period.',
      on: {
        EXITED: { target: 'closed', actions: 'recordClosed' },
      },
    },
    closed: {
      description: 'Shut down on purpose. START brings it back (next service start).',
      on: {
        START: { target: 'starting', actions: 'recordStart' },
      },
    },
  },
});

export type AppServerMachine = typeof appServerMachine;

/**
 * What an app-server state means to its supervisor and to readiness, declared once as tags:
 * - `processUp`: a process was spawned and has not exited (starting, initializing, ready); one
 *   left in this state by a service that stopped without closing it is gone;
 * - `serving`: the process answers threads and turns: the service is ready for work;
 * - `exitRecorded`: the last process's exit is recorded (exited, restarting): a second report of
 *   it records nothing new.
 */
export type AppServerStateRole = 'processUp' | 'serving' | 'exitRecorded';

export function appServerStateHas(state: string | null | undefined, role: AppServerStateRole): boolean {
  return stateHasTag(appServerMachine, state, role);
}

/**
 * Whether an app-server in `state` takes events of `type`: SCHEDULE_RESTART (an exit waiting for its
 * restart to be scheduled), RESTART_DUE (a restart scheduled at `restartAt`: a timer is armed from
 * it), EXITED (a process, closing or not, whose exit is awaited).
 */
export function appServerStateTakes(state: string | null | undefined, type: AppServerEvent['type']): boolean {
  return stateTakes(appServerMachine, state, type);
}

export type AppServerState =
  | 'stopped'
  | 'starting'
  | 'initializing'
  | 'ready'
  | 'exited'
  | 'restarting'
  | 'closing'
  | 'closed';

interface AppServerSnapshotLike {
  value: unknown;
  context: AppServerContext;
}

const SAMPLE_T0 = 1_700_000_000_000;

/**
 * Sample events for model-based traversal: every event type, both sides of `isRestartDue` (at and
 * just before the deadline) and of `isNewDowngrade` (a fresh capability and an already recorded one).
 */
export function APP_SERVER_EVENT_CASES(snapshot: AppServerSnapshotLike): AppServerEvent[] {
  const ctx = snapshot.context;
  const due = ctx.restartAt ?? SAMPLE_T0;
  return [
    { type: 'START', now: SAMPLE_T0 },
    { type: 'SPAWNED', pid: 4242, now: SAMPLE_T0 },
    { type: 'INITIALIZED', now: SAMPLE_T0, model: 'fake-model', userAgent: 'codex/test' },
    { type: 'CAPABILITY_DOWNGRADE', capability: 'goals', reason: 'method not found' },
    { type: 'EXITED', code: null, signal: 'SIGKILL', reason: 'exited', now: SAMPLE_T0 },
    { type: 'SCHEDULE_RESTART', now: SAMPLE_T0, delayMs: 1_000 },
    { type: 'RESTART_DUE', now: due },
    { type: 'RESTART_DUE', now: due - 1 },
    { type: 'STOP', now: SAMPLE_T0 },
  ];
}

/**
 * Graph serialization: the state and what the guards read — whether `goals` is already downgraded
 * (the only capability the sample events use) and whether a restart deadline is set. Pids, times
 * and counters are dropped (unbounded).
 */
export function serializeAppServerForGraph(snapshot: AppServerSnapshotLike): string {
  return JSON.stringify({
    value: snapshot.value,
    goalsDowngraded: snapshot.context.downgrades.includes('goals'),
    restartAt: snapshot.context.restartAt !== null,
  });
}
