// Which step ensureThread takes for a session, from the session actor's state alone (spec §5.3).

/** States in which a session holds a thread that may be reused (if loaded in this app-server). */
const RESTING = new Set(['idle', 'waiting_user', 'turn_in_flight']);

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
    if (s.state === 'closed') return { kind: 'closed' };
    if (RESTING.has(s.state) && s.threadId) {
      return s.loadedIn === s.generation ? { kind: 'reuse', threadId: s.threadId } : { kind: 'restart' };
    }
  }
  switch (s.state) {
    case 'resuming':
      return { kind: 'resume', threadId: s.threadId! };
    case 'resume_failed':
      return { kind: 'approve_new', reason: `resume_failed (${s.lastErrorCode ?? 'unknown'})` };
    case 'no_thread':
      return { kind: 'start', announce: true };
    case 'thread_starting':
      return { kind: 'start', announce: false };
    default:
      return { kind: 'not_ready' };
  }
}

/** A turn may start only on a resting session whose thread this app-server generation has loaded. */
export function turnSessionReady(s: { state: string; threadId: string | null; loadedIn: number | undefined; generation: number } | undefined): boolean {
  return !!s && !!s.threadId && (s.state === 'idle' || s.state === 'waiting_user') && s.loadedIn === s.generation;
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
