import { createActor, fromPromise, toPromise, waitFor } from 'xstate';
import { describe, expect, it } from 'vitest';

import {
  replyVerifierMachine,
  type PostFallbackInput,
  type PostFallbackOutput,
  type QueryReplyInput,
  type QueryReplyOutput,
  type ReplyVerifierInput,
  type RetryTurnInput,
} from '../../machines/reply-verifier.js';

const INPUT: ReplyVerifierInput = {
  taskId: 'gitea-task-1',
  turnKey: 'turn-1',
  resourceKey: 'default:acme/widget:issue:42',
  marker: '<!-- ccweb:gitea-task-1:turn-1 -->',
  botLogin: 'ccweb-bot',
  turnStartedAt: 1_700_000_000_000,
};

type QueryAnswer = QueryReplyOutput | Error;

/** Scripted fakes: each query call takes the next answer; every call and its input is recorded. */
function harness(
  queries: QueryAnswer[],
  post: PostFallbackOutput | Error = { posted: true, commentId: 900 },
  input: ReplyVerifierInput = INPUT,
) {
  const calls = { query: [] as QueryReplyInput[], post: [] as PostFallbackInput[], retry: [] as RetryTurnInput[], retryStopped: 0 };
  const machine = replyVerifierMachine.provide({
    actors: {
      queryReply: fromPromise<QueryReplyOutput, QueryReplyInput>(async ({ input }) => {
        calls.query.push(input);
        const answer = queries.shift();
        if (answer === undefined) throw new Error('test: no more scripted queries');
        if (answer instanceof Error) throw answer;
        return answer;
      }),
      postFallback: fromPromise<PostFallbackOutput, PostFallbackInput>(async ({ input }) => {
        calls.post.push(input);
        if (post instanceof Error) throw post;
        return post;
      }),
      // Asks for the turn and waits: the test reports how it went, as the real effect does, by event.
      retryTurn: fromPromise<void, RetryTurnInput>(({ input, signal }) => {
        calls.retry.push(input);
        signal.addEventListener('abort', () => (calls.retryStopped += 1));
        return new Promise<void>(() => undefined);
      }),
    },
  });
  const actor = createActor(machine, { input });
  actor.subscribe({ error: () => {} });
  return { actor, calls };
}

describe('reply verifier machine', () => {
  it('confirms a reply found on the first query, without any write', async () => {
    const { actor, calls } = harness([{ found: true, commentId: 501 }]);
    actor.start();
    const output = await toPromise(actor);
    expect(actor.getSnapshot().value).toBe('confirmed');
    expect(output).toEqual({ result: 'confirmed', commentId: 501, errorCode: null, mcpFailureReason: null });
    expect(calls.post).toHaveLength(0);
    expect(calls.query).toEqual([
      {
        taskId: INPUT.taskId,
        turnKey: INPUT.turnKey,
        resourceKey: INPUT.resourceKey,
        marker: INPUT.marker,
        botLogin: INPUT.botLogin,
        since: INPUT.turnStartedAt,
      },
    ]);
  });

  it('a missing reply asks for one reply_retry turn, then confirms', async () => {
    const { actor, calls } = harness([{ found: false }, { found: true, commentId: 502 }]);
    actor.start();
    await waitFor(actor, (s) => s.matches('awaiting_retry_turn'));
    expect(actor.getSnapshot().context).toMatchObject({ replyRetries: 1, mcpFailureReason: 'mcp_reply_missing' });
    // The verifier asks for the turn itself: its retryTurn effect runs, for this task's turn.
    expect(calls.retry).toEqual([{ taskId: INPUT.taskId, turnKey: INPUT.turnKey }]);
    actor.send({ type: 'RETRY_TURN_DONE' });
    const output = await toPromise(actor);
    expect(output).toMatchObject({ result: 'confirmed', commentId: 502 });
    expect(calls.query).toHaveLength(2);
    expect(calls.post).toHaveLength(0);
    expect(calls.retry).toHaveLength(1);
    expect(calls.retryStopped).toBe(1);
  });

  it('still missing after the retry: one REST fallback, confirmed by a second query', async () => {
    const { actor, calls } = harness([{ found: false }, { found: false }, { found: true, commentId: 900 }]);
    actor.start();
    await waitFor(actor, (s) => s.matches('awaiting_retry_turn'));
    actor.send({ type: 'RETRY_TURN_DONE' });
    const output = await toPromise(actor);
    expect(actor.getSnapshot().value).toBe('confirmed_via_fallback');
    expect(output).toEqual({
      result: 'confirmed_via_fallback',
      commentId: 900,
      errorCode: null,
      mcpFailureReason: 'mcp_reply_missing',
    });
    expect(calls.query).toHaveLength(3);
    expect(calls.post).toEqual([
      {
        taskId: INPUT.taskId,
        turnKey: INPUT.turnKey,
        resourceKey: INPUT.resourceKey,
        marker: INPUT.marker,
        mcpFailureReason: 'mcp_reply_missing',
      },
    ]);
    expect(actor.getSnapshot().context.replyRetries).toBe(1);
  });

  it('a failed retry turn goes straight to the fallback and keeps the MCP failure reason from input', async () => {
    const { actor, calls } = harness(
      [{ found: false }, { found: true, commentId: 901 }],
      { posted: true, commentId: 901 },
      { ...INPUT, mcpFailureReason: 'mcp_tool_error' },
    );
    actor.start();
    await waitFor(actor, (s) => s.matches('awaiting_retry_turn'));
    actor.send({ type: 'RETRY_TURN_FAILED', errorCode: 'turn_failed' });
    const output = await toPromise(actor);
    expect(output).toEqual({
      result: 'confirmed_via_fallback',
      commentId: 901,
      errorCode: null,
      mcpFailureReason: 'mcp_tool_error',
    });
    expect(calls.post).toHaveLength(1);
    expect(calls.post[0]?.mcpFailureReason).toBe('mcp_tool_error');
    expect(actor.getSnapshot().context.lastRetryTurnError).toBe('turn_failed');
  });

  it('a failed query never writes: failed with reply_query_failed, postFallback not invoked', async () => {
    const { actor, calls } = harness([new Error('gitea 502')]);
    actor.start();
    const output = await toPromise(actor);
    expect(actor.getSnapshot().value).toBe('failed');
    expect(output).toEqual({ result: 'failed', commentId: null, errorCode: 'reply_query_failed', mcpFailureReason: null });
    expect(actor.getSnapshot().context.errorMessage).toBe('gitea 502');
    expect(calls.post).toHaveLength(0);
  });

  it('a failed query after the retry turn also never writes', async () => {
    const { actor, calls } = harness([{ found: false }, new Error('timeout')]);
    actor.start();
    await waitFor(actor, (s) => s.matches('awaiting_retry_turn'));
    actor.send({ type: 'RETRY_TURN_DONE' });
    const output = await toPromise(actor);
    expect(output).toMatchObject({ result: 'failed', errorCode: 'reply_query_failed', mcpFailureReason: 'mcp_reply_missing' });
    expect(calls.post).toHaveLength(0);
  });

  it('the placeholder actors (nothing provided) fail safe: query fails, nothing is posted', async () => {
    const actor = createActor(replyVerifierMachine, { input: INPUT });
    actor.start();
    const output = await toPromise(actor);
    expect(output).toMatchObject({ result: 'failed', errorCode: 'reply_query_failed' });
    expect(actor.getSnapshot().context.errorMessage).toBe('not provided: queryReply');
  });

  it('the placeholder retry effect (not provided) asks nothing and never settles: the verifier waits for the turn', async () => {
    const machine = replyVerifierMachine.provide({ actors: { queryReply: fromPromise<QueryReplyOutput, QueryReplyInput>(async () => ({ found: false })) } });
    const actor = createActor(machine, { input: INPUT }).start();
    await waitFor(actor, (s) => s.matches('awaiting_retry_turn'));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(actor.getSnapshot().value).toBe('awaiting_retry_turn');
    expect(actor.getSnapshot().children['retryTurn']?.getSnapshot().status).toBe('active');
    actor.stop();
  });

  it('a failed fallback post ends failed with rest_fallback_failed', async () => {
    const { actor, calls } = harness([{ found: false }, { found: false }], new Error('403'));
    actor.start();
    await waitFor(actor, (s) => s.matches('awaiting_retry_turn'));
    actor.send({ type: 'RETRY_TURN_DONE' });
    const output = await toPromise(actor);
    expect(output).toMatchObject({ result: 'failed', errorCode: 'rest_fallback_failed', mcpFailureReason: 'mcp_reply_missing' });
    expect(calls.post).toHaveLength(1);
  });

  it('a fallback that does not show up ends failed with rest_fallback_unconfirmed', async () => {
    const { actor, calls } = harness([{ found: false }, { found: false }, { found: false }]);
    actor.start();
    await waitFor(actor, (s) => s.matches('awaiting_retry_turn'));
    actor.send({ type: 'RETRY_TURN_DONE' });
    const output = await toPromise(actor);
    expect(output).toMatchObject({ result: 'failed', errorCode: 'rest_fallback_unconfirmed' });
    expect(calls.post).toHaveLength(1);
    expect(calls.query).toHaveLength(3);
  });

  it('allows one reply_retry turn only: a second miss goes to the fallback, not another retry', async () => {
    const { actor } = harness([{ found: false }, { found: false }, { found: true, commentId: 900 }]);
    const seen: string[] = [];
    actor.subscribe((s) => seen.push(String(s.value)));
    actor.start();
    await waitFor(actor, (s) => s.matches('awaiting_retry_turn'));
    actor.send({ type: 'RETRY_TURN_DONE' });
    await toPromise(actor);
    expect(seen.filter((v) => v === 'awaiting_retry_turn').length).toBe(1);
    expect(seen).toContain('fallback_posting');
  });
});
