// The verifier's two effects called directly (spec §5.4), each step's store rows and audit events:
// the read (reply-lookup.ts) and the only write, check-then-act by marker (post-fallback.ts), plus
// the follower's own rules (verifier-follower.ts: one follow per turn, no verifier → an error) and
// the projection's guard. A real store; Gitea is the REST double on 127.0.0.1 (a stand-in, not a
// real Gitea: it lets a test lock an issue or fail a request).
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { CommentRecord, TaskRecord, TurnRecord } from '../../src/domain/records.js';
import { postFallbackReply, type PostFallbackDeps } from '../../src/verification/post-fallback.js';
import { replyRetryPrompt } from '../../src/verification/reply-body.js';
import { lookUpReply } from '../../src/verification/reply-lookup.js';
import { verifierInput } from '../../src/verification/reply-verification.js';
import { messageOf, VerificationStepError } from '../../src/verification/verification-errors.js';
import { verifiedTurnOf } from '../../src/verification/verified-turn.js';
import { LeaseLostError } from '../../src/store/types.js';
import { createRetryTurns } from '../../src/verification/retry-turn.js';
import { createVerifierFollower } from '../../src/verification/verifier-follower.js';
import { replyCommentKey, VERIFIER_KIND, verifierActorId } from '../../src/verification/verifier-keys.js';
import { projectVerifier, verdictRecord } from '../../src/verification/verifier-projection.js';
import { BOT, OWNER, REPO, openWorld, removeDir, seedTaskAndTurn, startGitea, type GiteaFixture, type World } from '../support/verification-world.js';

const ISSUE = 9;
let gitea: GiteaFixture;
let world: World;

beforeEach(async () => {
  gitea = await startGitea([ISSUE]);
  world = await openWorld(gitea);
});
afterEach(async () => {
  await world.close().catch(() => undefined);
  await gitea.close();
  removeDir(world.dir);
});

const lookupDeps = () => ({ store: world.store, gitea: world.gitea, sinceMarginMs: 5_000 });
const queryOf = (task: TaskRecord, turn: TurnRecord) => ({
  taskId: task.taskId,
  turnKey: turn.turnKey,
  resourceKey: task.resourceKey,
  marker: turn.marker,
  botLogin: BOT,
  since: Date.parse(turn.startedAt),
});
const fallbackInput = (task: TaskRecord, turn: TurnRecord) => ({
  taskId: task.taskId,
  turnKey: turn.turnKey,
  resourceKey: task.resourceKey,
  marker: turn.marker,
  mcpFailureReason: 'mcp_reply_missing',
});

function fallbackDeps(steps: string[] = []): PostFallbackDeps {
  return {
    store: world.store,
    gitea: world.gitea,
    botLogin: BOT,
    lookUp: (task, query, step) => {
      steps.push(step);
      return lookUpReply(lookupDeps(), task, query, step);
    },
    turnStartOf: async (turnKey) => Date.parse((await world.store.get<TurnRecord>('turns', turnKey))!.startedAt),
  };
}

const botPosts = (body: string, user = BOT) => gitea.double.addComment(OWNER, REPO, ISSUE, { user, body }).id as number;
const row = (turn: TurnRecord) => world.store.get<CommentRecord>('comments', replyCommentKey(turn.turnKey));
const eventsOf = async (turn: TurnRecord, action: string) => (await world.store.audit({ actorId: verifierActorId(turn.turnKey) })).filter((e) => e.action === action);

async function rejection(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => expect.fail('expected a rejection'),
    (e: unknown) => e,
  );
}

describe('the read (lookUpReply)', () => {
  it('audits the intent and the result under its step: found, with the comment id', async () => {
    const { task, turn } = await seedTaskAndTurn(world, ISSUE);
    const id = botPosts(`done\n\n${turn.marker}`);
    const match = await lookUpReply(lookupDeps(), task, queryOf(task, turn), 'query');
    expect(match.first?.id).toBe(id);
    expect((await eventsOf(turn, 'reply.query_intent'))[0]).toMatchObject({ taskId: task.taskId, metadata: { turnKey: turn.turnKey, step: 'query' } });
    expect((await eventsOf(turn, 'reply.query_result'))[0]).toMatchObject({ commentId: id, metadata: { turnKey: turn.turnKey, step: 'query', ok: true, found: true } });
  });

  it('a reply that is not there: found false and no comment id', async () => {
    const { task, turn } = await seedTaskAndTurn(world, ISSUE);
    expect((await lookUpReply(lookupDeps(), task, queryOf(task, turn), 'requery')).first).toBeUndefined();
    expect((await eventsOf(turn, 'reply.query_result'))[0]).toMatchObject({ commentId: null, metadata: { step: 'requery', ok: true, found: false } });
  });

  it('a Gitea error is audited as an alert with ok false and the message, then thrown', async () => {
    const { task, turn } = await seedTaskAndTurn(world, ISSUE);
    gitea.double.faults.failNext(/\/issues\/9\/comments$/, 500, 10, { method: 'GET' });
    await rejection(lookUpReply(lookupDeps(), task, queryOf(task, turn), 'query'));
    const [result] = await eventsOf(turn, 'reply.query_result');
    expect(result).toMatchObject({ level: 'alert', metadata: { turnKey: turn.turnKey, step: 'query', ok: false } });
    expect(String(result?.metadata?.['message'])).not.toBe('');
  });

  it("audits each extra copy once for this verifier, whatever other verifiers recorded", async () => {
    const { task, turn } = await seedTaskAndTurn(world, ISSUE);
    const first = botPosts(`done\n\n${turn.marker}`);
    const extra = botPosts(`done again\n\n${turn.marker}`);
    // Another turn's verifier once recorded a comment with the same id: that says nothing about this turn.
    await world.store.transact((tx) =>
      tx.appendAudit({ action: 'reply.extra_comment', actor: 'system', actorId: 'verifier:other:1', taskId: 'other', commentId: extra }),
    );
    await lookUpReply(lookupDeps(), task, queryOf(task, turn), 'query');
    await lookUpReply(lookupDeps(), task, queryOf(task, turn), 'requery');
    expect((await eventsOf(turn, 'reply.extra_comment')).map((e) => [e.commentId, e.metadata])).toEqual([
      [extra, { turnKey: turn.turnKey, confirmedCommentId: first, kept: true }],
    ]);
  });
});

describe('the fallback (postFallbackReply): check, then act', () => {
  it('a task that is gone: task_missing, nothing asked, nothing posted', async () => {
    const { task, turn } = await seedTaskAndTurn(world, ISSUE);
    const err = await rejection(postFallbackReply(fallbackDeps(), { ...fallbackInput(task, turn), taskId: 'no-such-task' }));
    expect(err).toBeInstanceOf(VerificationStepError);
    expect(err).toMatchObject({ code: 'task_missing', message: 'task no-such-task not found' });
    expect(gitea.double.requests).toHaveLength(0);
  });

  it('a stopped task: task_stopped before any request, so no answer is posted on its behalf', async () => {
    const { task, turn } = await seedTaskAndTurn(world, ISSUE, {}, { state: 'cancelled' });
    const err = await rejection(postFallbackReply(fallbackDeps(), fallbackInput(task, turn)));
    expect(err).toMatchObject({ code: 'task_stopped', message: 'task is cancelled' });
    expect(gitea.double.requests).toHaveLength(0);
  });

  it('adopts a comment that is already there (looked up as fallback_check): pending row → sent, no POST', async () => {
    const { task, turn } = await seedTaskAndTurn(world, ISSUE);
    const late = botPosts(`late\n\n${turn.marker}`);
    await world.store.transact((tx) => tx.put('comments', replyCommentKey(turn.turnKey), { commentKey: replyCommentKey(turn.turnKey), status: 'pending', commentId: null }));
    const steps: string[] = [];
    expect(await postFallbackReply(fallbackDeps(steps), fallbackInput(task, turn))).toEqual({ posted: true, commentId: late });
    expect(steps).toEqual(['fallback_check']);
    expect(await row(turn)).toMatchObject({ status: 'sent', commentId: late });
    expect((await eventsOf(turn, 'reply.fallback_adopted'))[0]).toMatchObject({ commentId: late, metadata: { turnKey: turn.turnKey } });
    expect(gitea.posts()).toBe(0);
  });

  it('adopting keeps a confirmed row confirmed, and writes no row where there was none', async () => {
    const { task, turn } = await seedTaskAndTurn(world, ISSUE);
    const late = botPosts(`late\n\n${turn.marker}`);
    expect(await postFallbackReply(fallbackDeps(), fallbackInput(task, turn))).toEqual({ posted: true, commentId: late });
    expect(await row(turn)).toBeUndefined();
    await world.store.transact((tx) => tx.put('comments', replyCommentKey(turn.turnKey), { commentKey: replyCommentKey(turn.turnKey), status: 'confirmed', commentId: late }));
    await postFallbackReply(fallbackDeps(), fallbackInput(task, turn));
    expect(await row(turn)).toMatchObject({ status: 'confirmed', commentId: late });
  });

  it('no final message (or no turn at all): final_message_missing, nothing posted', async () => {
    const { task, turn } = await seedTaskAndTurn(world, ISSUE, { finalMessage: null });
    const err = await rejection(postFallbackReply(fallbackDeps(), fallbackInput(task, turn)));
    expect(err).toMatchObject({ code: 'final_message_missing', message: 'the turn has no final message to post' });
    const noTurn = { ...fallbackDeps(), turnStartOf: async () => Date.parse(turn.startedAt) };
    const gone = await rejection(postFallbackReply(noTurn, { ...fallbackInput(task, turn), turnKey: `${task.taskId}:404` }));
    expect(gone).toMatchObject({ code: 'final_message_missing' });
    expect(gitea.posts()).toBe(0);
  });

  it('posts the final message with the marker once: intent, then a sent row and an ok result', async () => {
    const { task, turn } = await seedTaskAndTurn(world, ISSUE);
    const out = await postFallbackReply(fallbackDeps(), fallbackInput(task, turn));
    const [posted] = gitea.comments(ISSUE);
    expect(out).toEqual({ posted: true, commentId: posted!.id });
    expect(posted!.body).toBe(`${turn.finalMessage}\n\n${turn.marker}`);
    expect(await row(turn)).toMatchObject({ kind: 'rest_fallback', status: 'sent', commentId: posted!.id, errorCode: null });
    const [intent] = await eventsOf(turn, 'reply.fallback_intent');
    expect(intent?.metadata).toEqual({ turnKey: turn.turnKey, bodyHash: (await row(turn))!.bodyHash, mcpFailureReason: 'mcp_reply_missing' });
    expect((await eventsOf(turn, 'reply.fallback_result')).map((e) => [e.commentId, e.metadata])).toEqual([[posted!.id, { turnKey: turn.turnKey, ok: true }]]);
  });

  it("a turn that asked the user something: the fallback posts its question, not the final message's waiting line", async () => {
    const { task, turn } = await seedTaskAndTurn(world, ISSUE, { finalMessage: 'Which branch?\nCCWEB_WAITING_USER', question: 'Which branch?' });
    await postFallbackReply(fallbackDeps(), fallbackInput(task, turn));
    expect(gitea.comments(ISSUE).map((c) => c.body)).toEqual([`Which branch?\n\n${turn.marker}`]);
  });

  it('a POST Gitea refuses (locked issue): the row says failed with the code, and the error is thrown', async () => {
    const { task, turn } = await seedTaskAndTurn(world, ISSUE);
    gitea.double.setLocked(OWNER, REPO, ISSUE, true);
    await rejection(postFallbackReply(fallbackDeps(), fallbackInput(task, turn)));
    expect(await row(turn)).toMatchObject({ status: 'failed', errorCode: 'gitea_forbidden', commentId: null });
    expect(gitea.comments(ISSUE)).toHaveLength(0);
  });
});

describe('the verifier follower', () => {
  const follower = () => createVerifierFollower({ store: world.store, runtime: () => world.runtime });

  it('one follow per turn at a time: a second caller gets the first promise; once settled, a new follow starts', async () => {
    const f = follower();
    let starts = 0;
    let release!: () => void;
    const start = () => {
      starts += 1;
      return new Promise<{ result: 'confirmed' }>((r) => (release = () => r({ result: 'confirmed' })));
    };
    const a = f.follow('t:1', start);
    const b = f.follow('t:1', start);
    expect(b).toBe(a);
    expect(starts).toBe(1);
    release();
    await a;
    await f.follow('t:1', async () => ({ result: 'failed' as const }));
    expect(starts).toBe(1);
    expect(await f.follow('t:1', async () => ({ result: 'failed' as const }))).toEqual({ result: 'failed' });
  });

  it('attaching to a verifier that does not exist fails with verifier_missing', async () => {
    const err = await rejection(follower().attach('verifier:nobody:1'));
    expect(err).toMatchObject({ code: 'verifier_missing', message: 'no verifier verifier:nobody:1' });
  });

  it('attaching to a stored verifier that was not restored fails with verifier_not_restored', async () => {
    const { task, turn } = await seedTaskAndTurn(world, ISSUE);
    const id = verifierActorId(turn.turnKey);
    let entered!: () => void;
    const inRetry = new Promise<void>((r) => (entered = r));
    await world.runtime.create(VERIFIER_KIND, id, verifierInput(task, turn, BOT), { taskId: task.taskId, by: 'system' });
    void world.verification.resume(turn.turnKey, () => {
      entered();
      return new Promise(() => undefined); // the process dies during the retry turn
    });
    await inRetry;
    await world.runtime.settled();
    await world.crash();
    world = await openWorld(gitea, { dir: world.dir });
    const err = await rejection(follower().attach(id));
    expect(err).toMatchObject({ code: 'verifier_not_restored' });
    expect((err as Error).message).toContain('restoreAll');
  });

});

describe("the verifier's retry effect", () => {
  const retryTurns = () => createRetryTurns({ store: world.store, runtime: () => world.runtime, log: () => undefined, failed: () => undefined });

  /** A turn whose reply is missing: its verifier waits in awaiting_retry_turn. */
  async function verifierAwaitingRetryTurn() {
    const { task, turn } = await seedTaskAndTurn(world, ISSUE);
    const id = verifierActorId(turn.turnKey);
    await world.runtime.create(VERIFIER_KIND, id, verifierInput(task, turn, BOT), { taskId: task.taskId, by: 'system' });
    await vi.waitFor(async () => expect((await world.runtime.stateOf(id))?.state).toBe('awaiting_retry_turn'), { timeout: 5_000 });
    return { task, turn, id };
  }

  it('waits for the verification to offer how to run the turn; two copies of one verifier run it once and report it once', async () => {
    const { task, turn } = await verifierAwaitingRetryTurn();
    const r = retryTurns();
    let runs = 0;
    let finish!: () => void;
    const turnEnded = new Promise<void>((resolve) => (finish = resolve));
    const input = { taskId: task.taskId, turnKey: turn.turnKey };
    const first = r.effect(input);
    const second = r.effect(input);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await eventsOf(turn, 'reply.retry_turn_intent')).toEqual([]);
    r.offer(turn.turnKey, async () => {
      runs += 1;
      await turnEnded;
      return { ok: false };
    });
    finish();
    await Promise.all([first, second]);
    expect(runs).toBe(1);
    expect((await eventsOf(turn, 'reply.retry_turn_intent')).map((e) => e.metadata)).toEqual([{ turnKey: turn.turnKey }]);
    expect((await eventsOf(turn, 'reply.retry_turn_result')).map((e) => e.errorCode)).toEqual(['retry_turn_failed']);
  });

  it("a runner whose lease is gone is dropped: the next lease holder's offer runs the turn", async () => {
    const { task, turn, id } = await verifierAwaitingRetryTurn();
    const r = retryTurns();
    const ran: string[] = [];
    r.offer(turn.turnKey, async () => {
      ran.push('old lease');
      throw new LeaseLostError(task.repoKey, 1);
    });
    const done = r.effect({ taskId: task.taskId, turnKey: turn.turnKey });
    await vi.waitFor(() => expect(ran).toEqual(['old lease']), { timeout: 5_000 });
    r.offer(turn.turnKey, async () => {
      ran.push('new lease');
      botPosts(`${turn.finalMessage}\n\n${turn.marker}`);
      return { ok: true };
    });
    await done;
    expect(ran).toEqual(['old lease', 'new lease']);
    expect((await eventsOf(turn, 'reply.retry_turn_result')).map((e) => [e.errorCode, e.metadata?.['ok']])).toEqual([[null, true]]);
    await vi.waitFor(async () => expect((await world.runtime.stateOf(id))?.state).toBe('confirmed'), { timeout: 5_000 });
  });
});

describe('a whole verification', () => {
  it("audits each read under the verifier's state, and the verifier row belongs to the task", async () => {
    const { task, turn } = await seedTaskAndTurn(world, ISSUE);
    const out = await world.verification.verify({ task, turn, runReplyRetryTurn: async () => ({ ok: true }) });
    expect(out.result).toBe('confirmed_via_fallback');
    expect((await eventsOf(turn, 'reply.query_intent')).map((e) => e.metadata?.['step'])).toEqual(['querying', 'querying', 'fallback_check', 'fallback_checking']);
    expect((await world.store.get<{ taskId: string | null }>('actors', verifierActorId(turn.turnKey)))?.taskId).toBe(task.taskId);
  });

  it("a follower resolves with its own verifier's outcome, not with another verifier's that finished first", async () => {
    const a = await seedTaskAndTurn(world, ISSUE, { turnKey: 'ta:1' }, { taskId: 'ta' });
    const b = await seedTaskAndTurn(world, ISSUE, { turnKey: 'tb:1' }, { taskId: 'tb' });
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let entered!: () => void;
    const inRetry = new Promise<void>((r) => (entered = r));
    const bOut = world.verification.verify({
      task: b.task,
      turn: b.turn,
      runReplyRetryTurn: async () => {
        entered();
        await gate;
        botPosts(`b\n\n${b.turn.marker}`);
        return { ok: true };
      },
    });
    await inRetry;
    const aId = botPosts(`a\n\n${a.turn.marker}`);
    expect(await world.verification.verify({ task: a.task, turn: a.turn, runReplyRetryTurn: async () => ({ ok: false }) })).toMatchObject({ result: 'confirmed', commentId: aId });
    release();
    const out = await bOut;
    expect(out.result).toBe('confirmed');
    expect(out.commentId).not.toBe(aId);
  });
});

describe('small rules', () => {
  it('the projection writes only on entering a final state', async () => {
    const { task, turn } = await seedTaskAndTurn(world, ISSUE);
    const ctx = { ...verifierInput(task, turn, BOT), mcpFailureReason: null, replyRetries: 0, commentId: 5, fallbackCommentId: null, errorCode: null, errorMessage: null, lastRetryTurnError: null, result: 'confirmed' as const };
    const change = (fromState: string, toState: string) =>
      ({ actorId: verifierActorId(turn.turnKey), kind: VERIFIER_KIND, fromState, toState, stateVersion: 2, snapshot: { context: ctx }, event: { type: 'x' }, by: 'system' }) as never;
    await world.store.transact((tx) => projectVerifier(tx, change('query', 'awaiting_retry_turn')));
    await world.store.transact((tx) => projectVerifier(tx, change('confirmed', 'confirmed')));
    expect(await row(turn)).toBeUndefined();
    expect(await eventsOf(turn, 'reply.confirmed')).toHaveLength(0);
    await world.store.transact((tx) => projectVerifier(tx, change('query', 'confirmed')));
    expect(await row(turn)).toMatchObject({ status: 'confirmed', commentId: 5 });
    expect(await eventsOf(turn, 'reply.confirmed')).toHaveLength(1);
  });

  it('a verdict without a turn or an earlier row has no turn id', async () => {
    const { task, turn } = await seedTaskAndTurn(world, ISSUE);
    const ctx = { ...verifierInput(task, turn, BOT), mcpFailureReason: null, replyRetries: 0, commentId: null, fallbackCommentId: null, errorCode: 'reply_query_failed' as const, errorMessage: null, lastRetryTurnError: null, result: 'failed' as const };
    expect(verdictRecord(ctx, 'failed', undefined, undefined, 'now').turnId).toBeNull();
  });

  it('a normal turn is verified as itself even with an earlier normal turn; a retry turn started in the same instant belongs to that turn', async () => {
    const { task, turn } = await seedTaskAndTurn(world, ISSUE);
    const earlier = { ...turn, turnKey: 'e', startedAt: '2026-01-01T00:00:00.000Z' };
    expect(verifiedTurnOf(turn, [earlier])).toBe(turn);
    const retry = { ...turn, turnKey: `${task.taskId}:2`, kind: 'reply_retry' as const };
    expect(verifiedTurnOf(retry, [earlier, turn, retry])).toBe(turn);
  });

  it('errors: a stable name, audit messages cut to 200 characters', () => {
    expect(new VerificationStepError('x', 'y').name).toBe('VerificationStepError');
    expect(messageOf(new Error('e'.repeat(500)))).toHaveLength(200);
  });

  it('the retry prompt: the rules on their own lines, and a blank previous answer counts as none', () => {
    const marker = '<!-- m -->';
    const blank = replyRetryPrompt('  \n ', marker);
    expect(blank.split('\n')[0]).toBe('Your previous final answer did not appear as a comment on this issue or pull request.');
    expect(blank).toContain('Post your previous final answer, followed by the marker line above.');
    expect(blank).not.toContain('-----');
  });
});
