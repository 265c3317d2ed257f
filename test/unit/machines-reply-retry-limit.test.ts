// Issue 34: one owner of the reply-retry limit. The task machine owns `MAX_REPLY_RETRIES`; the reply
// verifier reads it. Checked by walking both machines purely (xstate's public `initialTransition` /
// `transition`), not by comparing the constants: a guard that counts differently in either machine
// (`<=` for `<`, a literal instead of the constant) makes the two numbers below differ.
import { describe, expect, it } from 'vitest';
import { initialTransition, transition, type AnyMachineSnapshot, type AnyEventObject, type AnyStateMachine } from 'xstate';
import { MAX_REPLY_RETRIES, taskMachine } from '../../machines/task-lifecycle.js';
import { REPLY_VERIFIER_INVOKE_IDS, REPLY_VERIFIER_MAX_RETRIES, replyVerifierMachine } from '../../machines/reply-verifier.js';

const step = (machine: AnyStateMachine, s: AnyMachineSnapshot, e: AnyEventObject) => transition(machine, s, e)[0] as AnyMachineSnapshot;

/** How many retry turns the verifier asks for while its query keeps finding nothing, before the fallback. */
function verifierRetryTurns(): number {
  const input = { taskId: 't', turnKey: 'k', resourceKey: 'r', marker: 'm', botLogin: 'bot', turnStartedAt: 0 };
  let s = initialTransition(replyVerifierMachine, input)[0] as AnyMachineSnapshot;
  let turns = 0;
  for (let i = 0; i < 10 && s.value === 'querying'; i++) {
    s = step(replyVerifierMachine, s, { type: `xstate.done.actor.${REPLY_VERIFIER_INVOKE_IDS.query}`, output: { found: false } });
    if (s.value !== 'awaiting_retry_turn') break;
    turns += 1;
    s = step(replyVerifierMachine, s, { type: 'RETRY_TURN_DONE' });
  }
  expect(s.value).toBe('fallback_posting');
  return turns;
}

/** How many REPLY_MISSING (each one retry turn) the task accepts for one verified turn, asking or not. */
function taskRetryTurns(asking: boolean): number {
  let s = initialTransition(taskMachine, { taskId: 't' })[0] as AnyMachineSnapshot;
  for (const e of [{ type: 'ACCEPT' }, { type: 'CLAIM', leaseId: 'l' }, { type: 'WORKSPACE_READY' }]) s = step(taskMachine, s, e);
  s = step(taskMachine, s, asking ? { type: 'TURN_WAITING_USER' } : { type: 'TURN_REPLIED' });
  let turns = 0;
  for (let i = 0; i < 10; i++) {
    expect(s.value).toBe('verifying_reply');
    const next = step(taskMachine, s, { type: 'REPLY_MISSING', retryAt: 1 });
    if (next.value !== 'retry_wait') break;
    turns += 1;
    s = step(taskMachine, next, { type: 'RETRY_DUE', leaseId: 'l' });
    s = step(taskMachine, s, { type: 'TURN_REPLIED', publish: false });
  }
  return turns;
}

describe('the reply-retry limit has one owner (issue 34)', () => {
  it('the verifier asks for exactly as many retry turns as the task machine accepts, for an answer and a question', () => {
    expect(verifierRetryTurns()).toBe(MAX_REPLY_RETRIES);
    expect(taskRetryTurns(false)).toBe(MAX_REPLY_RETRIES);
    expect(taskRetryTurns(true)).toBe(MAX_REPLY_RETRIES);
    expect(REPLY_VERIFIER_MAX_RETRIES).toBe(MAX_REPLY_RETRIES);
  });

  it('the count is the task\'s (§8): a question that used its retry turn leaves none for the answer after the user\'s reply', () => {
    let s = initialTransition(taskMachine, { taskId: 't' })[0] as AnyMachineSnapshot;
    const events: AnyEventObject[] = [
      { type: 'ACCEPT' }, { type: 'CLAIM', leaseId: 'l' }, { type: 'WORKSPACE_READY' }, { type: 'TURN_WAITING_USER' },
      { type: 'REPLY_MISSING', retryAt: 1 }, { type: 'RETRY_DUE', leaseId: 'l' },
      { type: 'TURN_REPLIED', publish: false }, { type: 'REPLY_CONFIRMED' },
      { type: 'USER_REPLIED' }, { type: 'CLAIM', leaseId: 'l2' }, { type: 'WORKSPACE_READY' }, { type: 'TURN_REPLIED' },
    ];
    for (const e of events) s = step(taskMachine, s, e);
    expect(s.value).toBe('verifying_reply');
    expect(step(taskMachine, s, { type: 'REPLY_MISSING', retryAt: 1 }).value).toBe('verifying_reply');
  });
});
