/**
 * Codex session oracle, written from spec §4.3 ("sessionKey 唯一，threadId 创建后不可因普通重试而替换；
 * 只有明确恢复失败并经审计后才允许新线程"), §5.3 (thread/start, turns) and the session design of
 * src/sessions/SESSIONS.md (one turn at a time per thread; after any restart a thread is resumed,
 * never silently replaced; a rejected resume needs an explicit, audited approval for a new thread;
 * waiting_user survives a restart). The spec's status `active` is split into the steps of getting
 * and using a thread.
 */
import type { AnyEventObject } from 'xstate';
import type { Oracle } from './oracle.js';

export interface SessionSpecState {
  state: string;
  threadId: string | null;
  /** Threads started so far (names the next one). */
  threads: number;
  turnId: string | null;
  /** The resting state to return to after a successful resume. */
  resumeTo: 'idle' | 'waiting_user' | null;
}

export const sessionOracle: Oracle<SessionSpecState> = {
  name: 'session',
  source: 'spec §4.3, §5.3; src/sessions/SESSIONS.md (resume policy, one turn per thread)',
  states: ['no_thread', 'thread_starting', 'idle', 'turn_in_flight', 'waiting_user', 'resuming', 'resume_failed', 'closed'],
  initial: () => ({ state: 'no_thread', threadId: null, threads: 0, turnId: null, resumeTo: null }),
  alphabet(s) {
    const current = s.turnId ?? 'turn-none';
    return [
      { type: 'START_THREAD' },
      { type: 'THREAD_STARTED', threadId: `thread-o${s.threads + 1}` },
      { type: 'THREAD_START_FAILED', errorCode: 'thread_start_failed' },
      { type: 'TURN_STARTED', turnId: 'turn-o1', taskId: 'task-o1' },
      { type: 'TURN_COMPLETED', turnId: current },
      { type: 'TURN_COMPLETED', turnId: 'turn-of-another-task' },
      { type: 'TURN_WAITING_USER', turnId: current },
      { type: 'TURN_WAITING_USER', turnId: 'turn-of-another-task' },
      { type: 'TURN_FAILED', turnId: current, errorCode: 'turn_failed' },
      { type: 'TURN_FAILED', turnId: 'turn-of-another-task', errorCode: 'turn_failed' },
      { type: 'RESTARTED' },
      { type: 'RESUME_OK' },
      { type: 'RESUME_FAILED', errorCode: 'thread_resume_failed' },
      { type: 'NEW_THREAD_APPROVED', reason: 'no rollout found', by: 'admin:oracle' },
      { type: 'CLOSE' },
    ];
  },
  next(s, e) {
    const to = (state: string, patch: Partial<SessionSpecState> = {}): SessionSpecState => ({ ...s, ...patch, state });
    const ev = e as AnyEventObject & { threadId?: string; turnId?: string };
    if (s.state === 'closed') return null; // the resource is closed: no more turns
    if (e.type === 'CLOSE') return to('closed', { turnId: null });
    switch (s.state) {
      case 'no_thread':
        return e.type === 'START_THREAD' ? to('thread_starting') : null;
      case 'thread_starting':
        if (e.type === 'THREAD_STARTED') return to('idle', { threadId: ev.threadId!, threads: s.threads + 1 });
        if (e.type === 'THREAD_START_FAILED') return to('no_thread');
        return null;
      case 'idle':
      case 'waiting_user':
        if (e.type === 'TURN_STARTED') return to('turn_in_flight', { turnId: ev.turnId! });
        if (e.type === 'RESTARTED') return to('resuming', { resumeTo: s.state });
        return null;
      case 'turn_in_flight': {
        // Only the turn in flight ends it; a late event of another turn changes nothing.
        const mine = ev.turnId === s.turnId;
        if (e.type === 'TURN_COMPLETED' && mine) return to('idle', { turnId: null });
        if (e.type === 'TURN_WAITING_USER' && mine) return to('waiting_user', { turnId: null });
        // A failed turn keeps the thread (§4.3: no new thread on an ordinary retry).
        if (e.type === 'TURN_FAILED' && mine) return to('idle', { turnId: null });
        // The turn dies with the process; the thread is resumed, the task retries its turn.
        if (e.type === 'RESTARTED') return to('resuming', { turnId: null, resumeTo: 'idle' });
        return null;
      }
      case 'resuming':
        if (e.type === 'RESUME_OK') return to(s.resumeTo ?? 'idle', { resumeTo: null });
        if (e.type === 'RESUME_FAILED') return to('resume_failed');
        return null;
      case 'resume_failed':
        // A new thread only on an explicit, audited approval; the old id is retired.
        if (e.type === 'NEW_THREAD_APPROVED') return to('thread_starting', { threadId: null, resumeTo: null });
        return null;
      default:
        return null;
    }
  },
  value: (s) => s.state,
  key: (s) => JSON.stringify({ state: s.state, resumeTo: s.resumeTo, turn: s.turnId !== null, thread: s.threadId !== null }),
  observe: (s) => ({ threadId: s.threadId, turnId: s.turnId }),
};
