// Which step ensureThread takes for a session, from the session actor's state alone (spec §5.3):
// what the state waits for, as the session machine declares it.
import { isSessionClosed, sessionStateTakes } from '../../machines/session.js';

/**
 * A session that holds a live thread (a service restart must resume it: the state takes RESTARTED),
 * which may be reused if loaded in this app-server.
 */
const holdsThread = (state: string) => sessionStateTakes(state, 'RESTARTED');

export interface ThreadPlanInput {
  state: string;
  threadId: string | null;
  lastErrorCode: string | null;
  /** The app-server generation that has `threadId` loaded, if any. */
  loadedIn: number | undefined;
  /** The current app-server generation. */
  generation: number;
  /** True once RESTARTED was sent in this call: the resting check is not made twice. */
  restarted: boolean;
}

export type ThreadPlan =
  | { kind: 'reuse'; threadId: string }
  /** Loaded by an app-server process that is gone (or a previous service run): send RESTARTED, plan again. */
  | { kind: 'restart' }
  | { kind: 'resume'; threadId: string }
  | { kind: 'approve_new'; reason: string }
  /** `announce`: START_THREAD must be sent first (from `no_thread`). */
  | { kind: 'start'; announce: boolean }
  | { kind: 'closed' }
  | { kind: 'not_ready' };

export function planThread(s: ThreadPlanInput): ThreadPlan {
  if (!s.restarted) {
    if (isSessionClosed(s.state)) return { kind: 'closed' };
    if (holdsThread(s.state) && s.threadId) {
      return s.loadedIn === s.generation ? { kind: 'reuse', threadId: s.threadId } : { kind: 'restart' };
    }
  }
  // A resume in progress, a failed one waiting for an approval, no thread yet, a thread being started.
  if (sessionStateTakes(s.state, 'RESUME_OK')) return { kind: 'resume', threadId: s.threadId! };
  if (sessionStateTakes(s.state, 'NEW_THREAD_APPROVED')) return { kind: 'approve_new', reason: `${s.state} (${s.lastErrorCode ?? 'unknown'})` };
  if (sessionStateTakes(s.state, 'START_THREAD')) return { kind: 'start', announce: true };
  if (sessionStateTakes(s.state, 'THREAD_STARTED')) return { kind: 'start', announce: false };
  return { kind: 'not_ready' };
}

/** A turn may start only on a resting session (it takes TURN_STARTED) whose thread this app-server generation has loaded. */
export function turnSessionReady(s: { state: string; threadId: string | null; loadedIn: number | undefined; generation: number } | undefined): boolean {
  return !!s && !!s.threadId && sessionStateTakes(s.state, 'TURN_STARTED') && s.loadedIn === s.generation;
}

/**
 * A resume that Codex refused outright (the thread is gone) is definitive: RESUME_FAILED and a new
 * thread. Transport and MCP failures say nothing about the thread: stay in `resuming`, retry later.
 */
export function isDefinitiveResumeFailure(errorCode: string): boolean {
  return errorCode === 'thread_resume_failed';
}

/** A new thread after a definitive resume failure is approved automatically unless turned off. */
export function newThreadApprovedAutomatically(options: { autoApproveNewThread?: boolean }): boolean {
  return options.autoApproveNewThread !== false;
}
