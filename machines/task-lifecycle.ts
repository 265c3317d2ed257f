import { assign, fromPromise, setup } from 'xstate';
import { stateHasTag, stateTakes } from './state-nodes.js';

/**
 * The task lifecycle: one actor per triggering comment (spec §5.6).
 *
 * The states and the (from, to) pairs are exactly the table of spec §5.6, with additions the table
 * lacks: `verifying_reply → succeeded_with_rest_fallback`, the outcome of the REST fallback of
 * §5.4.4 (the reply verifier confirmed a comment the service posted itself), change delivery:
 * `running → publishing → verifying_reply | failed`, a stop in every non-terminal state:
 * `retry_wait → cancelled`, `preparing | publishing | verifying_reply → aborting`
 * (CANCEL and ABORT alike: work in flight is stopped; work not started is cancelled), and a question
 * verified like an answer: `running → verifying_reply → waiting_user` — a turn that asks the
 * user something is `asking`, and only once its question is confirmed on Gitea does the task wait
 * (the table's direct `running → waiting_user` is gone: nobody may wait on a question nobody sees). No other pair exists;
 * `test/unit/task-lifecycle-table.test.ts` checks that against the table written out by hand.
 *
 * Each state whose work is in flight (the `holdsLease` states) invokes that work as an effect actor
 * (TASK_EFFECTS): entering the state starts it, leaving it stops it (its abort signal), and restoring
 * a snapshot in that state starts it again, so every effect is idempotent by key and adopts what it
 * finds. The implementations are injected with `machine.provide()` (src/executor/task-effects.ts);
 * the ones here only wait to be stopped. An effect reports its outcome as one of the events below,
 * through the runtime like any other sender, so the outcome is durable, fenced by the lease and
 * audited; nothing here performs I/O or reads the clock. Deadlines (`nextRetryAt`) live in context and
 * the runtime re-arms them as `RETRY_DUE` events, because xstate does not persist `after` timers.
 */

export const TASK_MACHINE_ID = 'task';
export const TASK_MACHINE_VERSION = 1;

/** §8: at most one execution retry (auth failure, interruption, app-server failure) … */
export const MAX_EXECUTION_RETRIES = 1;
/**
 * … and at most one reply-retry turn per verified turn (§5.4.3, §8 "仅 1 次"). The one owner of that
 * rule: the reply verifier counts its retry turns against this same constant
 * (machines/reply-verifier.ts), and test/unit/machines-reply-retry-limit.test.ts walks both machines to check
 * they allow the same number.
 */
export const MAX_REPLY_RETRIES = 1;

export const TASK_STATES = [
  'received',
  'queued',
  'preparing',
  'running',
  'waiting_user',
  'publishing',
  'verifying_reply',
  'retry_wait',
  'blocked_workspace',
  'aborting',
  'succeeded',
  'succeeded_with_rest_fallback',
  'failed',
  'failed_reply',
  'cancelled',
  'aborted',
  'ignored',
  'duplicate',
  'rejected',
] as const;
export type TaskState = (typeof TASK_STATES)[number];

/**
 * Each state by its name, for display and query code that names one state (a count, a label, a
 * report): a renamed state fails to compile there. What a state does is read from its tags instead.
 */
export const TASK_STATE = Object.fromEntries(TASK_STATES.map((s) => [s, s])) as { readonly [S in TaskState]: S };

export const TERMINAL_TASK_STATES: readonly TaskState[] = [
  'succeeded',
  'succeeded_with_rest_fallback',
  'failed',
  'failed_reply',
  'cancelled',
  'aborted',
  'ignored',
  'duplicate',
  'rejected',
];

/** The work each lease-holding state invokes, by its state (src/executor/task-effects.ts implements them). */
export const TASK_EFFECTS = {
  preparing: 'prepareWorkspace',
  running: 'runTurn',
  publishing: 'publishChanges',
  verifying_reply: 'verifyReply',
  aborting: 'stopWork',
} as const satisfies Partial<Record<TaskState, string>>;
export type TaskEffect = (typeof TASK_EFFECTS)[keyof typeof TASK_EFFECTS];

/** What an effect is started with: its task, and the state that invoked it (a copy that moved on does not act). */
export interface TaskEffectInput {
  taskId: string;
  state: TaskState;
}

/**
 * An effect without an implementation: it never settles, so the state stays as it is until an event
 * moves it (which stops the effect), as with any effect whose outcome is an event.
 */
const unprovided = fromPromise<void, TaskEffectInput>(() => new Promise<void>(() => undefined));

/** The invoke of the effect of `state`: no onDone or onError, its outcome comes back as an event. */
function invokes<S extends keyof typeof TASK_EFFECTS>(state: S) {
  return { id: TASK_EFFECTS[state], src: TASK_EFFECTS[state], input: ({ context }: { context: TaskContext }): TaskEffectInput => ({ taskId: context.taskId, state }) };
}

/** Where a task continues when its `retry_wait` deadline passes. */
export type RetryTarget = 'preparing' | 'running' | 'verifying_reply';

export interface TaskContext {
  taskId: string;
  attempt: number;
  replyAttempt: number;
  retryTarget: RetryTarget;
  nextRetryAt: number | null;
  errorCode: string | null;
  /** The MCP reply failure that led to a REST fallback; kept on success (§5.6). */
  mcpFailureReason: string | null;
  leaseId: string | null;
  stoppedBy: string | null;
  /**
   * The turn being verified asked the user something: once it is confirmed on Gitea the task
   * waits for the user instead of succeeding. Set by TURN_WAITING_USER, kept through the question's
   * retry turn (retry_wait → running → verifying_reply), cleared when the task waits. Absent (not
   * asking) in the initial context, so a stored snapshot without the field reads as not asking and
   * the queued snapshot the compact intake format encodes (src/upgrade/intake-accept-v1.ts) is
   * unchanged: no new machine version or migration is needed for it.
   */
  asking?: boolean;
}

export interface TaskInput {
  taskId: string;
}

type Failure = { errorCode: string; retryable?: boolean; retryAt?: number; resumeAt?: RetryTarget };

export type TaskEvent =
  // Webhook adapter (received → …)
  | { type: 'ACCEPT' }
  | { type: 'IGNORE'; reason: string }
  | { type: 'DUPLICATE' }
  | { type: 'REJECT'; reason: string }
  // Scheduler
  | { type: 'CLAIM'; leaseId: string }
  | { type: 'RETRY_DUE'; leaseId: string }
  // Workspace / session manager
  | { type: 'WORKSPACE_READY' }
  | { type: 'WORKSPACE_BLOCKED'; errorCode: string }
  | ({ type: 'PREPARE_FAILED' } & Failure)
  // Codex turn outcomes
  /**
   * `publish: true` (the executor, with change delivery on, after a normal turn): publish the turn's
   * changes first. Without it (a reply-retry turn, an answer only re-verified): straight to verification.
   */
  | { type: 'TURN_REPLIED'; publish?: boolean }
  | { type: 'TURN_WAITING_USER' }
  | ({ type: 'TURN_FAILED' } & Failure)
  // Publisher (change delivery): the turn's changes are on Gitea (or there were none), or they cannot be
  | { type: 'PUBLISHED' }
  | { type: 'PUBLISH_FAILED'; errorCode: string }
  // Reply verifier
  | { type: 'REPLY_CONFIRMED' }
  | { type: 'REPLY_CONFIRMED_VIA_FALLBACK'; mcpFailureReason: string }
  | { type: 'REPLY_MISSING'; retryAt: number }
  | { type: 'REPLY_FAILED'; errorCode: string }
  // Users and operators
  | { type: 'USER_REPLIED' }
  | { type: 'CANCEL'; by: string }
  | { type: 'ABORT'; by: string }
  | { type: 'ABORT_CONFIRMED' }
  | { type: 'ABORT_TIMEOUT' }
  | { type: 'UNBLOCK'; by: string }
  // The scheduler and the worker driving the task: what ended the work in flight
  /**
   * The repository lease the work ran under ended first (expired, a heartbeat refused; §8 "lease
   * expired: at most one retry"). A step that resumes on its own (publishing, verifying_reply) keeps
   * its state: a restart's resume or the reply verifier's own deadlines end it.
   */
  | { type: 'LEASE_LOST'; errorCode: string; retryAt: number }
  /**
   * The work driving the state failed without an outcome of its own (it threw, or its worker ended and
   * left the task here). `retryable: false`: nothing will drive it again, it ends now.
   */
  | ({ type: 'STEP_FAILED'; retryable: boolean } & Omit<Failure, 'resumeAt' | 'retryable'>)
  // Anything unrecoverable, and restart recovery (§5.5)
  | { type: 'FAIL'; errorCode: string }
  | { type: 'RECOVER_INTERRUPTED'; retryAt: number };

/**
 * §8: a failed step (preparing, running, or a restart interrupting them) goes to `retry_wait` while
 * its one execution retry is left and the failure allows one; otherwise the task fails.
 */
function retryOnceOrFail(record: 'recordRetry' | 'recordRestartInterruption') {
  return [
    { guard: 'canRetryExecution' as const, target: 'retry_wait', actions: record },
    { target: 'failed', actions: 'recordRetryExhausted' as const },
  ];
}
/** A step that cannot succeed (FAIL, a publish that failed) fails the task with the event's error code. */
const failWithError = { target: 'failed', actions: 'recordError' as const };
/**
 * A user or operator stops a task that holds no lease and runs nothing (queued, waiting for the user,
 * blocked, waiting for a retry): cancel and abort both end it at once, since a stop
 * works in every non-terminal state.
 */
const cancel = { target: 'cancelled', actions: 'recordStop' as const };
/**
 * A user or operator stops a task whose work is in flight (preparing, running, publishing,
 * verifying): cancel and abort both go through `aborting`, where the work is stopped and nothing is
 * published any more; the lease is released only once it has stopped.
 */
const abort = { target: 'aborting', actions: 'recordStop' as const };
/** An abort that was not confirmed in time fails the task (§8 "abort timeout → failed, release"). */
const abortTimedOut = { target: 'failed', actions: 'recordAbortTimeout' as const };

export const taskMachine = setup({
  types: {
    context: {} as TaskContext,
    events: {} as TaskEvent,
    input: {} as TaskInput,
  },
  actors: {
    prepareWorkspace: unprovided,
    runTurn: unprovided,
    publishChanges: unprovided,
    verifyReply: unprovided,
    stopWork: unprovided,
  },
  guards: {
    canRetryExecution: ({ context, event }) =>
      context.attempt < MAX_EXECUTION_RETRIES && (event as { retryable?: boolean }).retryable !== false,
    canRetryReply: ({ context }) => context.replyAttempt < MAX_REPLY_RETRIES,
    isAsking: ({ context }) => context.asking === true,
    publishesFirst: ({ event }) => (event as { publish?: boolean }).publish === true,
    resumesAtPreparing: ({ context }) => context.retryTarget === 'preparing',
    resumesAtRunning: ({ context }) => context.retryTarget === 'running',
    resumesAtVerifying: ({ context }) => context.retryTarget === 'verifying_reply',
  },
  actions: {
    recordRetry: assign(({ context, event }) => {
      const e = event as Partial<Failure> & { type: string };
      return {
        attempt: context.attempt + 1,
        errorCode: e.errorCode ?? context.errorCode,
        nextRetryAt: e.retryAt ?? null,
        retryTarget: e.resumeAt ?? ('preparing' as const),
        leaseId: null,
      };
    }),
    recordRestartInterruption: assign(({ context, event }) => ({
      attempt: context.attempt + 1,
      errorCode: 'interrupted_by_restart',
      nextRetryAt: (event as { retryAt?: number }).retryAt ?? null,
      retryTarget: 'preparing' as const,
      leaseId: null,
    })),
    recordReplyRetry: assign(({ context, event }) => ({
      replyAttempt: context.replyAttempt + 1,
      errorCode: 'mcp_reply_missing',
      mcpFailureReason: 'mcp_reply_missing',
      nextRetryAt: (event as { retryAt?: number }).retryAt ?? null,
      retryTarget: 'running' as const,
    })),
    recordError: assign({
      errorCode: ({ context, event }) => (event as { errorCode?: string }).errorCode ?? context.errorCode,
    }),
    recordRetryExhausted: assign({
      errorCode: ({ context, event }) =>
        (event as { errorCode?: string }).errorCode ?? context.errorCode ?? 'retry_limit_exceeded',
    }),
    recordAbortTimeout: assign({ errorCode: 'abort_timeout' }),
    recordLease: assign({ leaseId: ({ event }) => (event as { leaseId?: string }).leaseId ?? null }),
    releaseLeaseRef: assign({ leaseId: null }),
    recordAsking: assign({ asking: true }),
    /**
     * The question is on Gitea: the task waits, without its lease. Its reply-retry count is the task's
     * (§8: one reply-retry turn per task), so a question that used it leaves none for the answer after
     * the user's reply: that one goes straight to the REST fallback if it goes missing. (Starting the count
     * again here would make every question a cycle back to an unused retry: the model tests' cycle-free
     * paths of this machine grow from ~28 000 to ~760 000.)
     */
    waitForUser: assign({ asking: false, leaseId: null }),
    recordStop: assign({ stoppedBy: ({ event }) => (event as { by?: string }).by ?? null }),
    recordFallback: assign({
      mcpFailureReason: ({ context, event }) =>
        (event as { mcpFailureReason?: string }).mcpFailureReason ?? context.mcpFailureReason,
    }),
    clearError: assign({ errorCode: null, nextRetryAt: null }),
  },
}).createMachine({
  id: TASK_MACHINE_ID,
  description:
    'One task per triggering comment. Adds verifying_reply → succeeded_with_rest_fallback (after one reply-retry turn the service posted the answer itself through REST), change delivery: running → publishing → verifying_reply | failed, and a question verified like an answer: running → verifying_reply → waiting_user (asking).',
  initial: 'received',
  context: ({ input }) => ({
    taskId: input.taskId,
    attempt: 0,
    replyAttempt: 0,
    retryTarget: 'preparing',
    nextRetryAt: null,
    errorCode: null,
    mcpFailureReason: null,
    leaseId: null,
    stoppedBy: null,
  }),
  states: {
    received: {
      description: 'Verified and normalised by the webhook adapter, not yet filtered.',
      on: {
        ACCEPT: 'queued',
        IGNORE: 'ignored',
        DUPLICATE: 'duplicate',
        REJECT: 'rejected',
      },
    },
    queued: {
      tags: ['claimable', 'cancelledByStop'],
      description: 'Waiting for the scheduler to take the repository lease.',
      on: {
        CLAIM: { target: 'preparing', actions: 'recordLease' },
        CANCEL: cancel,
        ABORT: cancel,
      },
    },
    preparing: {
      invoke: invokes('preparing'),
      tags: ['holdsLease', 'abortedByStop'],
      description: 'Lease held: workspace clone/fetch, receipt, Codex thread start or resume.',
      on: {
        WORKSPACE_READY: { target: 'running', actions: 'clearError' },
        WORKSPACE_BLOCKED: { target: 'blocked_workspace', actions: ['recordError', 'releaseLeaseRef'] },
        PREPARE_FAILED: retryOnceOrFail('recordRetry'),
        STEP_FAILED: retryOnceOrFail('recordRetry'),
        LEASE_LOST: retryOnceOrFail('recordRetry'),
        RECOVER_INTERRUPTED: retryOnceOrFail('recordRestartInterruption'),
        FAIL: failWithError,
        CANCEL: abort,
        ABORT: abort,
      },
    },
    running: {
      invoke: invokes('running'),
      tags: ['holdsLease', 'abortedByStop', 'showsProgress'],
      description: 'A Codex turn is in flight on the resource thread.',
      on: {
        TURN_REPLIED: [{ guard: 'publishesFirst', target: 'publishing' }, { target: 'verifying_reply' }],
        // Beyond §5.6: a question is verified on Gitea before the task waits on it.
        TURN_WAITING_USER: { target: 'verifying_reply', actions: 'recordAsking' },
        TURN_FAILED: retryOnceOrFail('recordRetry'),
        STEP_FAILED: retryOnceOrFail('recordRetry'),
        LEASE_LOST: retryOnceOrFail('recordRetry'),
        CANCEL: abort,
        ABORT: abort,
        RECOVER_INTERRUPTED: retryOnceOrFail('recordRestartInterruption'),
        FAIL: failWithError,
      },
    },
    waiting_user: {
      tags: ['cancelledByStop'],
      description: 'The agent asked the commenter something; the thread is kept, the lease released.',
      on: {
        USER_REPLIED: 'queued',
        CANCEL: cancel,
        ABORT: cancel,
        FAIL: failWithError,
      },
    },
    publishing: {
      invoke: invokes('publishing'),
      tags: ['holdsLease', 'abortedByStop', 'resumable'],
      description:
        'Change delivery: commit what the turn left, push the resource branch, open or reuse its pull request, read Gitea back. Idempotent (check-then-act on Gitea), so a restart resumes it under a new lease.',
      on: {
        PUBLISHED: 'verifying_reply',
        PUBLISH_FAILED: failWithError,
        STEP_FAILED: failWithError,
        CANCEL: abort,
        ABORT: abort,
      },
    },
    verifying_reply: {
      invoke: invokes('verifying_reply'),
      tags: ['holdsLease', 'abortedByStop', 'resumable', 'goesOnUnderHold'],
      description:
        'The agent posted its answer (or, asking, its question to the user) through gitea-mcp; reading Gitea back to prove it landed. A confirmed question makes the task wait for the user.',
      on: {
        REPLY_CONFIRMED: [{ guard: 'isAsking', target: 'waiting_user', actions: 'waitForUser' }, { target: 'succeeded' }],
        REPLY_CONFIRMED_VIA_FALLBACK: [
          { guard: 'isAsking', target: 'waiting_user', actions: ['recordFallback', 'waitForUser'] },
          { target: 'succeeded_with_rest_fallback', actions: 'recordFallback' },
        ],
        REPLY_MISSING: { guard: 'canRetryReply', target: 'retry_wait', actions: 'recordReplyRetry' },
        REPLY_FAILED: { target: 'failed_reply', actions: 'recordError' },
        STEP_FAILED: { target: 'failed_reply', actions: 'recordError' },
        CANCEL: abort,
        ABORT: abort,
      },
    },
    retry_wait: {
      tags: ['claimable', 'cancelledByStop'],
      description: 'Waiting for nextRetryAt; resumes where the failure happened (retryTarget).',
      on: {
        RETRY_DUE: [
          { guard: 'resumesAtPreparing', target: 'preparing', actions: 'recordLease' },
          { guard: 'resumesAtRunning', target: 'running', actions: 'recordLease' },
          { guard: 'resumesAtVerifying', target: 'verifying_reply', actions: 'recordLease' },
        ],
        FAIL: failWithError,
        CANCEL: cancel,
        ABORT: cancel,
      },
    },
    blocked_workspace: {
      tags: ['cancelledByStop', 'pausedForOperator'],
      description: 'Dirty or locked workspace: nothing is reset; an operator clears it or cancels.',
      on: {
        UNBLOCK: { target: 'queued', actions: 'clearError' },
        CANCEL: cancel,
        ABORT: cancel,
      },
    },
    aborting: {
      invoke: invokes('aborting'),
      tags: ['holdsLease', 'stopping'],
      description:
        'Stopping the work in flight (turn/interrupt, the workspace step, the publisher, the verifier); the lease is not released before it has stopped: confirmed, or after a timeout once the turn\'s processes are gone.',
      on: {
        ABORT_CONFIRMED: 'aborted',
        ABORT_TIMEOUT: abortTimedOut,
        // The abort was not confirmed while the lease lived: §8 "abort timeout → failed, release".
        LEASE_LOST: abortTimedOut,
        // Restart recovery (§5.5): no live turn can be interrupted any more, so the abort is complete.
        // §5.6 allows no aborting → retry_wait, so an interrupted abort never runs again.
        RECOVER_INTERRUPTED: 'aborted',
      },
    },
    succeeded: { type: 'final' },
    succeeded_with_rest_fallback: { type: 'final' },
    failed: { type: 'final', tags: ['failureReceipt', 'stoppedByLimit'] },
    failed_reply: { type: 'final', tags: ['failureReceipt'] },
    cancelled: { type: 'final', tags: ['failureReceipt'] },
    aborted: { type: 'final', tags: ['failureReceipt'] },
    ignored: { type: 'final' },
    duplicate: { type: 'final' },
    rejected: { type: 'final', tags: ['refused'] },
  },
});

/**
 * What a state means to the parts around the machine, declared once, as tags on the states, and read
 * from here everywhere (the executor, the scheduler, the queries, a stop):
 * - `holdsLease`: the task holds its repository's lease and its state's effect (TASK_EFFECTS) does its work;
 * - `claimable`: the scheduler takes the lease for it (CLAIM from `queued`, RETRY_DUE from `retry_wait`);
 * - `resumable`: after a restart it is resumed under a new lease with no event (its steps are idempotent);
 * - `cancelledByStop` / `abortedByStop`: what a stop does to it (nothing in flight → cancelled; work in
 *   flight → aborting). A non-terminal state with neither (`received`, `aborting`) takes no stop;
 * - `stopping`: its work in flight is being stopped: nothing new starts for it (no step, no reply
 *   fallback) and a stop asks only for the stopping to go on;
 * - `goesOnUnderHold`: its work needs Gitea, not the model, so it goes on under a provider hold
 *   (new claims, retries and publishing wait);
 * - `showsProgress`: a turn is in flight and its receipt shows the turn's progress;
 * - `pausedForOperator`: it waits for an operator; its receipt says it is paused, and says it resumed
 *   once an operator let it go on;
 * - `failureReceipt`: it ended without an answer and the user gets one failure receipt saying why;
 * - `stoppedByLimit`: where a task stopped by one of its own limits ends; such a task is told by an
 *   edit of its receipt (a notice) rather than a failure receipt;
 * - `refused`: the intake refused it; its receipt (`refused`) says why, and it never runs.
 */
export type TaskStateRole =
  | 'holdsLease'
  | 'claimable'
  | 'resumable'
  | 'cancelledByStop'
  | 'abortedByStop'
  | 'stopping'
  | 'goesOnUnderHold'
  | 'showsProgress'
  | 'pausedForOperator'
  | 'failureReceipt'
  | 'stoppedByLimit'
  | 'refused';

export function taskStatesWith(role: TaskStateRole): TaskState[] {
  return TASK_STATES.filter((s) => stateHasTag(taskMachine, s, role));
}

/** Whether the task state `state` (as stored; an unknown or missing one has no role) has `role`. */
export function taskStateHas(state: string | null | undefined, role: TaskStateRole): boolean {
  return stateHasTag(taskMachine, state, role);
}

/** Whether the task state `state` takes events of `type` (e.g. the scheduler's CLAIM or RETRY_DUE). */
export function taskStateTakes(state: string | null | undefined, type: TaskEvent['type']): boolean {
  return stateTakes(taskMachine, state, type);
}

export function isTerminalTaskState(state: string): boolean {
  return (TERMINAL_TASK_STATES as readonly string[]).includes(state);
}

/** Sample events for model-based traversal, covering both sides of every guard. */
export function taskEventCases(): TaskEvent[] {
  return [
    { type: 'ACCEPT' },
    { type: 'IGNORE', reason: 'no_mention' },
    { type: 'DUPLICATE' },
    { type: 'REJECT', reason: 'actor_not_authorized' },
    { type: 'CLAIM', leaseId: 'lease-1' },
    { type: 'RETRY_DUE', leaseId: 'lease-2' },
    { type: 'WORKSPACE_READY' },
    { type: 'WORKSPACE_BLOCKED', errorCode: 'workspace_dirty' },
    { type: 'PREPARE_FAILED', errorCode: 'auth_failed', retryable: true, retryAt: 1 },
    { type: 'PREPARE_FAILED', errorCode: 'mcp_command_missing', retryable: false },
    { type: 'TURN_REPLIED' },
    { type: 'TURN_REPLIED', publish: true },
    { type: 'PUBLISHED' },
    { type: 'PUBLISH_FAILED', errorCode: 'push_rejected' },
    { type: 'TURN_WAITING_USER' },
    { type: 'TURN_FAILED', errorCode: 'app_server_exited', retryable: true, retryAt: 1, resumeAt: 'preparing' },
    { type: 'TURN_FAILED', errorCode: 'app_server_exited', retryable: true, retryAt: 1, resumeAt: 'running' },
    { type: 'TURN_FAILED', errorCode: 'turn_verification_interrupted', retryable: true, retryAt: 1, resumeAt: 'verifying_reply' },
    { type: 'TURN_FAILED', errorCode: 'turn_timeout', retryable: false },
    { type: 'REPLY_CONFIRMED' },
    { type: 'REPLY_CONFIRMED_VIA_FALLBACK', mcpFailureReason: 'mcp_reply_missing' },
    { type: 'REPLY_MISSING', retryAt: 1 },
    { type: 'REPLY_FAILED', errorCode: 'reply_query_failed' },
    { type: 'USER_REPLIED' },
    { type: 'CANCEL', by: 'admin:alice' },
    { type: 'ABORT', by: 'admin:alice' },
    { type: 'ABORT_CONFIRMED' },
    { type: 'ABORT_TIMEOUT' },
    { type: 'UNBLOCK', by: 'admin:alice' },
    { type: 'LEASE_LOST', errorCode: 'lease_expired', retryAt: 1 },
    { type: 'STEP_FAILED', errorCode: 'executor_error', retryable: true, retryAt: 1 },
    { type: 'STEP_FAILED', errorCode: 'executor_left_task', retryable: false },
    { type: 'FAIL', errorCode: 'session_unrecoverable' },
    { type: 'RECOVER_INTERRUPTED', retryAt: 1 },
  ];
}

/** Exactly the context the guards read (bounded): the retry counters, the resume target, whether asking. */
export function serializeTaskForGraph(snapshot: { value: unknown; context: TaskContext }): string {
  const { attempt, replyAttempt, retryTarget, asking } = snapshot.context;
  return JSON.stringify([snapshot.value, attempt, replyAttempt, retryTarget, asking === true]);
}
