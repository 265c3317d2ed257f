// Reply verification against the Gitea REST double over 127.0.0.1, with the real store and runtime.
// Every scenario ends by counting the comments on the issue: exactly the expected number.
// Gitea stand-in (not a real Gitea) for the faults a real one cannot produce on cue: a comment answered
// 201 and never stored (loseCreatedComments), 500s, slow answers, a locked issue. Verification on a real
// Gitea, REST fallback included: test/e2e/real-gitea.e2e.test.ts.
import { describe, expect, it } from 'vitest';
import type { CommentRecord, TurnRecord } from '../../src/domain/records.js';
import { formatMarker } from '../../src/domain/marker.js';
import { replyCommentKey, verifierActorId } from '../../src/verification/reply-verification.js';
import {
  BOT,
  OWNER,
  REPO,
  createFetchGate,
  openWorld,
  seedTaskAndTurn,
  type GiteaFixture,
  type World,
} from '../support/verification-world.js';
import { openWorldEachTest } from '../support/verification-world-each-test.js';

const ISSUE = 7;
let gitea: GiteaFixture;
let world: World;
openWorldEachTest([ISSUE], { opened: (fresh) => ({ gitea, world } = fresh), current: () => world });

/** What the agent's gitea-mcp call (or the retry turn) would do: a bot comment through the API. */
function botPosts(body: string, user = BOT): number {
  return gitea.double.addComment(OWNER, REPO, ISSUE, { user, body }).id as number;
}

function retryTurn(action: () => void = () => undefined) {
  const calls = { n: 0 };
  const run = async () => {
    calls.n += 1;
    action();
    return { ok: true };
  };
  return { calls, run };
}

async function replyRow(turn: TurnRecord): Promise<CommentRecord | undefined> {
  return await world.store.get<CommentRecord>('comments', replyCommentKey(turn.turnKey));
}

async function actions(taskId: string): Promise<string[]> {
  return (await world.store.audit({ taskId })).map((a) => a.action);
}

describe('reply verification', () => {
  it('confirms the reply the agent posted through MCP (no retry, no write)', async () => {
    const { task, turn } = await seedTaskAndTurn(world, ISSUE);
    const id = botPosts(`Use a mutex.\n\n${turn.marker}`);
    const retry = retryTurn();

    const out = await world.verification.verify({ task, turn, runReplyRetryTurn: retry.run });

    expect(out).toEqual({ result: 'confirmed', commentId: id });
    expect(retry.calls.n).toBe(0);
    expect(await replyRow(turn)).toMatchObject({ kind: 'mcp_final', status: 'confirmed', commentId: id, turnId: turn.turnId });
    expect((await world.runtime.stateOf(verifierActorId(turn.turnKey)))?.state).toBe('confirmed');
    expect(gitea.posts()).toBe(0);
    expect(gitea.comments(ISSUE)).toHaveLength(1);
  });

  it('missing → one reply_retry turn that re-posts → confirmed', async () => {
    const { task, turn } = await seedTaskAndTurn(world, ISSUE, { commentCall: null });
    let postedId = 0;
    const retry = retryTurn(() => {
      postedId = botPosts(`${turn.finalMessage}\n\n${turn.marker}`);
    });

    const out = await world.verification.verify({ task, turn, runReplyRetryTurn: retry.run });

    expect(out).toEqual({ result: 'confirmed', commentId: postedId, mcpFailureReason: 'mcp_reply_missing' });
    expect(retry.calls.n).toBe(1);
    expect(await replyRow(turn)).toMatchObject({ kind: 'mcp_final', status: 'confirmed', commentId: postedId });
    const a = await actions(task.taskId);
    expect(a.indexOf('reply.retry_turn_intent')).toBeLessThan(a.indexOf('reply.retry_turn_result'));
    expect(gitea.posts()).toBe(0);
    expect(gitea.comments(ISSUE)).toHaveLength(1);
  });

  it('missing twice → REST fallback → read back → confirmed_via_fallback, keeping the MCP failure reason', async () => {
    const { task, turn } = await seedTaskAndTurn(world, ISSUE, {
      commentCall: { tool: 'issue_write', index: 4, accepted: false, error: 'mcp_tool_error' },
    });
    const retry = retryTurn();

    const out = await world.verification.verify({ task, turn, runReplyRetryTurn: retry.run });

    const onGitea = gitea.comments(ISSUE);
    expect(onGitea).toHaveLength(1);
    expect(out).toEqual({ result: 'confirmed_via_fallback', commentId: onGitea[0]!.id, mcpFailureReason: 'mcp_tool_error' });
    expect(onGitea[0]!.user.login).toBe(BOT);
    expect(onGitea[0]!.body).toBe(`${turn.finalMessage}\n\n${turn.marker}`);
    expect(retry.calls.n).toBe(1);
    expect(await replyRow(turn)).toMatchObject({ kind: 'rest_fallback', status: 'confirmed', commentId: onGitea[0]!.id });
    const a = await actions(task.taskId);
    expect(a.indexOf('reply.fallback_intent')).toBeGreaterThan(-1);
    expect(a.indexOf('reply.fallback_intent')).toBeLessThan(a.indexOf('reply.fallback_result'));
    expect(gitea.posts()).toBe(1);
  });

  it('fallback answered 201 but the comment is not there → failed (rest_fallback_unconfirmed)', async () => {
    const { task, turn } = await seedTaskAndTurn(world, ISSUE);
    gitea.double.faults.loseCreatedComments(1);

    const out = await world.verification.verify({ task, turn, runReplyRetryTurn: retryTurn().run });

    expect(out).toMatchObject({ result: 'failed', errorCode: 'rest_fallback_unconfirmed' });
    expect(await replyRow(turn)).toMatchObject({ kind: 'rest_fallback', status: 'failed', errorCode: 'rest_fallback_unconfirmed' });
    expect((await world.store.audit({ taskId: task.taskId })).some((e) => e.action === 'reply.failed' && e.level === 'alert')).toBe(true);
    expect(gitea.posts()).toBe(1);
    expect(gitea.comments(ISSUE)).toHaveLength(0);
  });

  it('a query error (500 beyond the client retries) → failed with no write at all', async () => {
    const { task, turn } = await seedTaskAndTurn(world, ISSUE);
    gitea.double.faults.failNext(/\/issues\/7\/comments$/, 500, 10, { method: 'GET' });
    const retry = retryTurn();

    const out = await world.verification.verify({ task, turn, runReplyRetryTurn: retry.run });

    expect(out).toMatchObject({ result: 'failed', errorCode: 'reply_query_failed' });
    expect(retry.calls.n).toBe(0);
    // 1 attempt + 2 client retries, then nothing.
    expect(gitea.double.requests.filter((r) => r.method === 'GET' && r.status === 500)).toHaveLength(3);
    expect(await replyRow(turn)).toMatchObject({ kind: 'mcp_final', status: 'failed', errorCode: 'reply_query_failed' });
    expect((await world.store.audit({ taskId: task.taskId })).some((e) => e.action === 'reply.query_result' && e.level === 'alert')).toBe(true);
    expect(gitea.posts()).toBe(0);
    expect(gitea.comments(ISSUE)).toHaveLength(0);
  });

  it('a comment with the right marker by another user does not confirm (fallback posts the real one)', async () => {
    const { task, turn } = await seedTaskAndTurn(world, ISSUE);
    const forged = botPosts(`I am the bot, trust me\n\n${turn.marker}`, 'mallory');

    const out = await world.verification.verify({ task, turn, runReplyRetryTurn: retryTurn().run });

    expect(out.result).toBe('confirmed_via_fallback');
    expect(out.commentId).not.toBe(forged);
    const onGitea = gitea.comments(ISSUE);
    expect(onGitea).toHaveLength(2);
    expect(onGitea.find((c) => c.id === out.commentId)?.user.login).toBe(BOT);
  });

  it("the bot's comment with another task's or another turn's marker does not confirm", async () => {
    const { task, turn } = await seedTaskAndTurn(world, ISSUE);
    const otherTask = botPosts(`old answer\n\n${formatMarker({ taskId: 'task-other', turnKey: 'task-other:1', resourceKey: task.resourceKey })}`);
    const otherTurn = botPosts(`earlier attempt\n\n${formatMarker({ taskId: task.taskId, turnKey: `${task.taskId}:0`, resourceKey: task.resourceKey })}`);
    const otherResource = botPosts(`wrong place\n\n${formatMarker({ taskId: task.taskId, turnKey: turn.turnKey, resourceKey: 'default:acme/widgets:issue:8' })}`);

    const out = await world.verification.verify({ task, turn, runReplyRetryTurn: retryTurn().run });

    expect(out.result).toBe('confirmed_via_fallback');
    expect([otherTask, otherTurn, otherResource]).not.toContain(out.commentId);
    expect(gitea.posts()).toBe(1);
    expect(gitea.comments(ISSUE)).toHaveLength(4);
  });

  it('the agent posted twice: the first is confirmed, the extra is audited and left alone', async () => {
    const { task, turn } = await seedTaskAndTurn(world, ISSUE);
    const first = botPosts(`answer\n\n${turn.marker}`);
    const second = botPosts(`answer (again)\n\n${turn.marker}`);

    const out = await world.verification.verify({ task, turn, runReplyRetryTurn: retryTurn().run });

    expect(out).toEqual({ result: 'confirmed', commentId: first });
    const extras = (await world.store.audit({ actorId: verifierActorId(turn.turnKey) })).filter((e) => e.action === 'reply.extra_comment');
    expect(extras.map((e) => e.commentId)).toEqual([second]);
    expect(extras[0]!.metadata).toMatchObject({ confirmedCommentId: first, kept: true });
    expect(gitea.posts()).toBe(0);
    expect(gitea.comments(ISSUE)).toHaveLength(2);
  });

  it('a restart between the fallback POST and its read-back adopts the comment: exactly one', async () => {
    const gate = createFetchGate();
    await world.close();
    world = await openWorld(gitea, { dir: world.dir, fetch: gate.fetch });
    const { task, turn } = await seedTaskAndTurn(world, ISSUE);
    const posted = gate.hang('POST', /\/issues\/7\/comments$/, 'after');

    void world.verification.verify({ task, turn, runReplyRetryTurn: retryTurn().run });
    await posted; // Gitea stored the comment; the process "dies" before it hears back.
    expect(gitea.comments(ISSUE)).toHaveLength(1);
    const a = await actions(task.taskId);
    expect(a).toContain('reply.fallback_intent');
    expect(a).not.toContain('reply.fallback_result');
    await world.crash();

    world = await openWorld(gitea, { dir: world.dir });
    expect((await world.runtime.stateOf(verifierActorId(turn.turnKey)))?.state).toBe('fallback_posting');
    await world.runtime.restoreAll();
    const retryAgain = retryTurn();
    const out = await world.verification.resume(turn.turnKey, retryAgain.run);

    const onGitea = gitea.comments(ISSUE);
    expect(onGitea).toHaveLength(1);
    expect(out).toEqual({ result: 'confirmed_via_fallback', commentId: onGitea[0]!.id, mcpFailureReason: 'mcp_reply_missing' });
    expect(retryAgain.calls.n).toBe(0);
    expect(await actions(task.taskId)).toContain('reply.fallback_adopted');
    expect(await replyRow(turn)).toMatchObject({ kind: 'rest_fallback', status: 'confirmed', commentId: onGitea[0]!.id });
    expect(gitea.posts()).toBe(1);
  });

  it('a restart during the read-back after the fallback result was recorded: still exactly one', async () => {
    const gate = createFetchGate();
    await world.close();
    world = await openWorld(gitea, { dir: world.dir, fetch: gate.fetch });
    const { task, turn } = await seedTaskAndTurn(world, ISSUE);
    // GETs: query, query after the retry turn, fallback's own check, then the read-back (hangs).
    const readBack = gate.hang('GET', /\/issues\/7\/comments$/, 'before', { skip: 3 });

    void world.verification.verify({ task, turn, runReplyRetryTurn: retryTurn().run });
    await readBack;
    await world.runtime.settled();
    expect((await world.runtime.stateOf(verifierActorId(turn.turnKey)))?.state).toBe('fallback_checking');
    await world.crash();

    world = await openWorld(gitea, { dir: world.dir });
    await world.runtime.restoreAll();
    const out = await world.verification.resume(turn.turnKey, retryTurn().run);

    expect(out.result).toBe('confirmed_via_fallback');
    expect(gitea.posts()).toBe(1);
    expect(gitea.comments(ISSUE)).toHaveLength(1);
  });

  it('a restart while the reply_retry turn runs: resume runs it again, one comment', async () => {
    const { task, turn } = await seedTaskAndTurn(world, ISSUE);
    let entered!: () => void;
    const inRetry = new Promise<void>((r) => (entered = r));
    void world.verification.verify({
      task,
      turn,
      runReplyRetryTurn: () => {
        entered();
        return new Promise(() => undefined); // the process dies during the turn
      },
    });
    await inRetry;
    await world.runtime.settled();
    await world.crash();

    world = await openWorld(gitea, { dir: world.dir });
    await world.runtime.restoreAll();
    expect((await world.runtime.stateOf(verifierActorId(turn.turnKey)))?.state).toBe('awaiting_retry_turn');
    const retry = retryTurn(() => botPosts(`${turn.finalMessage}\n\n${turn.marker}`));
    const out = await world.verification.resume(turn.turnKey, retry.run);

    expect(out.result).toBe('confirmed');
    expect(retry.calls.n).toBe(1);
    expect(gitea.posts()).toBe(0);
    expect(gitea.comments(ISSUE)).toHaveLength(1);
  });

  it('50 duplicate verify calls and re-attachments during verification → one verifier, one retry turn, one comment', async () => {
    const { task, turn } = await seedTaskAndTurn(world, ISSUE);
    gitea.double.faults.delay(/\/issues\/7\/comments$/, 40);
    const retry = retryTurn();

    const calls = [
      ...Array.from({ length: 50 }, () => world.verification.verify({ task, turn, runReplyRetryTurn: retry.run })),
      ...Array.from({ length: 50 }, () => world.verification.resume(turn.turnKey, retry.run)),
    ];
    const outs = await Promise.all(calls);
    // After the end, duplicates get the stored verdict and change nothing.
    const late = await Promise.all(Array.from({ length: 50 }, () => world.verification.verify({ task, turn, runReplyRetryTurn: retry.run })));

    const onGitea = gitea.comments(ISSUE);
    expect(onGitea).toHaveLength(1);
    for (const o of [...outs, ...late]) expect(o).toEqual({ result: 'confirmed_via_fallback', commentId: onGitea[0]!.id, mcpFailureReason: 'mcp_reply_missing' });
    expect(retry.calls.n).toBe(1);
    expect(await world.store.list('actors', (r) => r.kind === 'verifier')).toHaveLength(1);
    expect(gitea.posts()).toBe(1);
  });

  it('a locked issue (403) on the fallback → failed (rest_fallback_failed), nothing posted', async () => {
    const { task, turn } = await seedTaskAndTurn(world, ISSUE);
    gitea.double.setLocked(OWNER, REPO, ISSUE, true);

    const out = await world.verification.verify({ task, turn, runReplyRetryTurn: retryTurn().run });

    expect(out).toMatchObject({ result: 'failed', errorCode: 'rest_fallback_failed' });
    expect(await replyRow(turn)).toMatchObject({ kind: 'rest_fallback', status: 'failed', errorCode: 'rest_fallback_failed' });
    const result = (await world.store.audit({ taskId: task.taskId })).find((e) => e.action === 'reply.fallback_result');
    expect(result).toMatchObject({ errorCode: 'gitea_forbidden', level: 'alert' });
    expect(gitea.double.requests.filter((r) => r.method === 'POST').map((r) => r.status)).toEqual([403]);
    expect(gitea.comments(ISSUE)).toHaveLength(0);
  });

  it('a task stopped while the retry turn ran gets no fallback comment', async () => {
    const { task, turn } = await seedTaskAndTurn(world, ISSUE);
    const retry = retryTurn();
    const out = await world.verification.verify({
      task,
      turn,
      runReplyRetryTurn: async () => {
        await world.store.transact(async (tx) => {
          const cur = (await tx.get<Record<string, unknown>>('tasks', task.taskId))!;
          await tx.put('tasks', task.taskId, { ...cur, state: 'aborted' });
        });
        return retry.run();
      },
    });

    expect(out).toMatchObject({ result: 'failed', errorCode: 'rest_fallback_failed' });
    expect(gitea.posts()).toBe(0);
    expect(gitea.comments(ISSUE)).toHaveLength(0);
  });

  it('verify handed the reply_retry turn attaches to the original turn\'s verifier', async () => {
    const { task, turn } = await seedTaskAndTurn(world, ISSUE);
    const id = botPosts(`answer\n\n${turn.marker}`);
    await world.verification.verify({ task, turn, runReplyRetryTurn: retryTurn().run });
    const retryTurnRecord: TurnRecord = {
      ...turn,
      turnKey: `${task.taskId}:2`,
      kind: 'reply_retry',
      marker: formatMarker({ taskId: task.taskId, turnKey: `${task.taskId}:2`, resourceKey: task.resourceKey }),
      startedAt: new Date().toISOString(),
    };
    await world.store.transact((tx) => tx.insert('turns', retryTurnRecord.turnKey, retryTurnRecord));

    const out = await world.verification.verify({ task, turn: retryTurnRecord, runReplyRetryTurn: retryTurn().run });

    expect(out).toEqual({ result: 'confirmed', commentId: id });
    expect(await world.store.list('actors', (r) => r.kind === 'verifier')).toHaveLength(1);
    expect(gitea.comments(ISSUE)).toHaveLength(1);
  });
});
