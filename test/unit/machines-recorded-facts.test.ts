// What the machines record for the service and its operators, beyond the state they reach: the facts
// src/ reads back (the fallback comment, why a query or a resume failed, how the app-server last
// ended) and which task states are terminal. The (state, event) → state relation itself is checked
// against the spec's oracles (test/model/); these are the context facts the oracles do not observe.
import { createActor, fromPromise, initialTransition, toPromise, transition, waitFor } from 'xstate';
import { describe, expect, it } from 'vitest';
import { appServerMachine, type AppServerEvent } from '../../machines/app-server.js';
import {
  replyVerifierMachine,
  type PostFallbackInput,
  type PostFallbackOutput,
  type QueryReplyInput,
  type QueryReplyOutput,
  type ReplyVerifierInput,
} from '../../machines/reply-verifier.js';
import { sessionMachine, type SessionEvent } from '../../machines/session.js';
import { isTerminalTaskState, TASK_STATES, taskMachine, TERMINAL_TASK_STATES } from '../../machines/task-lifecycle.js';

describe('task: terminal states', () => {
  // §5.6: the outcomes a task never leaves (the end states of the table, plus the REST fallback outcome).
  const SPEC_TERMINAL = ['succeeded', 'succeeded_with_rest_fallback', 'failed', 'failed_reply', 'cancelled', 'aborted', 'ignored', 'duplicate', 'rejected'];

  it('are exactly the outcomes of §5.6, and exactly the final states of the machine', () => {
    expect([...TERMINAL_TASK_STATES].sort()).toEqual([...SPEC_TERMINAL].sort());
    const finals = Object.entries(taskMachine.root.states).filter(([, n]) => n.type === 'final').map(([k]) => k);
    expect(finals.sort()).toEqual([...SPEC_TERMINAL].sort());
  });

  it('isTerminalTaskState answers for every state', () => {
    for (const state of TASK_STATES) expect(isTerminalTaskState(state), state).toBe(SPEC_TERMINAL.includes(state));
    expect(isTerminalTaskState('no_such_state')).toBe(false);
  });
});

describe('reply verifier: what src/verification reads back', () => {
  const INPUT: ReplyVerifierInput = {
    taskId: 'task-1',
    turnKey: 'task-1:1',
    resourceKey: 'default:acme/widget:issue:7',
    marker: '<!-- ccweb taskId=task-1 turnKey=task-1:1 -->',
    botLogin: 'ccweb-bot',
    turnStartedAt: 1_700_000_000_000,
  };
  function verifier(queries: Array<QueryReplyOutput | unknown>, post: PostFallbackOutput | unknown = { posted: true, commentId: 900 }) {
    const asked: QueryReplyInput[] = [];
    const machine = replyVerifierMachine.provide({
      actors: {
        queryReply: fromPromise<QueryReplyOutput, QueryReplyInput>(async ({ input }) => {
          asked.push(input);
          const answer = queries.shift();
          if (answer && typeof answer === 'object' && 'found' in answer) return answer as QueryReplyOutput;
          throw answer;
        }),
        postFallback: fromPromise<PostFallbackOutput, PostFallbackInput>(async () => {
          if (post && typeof post === 'object' && 'posted' in post) return post as PostFallbackOutput;
          throw post;
        }),
      },
    });
    const actor = createActor(machine, { input: INPUT });
    actor.subscribe({ error: () => undefined });
    return { actor, asked };
  }
  async function toFallback(v: ReturnType<typeof verifier>) {
    v.actor.start();
    await waitFor(v.actor, (s) => s.matches('awaiting_retry_turn'));
    v.actor.send({ type: 'RETRY_TURN_DONE' });
    await toPromise(v.actor);
    return v.actor.getSnapshot().context;
  }

  it('the confirming query after the fallback asks the same question as the first (marker, bot, since)', async () => {
    const v = verifier([{ found: false }, { found: false }, { found: true, commentId: 900 }]);
    await toFallback(v);
    expect(v.asked).toHaveLength(3);
    expect(v.asked[2]).toEqual(v.asked[0]);
    expect(v.asked[0]).toMatchObject({ marker: INPUT.marker, botLogin: INPUT.botLogin, since: INPUT.turnStartedAt });
  });

  it('the posted fallback comment is remembered, also when it never shows up (its receipt points at it)', async () => {
    const ok = await toFallback(verifier([{ found: false }, { found: false }, { found: true, commentId: 900 }], { posted: true, commentId: 900 }));
    expect(ok.fallbackCommentId).toBe(900);
    const unconfirmed = await toFallback(verifier([{ found: false }, { found: false }, { found: false }], { posted: true, commentId: 901 }));
    expect(unconfirmed).toMatchObject({ fallbackCommentId: 901, errorCode: 'rest_fallback_unconfirmed' });
    // No actor error behind it: no message to show.
    expect(unconfirmed.errorMessage).toBeNull();
  });

  it.each([
    ['an Error', new Error('gitea answered 502'), 'gitea answered 502'],
    ['an error object that lost its class (restored from the store)', { name: 'Error', message: 'socket hang up' }, 'socket hang up'],
    ['a thrown string', 'ETIMEDOUT', 'ETIMEDOUT'],
    ['a thrown object without a message', { code: 42 }, '[object Object]'],
    ['a thrown null', null, 'null'],
  ])('why a query failed is kept for the audit log: %s', async (_what, thrown, message) => {
    const v = verifier([thrown]);
    v.actor.start();
    await toPromise(v.actor);
    expect(v.actor.getSnapshot().context).toMatchObject({ errorCode: 'reply_query_failed', errorMessage: message });
  });

  it('why the fallback post failed is kept too', async () => {
    const ctx = await toFallback(verifier([{ found: false }, { found: false }], new Error('403 Forbidden')));
    expect(ctx).toMatchObject({ errorCode: 'rest_fallback_failed', errorMessage: '403 Forbidden', fallbackCommentId: null });
  });
});

describe('app-server: how it last ended (the supervisor and the operator read lastExit)', () => {
  const T0 = 1_700_000_000_000;
  const run = (s: ReturnType<typeof start>, ...events: AppServerEvent[]) => events.reduce((acc, e) => transition(appServerMachine, acc, e)[0], s);
  const start = () => initialTransition(appServerMachine, { serviceId: 'default' })[0];
  const ready = () => run(start(), { type: 'START', now: T0 }, { type: 'SPAWNED', pid: 7, now: T0 }, { type: 'INITIALIZED', now: T0, model: 'm', userAgent: 'u' });

  it('an exit after STOP is recorded as a close, with its code, signal and time, and is not a crash', () => {
    const s = run(ready(), { type: 'STOP', now: T0 + 5 }, { type: 'EXITED', code: 0, signal: 'SIGTERM', reason: 'exited', now: T0 + 9 });
    expect(s.value).toBe('closed');
    expect(s.context).toMatchObject({ pid: null, readyAt: null, consecutiveFailures: 0 });
    expect(s.context.lastExit).toEqual({ code: 0, signal: 'SIGTERM', reason: 'closed', at: T0 + 9 });
  });

  it('STOP after a crash closes at once and keeps the crash as the last exit', () => {
    const crash = { type: 'EXITED', code: null, signal: 'SIGKILL', reason: 'exited', now: T0 + 3 } as const;
    const s = run(ready(), crash, { type: 'SCHEDULE_RESTART', now: T0 + 3, delayMs: 500 }, { type: 'STOP', now: T0 + 4 });
    expect(s.value).toBe('closed');
    expect(s.context).toMatchObject({ restartAt: null, pid: null });
    expect(s.context.lastExit).toEqual({ code: null, signal: 'SIGKILL', reason: 'exited', at: T0 + 3 });
  });
});

describe('session: why a resume failed (the approval of a new thread names it)', () => {
  it('RESUME_FAILED keeps its error code', () => {
    const events: SessionEvent[] = [
      { type: 'START_THREAD' },
      { type: 'THREAD_STARTED', threadId: 'thread-1' },
      { type: 'RESTARTED' },
      { type: 'RESUME_FAILED', errorCode: 'no_rollout_found' },
    ];
    const s = events.reduce((acc, e) => transition(sessionMachine, acc, e)[0], initialTransition(sessionMachine, { sessionKey: 'k' })[0]);
    expect(s.value).toBe('resume_failed');
    expect(s.context).toMatchObject({ lastErrorCode: 'no_rollout_found', threadId: 'thread-1' });
  });
});
