/**
 * Codex App session: one actor per `sessionKey` (= resourceKey, architecture §3, §4.3).
 *
 * One resource has one Codex thread, reused across tasks. The thread id is never replaced by an
 * ordinary retry: the only way to a new thread is `resume_failed` → NEW_THREAD_APPROVED (explicit,
 * audited: reason and approver are kept) → `thread_starting` → THREAD_STARTED, and the old thread id
 * is kept in `previousThreadIds`.
 *
 * Pure: no I/O, no clock, no `after`. After a service restart the runtime sends RESTARTED to every
 * session that had a thread; the session manager then tries `thread/resume` and reports the result.
 */
import { assign, setup } from 'xstate';
import { stateIsFinal, stateTakes } from './state-nodes.js';

export const SESSION_MACHINE_ID = 'session';
export const SESSION_MACHINE_VERSION = 1;

export interface SessionInput {
  sessionKey: string;
}

export interface NewThreadApproval {
  reason: string;
  by: string;
  replacedThreadId: string | null;
}

export interface SessionContext {
  sessionKey: string;
  threadId: string | null;
  /** Threads this session used before an approved replacement, oldest first. */
  previousThreadIds: string[];
  /** The turn in flight (set in `turn_in_flight`). */
  turnId: string | null;
  taskId: string | null;
  lastTurnId: string | null;
  lastTaskId: string | null;
  /** Where RESUME_OK returns to: the state the session was at rest in before the restart. */
  resumeTo: 'idle' | 'waiting_user' | null;
  lastErrorCode: string | null;
  lastApproval: NewThreadApproval | null;
}

export type SessionEvent =
  | { type: 'START_THREAD' }
  | { type: 'THREAD_STARTED'; threadId: string }
  | { type: 'THREAD_START_FAILED'; errorCode: string }
  | { type: 'TURN_STARTED'; turnId: string; taskId: string }
  | { type: 'TURN_COMPLETED'; turnId: string }
  | { type: 'TURN_WAITING_USER'; turnId: string }
  | { type: 'TURN_FAILED'; turnId: string; errorCode: string }
  | { type: 'RESTARTED' }
  | { type: 'RESUME_OK' }
  | { type: 'RESUME_FAILED'; errorCode: string }
  | { type: 'NEW_THREAD_APPROVED'; reason: string; by: string }
  | { type: 'CLOSE' };

/** Coarse status stored in the `sessions` document (§4.3). */
export type SessionStatus = 'active' | 'waiting_user' | 'closed';

/** At rest with a thread (idle, waiting for the user): a task's turn may start on it. */
const startTurn = { target: 'turn_in_flight', actions: 'startTurn' as const };
/** At rest when the service restarts: resume the same thread, then come back to `resumeTo`. */
function resumeAfterRestart(resumeTo: 'idle' | 'waiting_user') {
  return { target: 'resuming', actions: { type: 'rememberRestingState' as const, params: { resumeTo } } };
}
/** The resource is closed: from any live state, the session ends. */
const close = { target: 'closed' };

export const sessionMachine = setup({
  types: {
    context: {} as SessionContext,
    events: {} as SessionEvent,
    input: {} as SessionInput,
  },
  guards: {
    /** A turn event names the turn in flight (stale events from an older turn are not handled). */
    isCurrentTurn: ({ context, event }) =>
      'turnId' in event && context.turnId !== null && event.turnId === context.turnId,
    /** The session was waiting for the user when the service restarted. */
    wasWaitingUser: ({ context }) => context.resumeTo === 'waiting_user',
  },
  actions: {
    recordThread: assign(({ event }) =>
      event.type === 'THREAD_STARTED' ? { threadId: event.threadId, lastErrorCode: null } : {},
    ),
    recordError: assign(({ event }) => ('errorCode' in event ? { lastErrorCode: event.errorCode } : {})),
    startTurn: assign(({ event }) =>
      event.type === 'TURN_STARTED' ? { turnId: event.turnId, taskId: event.taskId } : {},
    ),
    endTurn: assign(({ context }) => ({
      lastTurnId: context.turnId,
      lastTaskId: context.taskId,
      turnId: null,
      taskId: null,
    })),
    rememberRestingState: assign((_, params: { resumeTo: 'idle' | 'waiting_user' }) => ({
      resumeTo: params.resumeTo,
    })),
    clearResume: assign({ resumeTo: null }),
    /** Moves the current thread to `previousThreadIds`; a new one is started next. */
    approveNewThread: assign(({ context, event }) => {
      if (event.type !== 'NEW_THREAD_APPROVED') return {};
      return {
        previousThreadIds:
          context.threadId === null ? context.previousThreadIds : [...context.previousThreadIds, context.threadId],
        threadId: null,
        resumeTo: null,
        lastApproval: { reason: event.reason, by: event.by, replacedThreadId: context.threadId },
      };
    }),
  },
}).createMachine({
  id: SESSION_MACHINE_ID,
  description:
    'One Codex App thread per resource, reused across tasks. A new thread only after a failed resume ' +
    'and an explicit, audited NEW_THREAD_APPROVED; old thread ids are kept.',
  context: ({ input }) => ({
    sessionKey: input.sessionKey,
    threadId: null,
    previousThreadIds: [],
    turnId: null,
    taskId: null,
    lastTurnId: null,
    lastTaskId: null,
    resumeTo: null,
    lastErrorCode: null,
    lastApproval: null,
  }),
  initial: 'no_thread',
  states: {
    no_thread: {
      description: 'No Codex thread yet (or starting one failed). START_THREAD asks for one.',
      on: {
        START_THREAD: { target: 'thread_starting' },
        CLOSE: close,
      },
    },
    thread_starting: {
      description: 'thread/start was requested; waiting for the thread id.',
      on: {
        THREAD_STARTED: { target: 'idle', actions: 'recordThread' },
        THREAD_START_FAILED: { target: 'no_thread', actions: 'recordError' },
        CLOSE: close,
      },
    },
    idle: {
      description: 'Active: the thread exists and no turn runs. A task may start a turn.',
      on: {
        TURN_STARTED: startTurn,
        RESTARTED: resumeAfterRestart('idle'),
        CLOSE: close,
      },
    },
    turn_in_flight: {
      description: 'A turn (turnId, taskId) runs on the thread. Events of other turns are not handled.',
      on: {
        TURN_COMPLETED: { guard: 'isCurrentTurn', target: 'idle', actions: 'endTurn' },
        TURN_WAITING_USER: { guard: 'isCurrentTurn', target: 'waiting_user', actions: 'endTurn' },
        TURN_FAILED: { guard: 'isCurrentTurn', target: 'idle', actions: ['endTurn', 'recordError'] },
        // The turn in flight is lost with the process; the task machine records the interruption.
        RESTARTED: {
          target: 'resuming',
          actions: ['endTurn', { type: 'rememberRestingState', params: { resumeTo: 'idle' } }],
        },
        CLOSE: { target: 'closed', actions: 'endTurn' },
      },
    },
    waiting_user: {
      description: 'The last turn asked the user a question; the next comment starts a turn.',
      on: {
        TURN_STARTED: startTurn,
        RESTARTED: resumeAfterRestart('waiting_user'),
        CLOSE: close,
      },
    },
    resuming: {
      description: 'After a restart: thread/resume of the same threadId is in progress.',
      on: {
        RESUME_OK: [
          { guard: 'wasWaitingUser', target: 'waiting_user', actions: 'clearResume' },
          { target: 'idle', actions: 'clearResume' },
        ],
        RESUME_FAILED: { target: 'resume_failed', actions: 'recordError' },
        CLOSE: close,
      },
    },
    resume_failed: {
      description:
        'The thread could not be resumed. Nothing starts a new thread by itself: only an explicit, ' +
        'audited NEW_THREAD_APPROVED does.',
      on: {
        NEW_THREAD_APPROVED: { target: 'thread_starting', actions: 'approveNewThread' },
        CLOSE: close,
      },
    },
    closed: {
      type: 'final',
      description: 'The resource is closed; the session takes no more turns.',
    },
  },
});

export type SessionMachine = typeof sessionMachine;

interface SessionSnapshotLike {
  value: unknown;
  context: SessionContext;
}

/** Whether a session in `state` takes events of `type` (what it waits for: a turn, a resume, an approval, a thread). */
export function sessionStateTakes(state: string | null | undefined, type: SessionEvent['type']): boolean {
  return stateTakes(sessionMachine, state, type);
}

/** Whether a session in `state` is closed for good (its resource is closed; it takes no more turns). */
export function isSessionClosed(state: string | null | undefined): boolean {
  return stateIsFinal(sessionMachine, state);
}

/** The stored `status` of a session (§4.3) for a state value. */
export function sessionStatusOf(value: unknown): SessionStatus {
  if (value === 'closed') return 'closed';
  if (value === 'waiting_user') return 'waiting_user';
  return 'active';
}

/**
 * Sample events for model-based traversal: every event type, and both sides of `isCurrentTurn`
 * (the current turn id and a stale one). `wasWaitingUser` depends on the path (restart from idle or
 * from waiting_user), which the traversal explores.
 */
export function SESSION_EVENT_CASES(snapshot: SessionSnapshotLike): SessionEvent[] {
  const ctx = snapshot.context;
  const turnId = ctx.turnId ?? 'turn-none';
  const n = ctx.previousThreadIds.length;
  return [
    { type: 'START_THREAD' },
    { type: 'THREAD_STARTED', threadId: `thread-${n + 1}` },
    { type: 'THREAD_START_FAILED', errorCode: 'thread_start_failed' },
    { type: 'TURN_STARTED', turnId: 'turn-1', taskId: 'task-1' },
    { type: 'TURN_COMPLETED', turnId },
    { type: 'TURN_COMPLETED', turnId: 'turn-stale' },
    { type: 'TURN_WAITING_USER', turnId },
    { type: 'TURN_WAITING_USER', turnId: 'turn-stale' },
    { type: 'TURN_FAILED', turnId, errorCode: 'turn_failed' },
    { type: 'TURN_FAILED', turnId: 'turn-stale', errorCode: 'turn_failed' },
    { type: 'RESTARTED' },
    { type: 'RESUME_OK' },
    { type: 'RESUME_FAILED', errorCode: 'thread_resume_failed' },
    { type: 'NEW_THREAD_APPROVED', reason: 'resume failed', by: 'admin' },
    { type: 'CLOSE' },
  ];
}

/**
 * Graph serialization: the state, `resumeTo` (read by `wasWaitingUser`) and whether a turn is in
 * flight. Thread ids, task ids and the growing `previousThreadIds` are dropped.
 */
export function serializeSessionForGraph(snapshot: SessionSnapshotLike): string {
  return JSON.stringify({
    value: snapshot.value,
    resumeTo: snapshot.context.resumeTo,
    turn: snapshot.context.turnId !== null,
  });
}
