/**
 * Task lifecycle oracle, written from the spec: §5.6 (states, allowed next states and their
 * triggers), §5.4.3 (one reply_retry turn: replyAttempt ≤ 1), §5.5 (restart recovery), §8 (one
 * execution retry; MCP failures and other non-retryable errors fail at once), plus the project's
 * documented decisions (docs/architecture.md, "Decisions" and "The task lifecycle"):
 * - `verifying_reply → succeeded_with_rest_fallback` (§5.4.4's outcome) and `aborting → aborted` on
 *   restart recovery;
 * - change delivery: a turn that replied with changes to deliver is `publishing` (the service commits,
 *   pushes and opens or reuses the pull request) before `verifying_reply`; a refused push or pull
 *   request fails the task;
 * - a user's `stop` or an operator's cancel/abort works in every non-terminal state — a task with
 *   nothing in flight (queued, waiting_user, blocked_workspace, retry_wait) is cancelled by either, one
 *   with work in flight (preparing, running, publishing, verifying_reply) goes to aborting by either;
 *   aborting takes neither (it is already stopping);
 * - a question to the user is verified on Gitea like an answer — §5.6's `running → waiting_user`
 *   (Codex's waiting signal) goes through `verifying_reply` first, with its one retry turn, and only a
 *   confirmed question (by the agent or the REST fallback) makes the task wait, without its lease; the
 *   one reply_retry (§8: per task) a question used is used for the answer that follows the user's reply
 *   too. The §5.6 table has no `verifying_reply → waiting_user`: this decision extends it.
 * - the work in flight ending without an outcome of its own: the lease ending first (§8 "lease expired: at
 *   most one retry"; an aborting task's abort counts as timed out; publishing and verifying_reply resume
 *   on their own and take no such news), or the step failing (a retried failure while preparing or
 *   running, else the task fails: publishing → failed, verifying_reply → failed_reply).
 *
 * To add a state: add it to STATES and give it a `case` in `next` (and redirect the rule that enters it).
 */
import type { AnyEventObject } from 'xstate';
import type { Oracle } from './oracle.js';

type Resume = 'preparing' | 'running' | 'verifying_reply';
export interface TaskSpecState {
  state: string;
  /** Execution retries used (§8: at most one). */
  attempt: number;
  /** reply_retry turns used (§5.4.3: at most one). */
  replyAttempt: number;
  /** Where retry_wait continues (§5.6: preparing / running / verifying_reply). */
  resumeAt: Resume;
  // The task record's fields of §4.4 (and §5.6's kept MCP failure reason, who stopped it):
  errorCode: string | null;
  nextRetryAt: number | null;
  /** The lease the task works under; none while it waits for a user, an operator or a retry. */
  leaseId: string | null;
  mcpFailureReason: string | null;
  stoppedBy: string | null;
  /** The turn being verified asked the user something (its confirmation makes the task wait). */
  asking: boolean;
}

const STATES = [
  'received', 'queued', 'preparing', 'running', 'waiting_user', 'publishing', 'verifying_reply', 'retry_wait',
  'blocked_workspace', 'aborting',
  'succeeded', 'succeeded_with_rest_fallback', 'failed', 'failed_reply', 'cancelled', 'aborted', 'ignored', 'duplicate', 'rejected',
] as const;

const MAX_EXECUTION_RETRIES = 1; // §8 "最多 1 次"
const MAX_REPLY_RETRIES = 1; // §5.4.3 "最多创建一个 reply_retry turn"

/** Every event the components of §2 send a task, with both sides of every retry rule. */
function alphabet(): AnyEventObject[] {
  return [
    { type: 'ACCEPT' },
    { type: 'IGNORE', reason: 'no_mention' },
    { type: 'DUPLICATE' },
    { type: 'REJECT', reason: 'actor_not_authorized' },
    { type: 'CLAIM', leaseId: 'lease-o1' },
    { type: 'RETRY_DUE', leaseId: 'lease-o2' },
    { type: 'WORKSPACE_READY' },
    { type: 'WORKSPACE_BLOCKED', errorCode: 'workspace_dirty' },
    { type: 'PREPARE_FAILED', errorCode: 'auth_failed', retryable: true, retryAt: 5, resumeAt: 'preparing' },
    { type: 'PREPARE_FAILED', errorCode: 'git_failed', retryable: false },
    { type: 'TURN_REPLIED' },
    { type: 'TURN_REPLIED', publish: true },
    { type: 'PUBLISHED' },
    { type: 'PUBLISH_FAILED', errorCode: 'push_rejected' },
    { type: 'TURN_WAITING_USER' },
    { type: 'TURN_FAILED', errorCode: 'app_server_timeout', retryable: true, retryAt: 5, resumeAt: 'preparing' },
    { type: 'TURN_FAILED', errorCode: 'app_server_exited', retryable: true, retryAt: 5, resumeAt: 'running' },
    { type: 'TURN_FAILED', errorCode: 'turn_verification_interrupted', retryable: true, retryAt: 5, resumeAt: 'verifying_reply' },
    { type: 'TURN_FAILED', errorCode: 'turn_timeout', retryable: false },
    { type: 'REPLY_CONFIRMED' },
    { type: 'REPLY_CONFIRMED_VIA_FALLBACK', mcpFailureReason: 'mcp_reply_missing' },
    { type: 'REPLY_MISSING', retryAt: 5 },
    { type: 'REPLY_FAILED', errorCode: 'reply_query_failed' },
    { type: 'USER_REPLIED' },
    { type: 'CANCEL', by: 'admin:oracle' },
    { type: 'ABORT', by: 'admin:oracle' },
    { type: 'ABORT_CONFIRMED' },
    { type: 'ABORT_TIMEOUT' },
    { type: 'UNBLOCK', by: 'admin:oracle' },
    { type: 'LEASE_LOST', errorCode: 'lease_expired', retryAt: 5 },
    { type: 'STEP_FAILED', errorCode: 'executor_error', retryable: true, retryAt: 5 },
    { type: 'STEP_FAILED', errorCode: 'executor_left_task', retryable: false },
    { type: 'FAIL', errorCode: 'session_unrecoverable' },
    { type: 'RECOVER_INTERRUPTED', retryAt: 5 },
  ];
}

function next(s: TaskSpecState, e: AnyEventObject): TaskSpecState | null {
  const to = (state: string, patch: Partial<TaskSpecState> = {}): TaskSpecState => ({ ...s, ...patch, state });
  const ev = e as AnyEventObject & { retryable?: boolean; resumeAt?: Resume; errorCode?: string; retryAt?: number; leaseId?: string; by?: string; mcpFailureReason?: string };
  const failed = (): TaskSpecState => to('failed', { errorCode: ev.errorCode ?? s.errorCode });
  // §8: a failed step is retried once (retry_wait, the lease given up until nextRetryAt) unless it
  // is not retryable; then `failed`. §5.5.3: a restart's interruption is `interrupted_by_restart`.
  const executionRetry = (resumeAt: Resume, errorCode = ev.errorCode ?? s.errorCode): TaskSpecState =>
    s.attempt < MAX_EXECUTION_RETRIES && ev.retryable !== false
      ? to('retry_wait', { attempt: s.attempt + 1, resumeAt, errorCode, nextRetryAt: ev.retryAt ?? null, leaseId: null })
      : to('failed', { errorCode: ev.errorCode ?? s.errorCode ?? 'retry_limit_exceeded' });
  const proceed = (state: string): TaskSpecState => to(state, { errorCode: null, nextRetryAt: null });
  // A stop: nothing in flight → cancelled at once; work in flight → aborting (stopped, then released).
  const stops = (x: AnyEventObject) => x.type === 'CANCEL' || x.type === 'ABORT';
  const stopNow = (): TaskSpecState => to('cancelled', { stoppedBy: ev.by! });
  const stopInFlight = (): TaskSpecState => to('aborting', { stoppedBy: ev.by! });
  const waitForUser = (): TaskSpecState => to('waiting_user', { asking: false, leaseId: null });
  switch (s.state) {
    case 'received': // §5.6: the webhook adapter's verdict
      if (e.type === 'ACCEPT') return to('queued');
      if (e.type === 'IGNORE') return to('ignored');
      if (e.type === 'DUPLICATE') return to('duplicate');
      if (e.type === 'REJECT') return to('rejected');
      return null;
    case 'queued': // scheduler took the lease; or a cancel request. §5.5: a queued task is just re-queued.
      if (e.type === 'CLAIM') return to('preparing', { leaseId: ev.leaseId! });
      if (stops(e)) return stopNow();
      return null;
    case 'preparing': // workspace / session manager result (§5.2.4, §8 rows)
      if (e.type === 'WORKSPACE_READY') return proceed('running');
      if (e.type === 'WORKSPACE_BLOCKED') return to('blocked_workspace', { errorCode: ev.errorCode!, leaseId: null });
      if (e.type === 'PREPARE_FAILED') return executionRetry('preparing');
      // §8 "lease expired: at most one retry"; the step's own work failing is a failed step too.
      if (e.type === 'LEASE_LOST' || e.type === 'STEP_FAILED') return executionRetry('preparing');
      if (e.type === 'RECOVER_INTERRUPTED') return executionRetry('preparing', 'interrupted_by_restart'); // §5.5.3
      if (e.type === 'FAIL') return failed(); // e.g. MCP command missing (§8: no retry)
      if (stops(e)) return stopInFlight();
      return null;
    case 'running': // Codex stop reason, error, or an operator's abort
      // Changes to deliver go through publishing first; an answer alone is verified at once.
      if (e.type === 'TURN_REPLIED') return to((e as { publish?: boolean }).publish === true ? 'publishing' : 'verifying_reply');
      // The question is verified on Gitea before the task waits (the lease kept meanwhile).
      if (e.type === 'TURN_WAITING_USER') return to('verifying_reply', { asking: true });
      if (e.type === 'TURN_FAILED') return executionRetry(ev.resumeAt ?? 'preparing');
      // A retried turn is prepared again first (the workspace, the thread started or resumed).
      if (e.type === 'LEASE_LOST' || e.type === 'STEP_FAILED') return executionRetry('preparing');
      if (stops(e)) return stopInFlight();
      if (e.type === 'RECOVER_INTERRUPTED') return executionRetry('preparing', 'interrupted_by_restart'); // §5.5.3
      if (e.type === 'FAIL') return failed();
      return null;
    case 'waiting_user': // a new comment, a cancel, or the session is unrecoverable
      if (e.type === 'USER_REPLIED') return to('queued');
      if (stops(e)) return stopNow();
      if (e.type === 'FAIL') return failed();
      return null;
    case 'publishing': // Gitea holds the change (read back), or refused it (the change is kept)
      if (e.type === 'PUBLISHED') return to('verifying_reply');
      // Its change is kept on the branch either way; a publish is not retried by the task.
      if (e.type === 'PUBLISH_FAILED' || e.type === 'STEP_FAILED') return failed();
      if (stops(e)) return stopInFlight();
      return null;
    case 'verifying_reply': // reply verifier result; one reply retry only (§5.4)
      // A confirmed question makes the task wait (lease released).
      if (e.type === 'REPLY_CONFIRMED') return s.asking ? waitForUser() : to('succeeded');
      // §5.6: succeeded_with_rest_fallback keeps the original MCP reply failure (a question waiting too).
      if (e.type === 'REPLY_CONFIRMED_VIA_FALLBACK') {
        const mcpFailureReason = ev.mcpFailureReason ?? s.mcpFailureReason;
        return s.asking ? { ...waitForUser(), mcpFailureReason } : to('succeeded_with_rest_fallback', { mcpFailureReason });
      }
      if (e.type === 'REPLY_MISSING')
        return s.replyAttempt < MAX_REPLY_RETRIES
          ? to('retry_wait', { replyAttempt: s.replyAttempt + 1, resumeAt: 'running', errorCode: 'mcp_reply_missing', mcpFailureReason: 'mcp_reply_missing', nextRetryAt: ev.retryAt ?? null })
          : null;
      // A verification that ends without a verdict leaves the reply unconfirmed.
      if (e.type === 'REPLY_FAILED' || e.type === 'STEP_FAILED') return to('failed_reply', { errorCode: ev.errorCode! });
      if (stops(e)) return stopInFlight();
      return null;
    case 'retry_wait': // nextRetryAt due: continue where it failed
      if (e.type === 'RETRY_DUE') return to(s.resumeAt, { leaseId: ev.leaseId! });
      if (e.type === 'FAIL') return failed();
      if (stops(e)) return stopNow();
      return null;
    case 'blocked_workspace': // an operator confirms the workspace, or cancels
      if (e.type === 'UNBLOCK') return proceed('queued');
      if (stops(e)) return stopNow();
      return null;
    case 'aborting': // Codex confirms the interrupt, or the timeout; after a restart nothing runs any more
      if (e.type === 'ABORT_CONFIRMED') return to('aborted');
      // §8 "abort timeout → failed": the lease ending before the interrupt was confirmed is one too.
      if (e.type === 'ABORT_TIMEOUT' || e.type === 'LEASE_LOST') return to('failed', { errorCode: 'abort_timeout' });
      if (e.type === 'RECOVER_INTERRUPTED') return to('aborted');
      return null;
    default: // terminal: no new turn, nothing
      return null;
  }
}

export const taskOracle: Oracle<TaskSpecState> = {
  name: 'task-lifecycle',
  source: 'spec §5.6 table, §5.4.3, §5.5, §8; docs/architecture.md decisions (REST fallback outcome, aborting on restart); docs/architecture.md, "The task lifecycle" (publishing, a stop in every state, a question verified before the task waits)',
  states: STATES,
  initial: () => ({ state: 'received', attempt: 0, replyAttempt: 0, resumeAt: 'preparing', errorCode: null, nextRetryAt: null, leaseId: null, mcpFailureReason: null, stoppedBy: null, asking: false }),
  alphabet,
  next,
  value: (s) => s.state,
  key: (s) => JSON.stringify(s),
  observe: (s) => ({
    attempt: s.attempt,
    replyAttempt: s.replyAttempt,
    errorCode: s.errorCode,
    nextRetryAt: s.nextRetryAt,
    leaseId: s.leaseId,
    mcpFailureReason: s.mcpFailureReason,
    stoppedBy: s.stoppedBy,
    asking: s.asking,
  }),
};
