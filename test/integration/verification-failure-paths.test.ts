// Reply verification when something other than Gitea goes wrong: the turn left no final text to
// post, the reply-retry turn throws, the task was stopped while verification waited. The rule of
// §5.4 holds in each: nothing is written that the spec does not allow, and the reason is audited.
// Gitea stand-in (not a real Gitea): the same double as verification.test.ts, for counting posts.
import { describe, expect, it } from 'vitest';
import { verifierActorId } from '../../src/verification/index.js';
import { seedTaskAndTurn, type GiteaFixture, type World } from '../support/verification-world.js';
import { openWorldEachTest } from '../support/verification-world-each-test.js';

const ISSUE = 7;
let gitea: GiteaFixture;
let world: World;
openWorldEachTest([ISSUE], { opened: (fresh) => ({ gitea, world } = fresh), current: () => world });

const audits = async (taskId: string) => await world.store.audit({ taskId });

describe('reply verification: failures outside Gitea', () => {
  it('no final text to post: the REST fallback writes nothing, fails with final_message_missing, and raises an alert', async () => {
    const { task, turn } = await seedTaskAndTurn(world, ISSUE, { finalMessage: '   ', commentCall: null });
    const out = await world.verification.verify({ task, turn, runReplyRetryTurn: async () => ({ ok: true }) });
    expect(out.result).toBe('failed');
    expect(gitea.posts()).toBe(0);
    expect(gitea.comments(ISSUE)).toHaveLength(0);
    const alert = (await audits(task.taskId)).find((a) => a.action === 'reply.fallback_result');
    expect(alert).toMatchObject({ level: 'alert', errorCode: 'final_message_missing', metadata: { turnKey: turn.turnKey, ok: false } });
    expect((await world.runtime.stateOf(verifierActorId(turn.turnKey)))?.state).toBe('failed');
  });

  it('a reply-retry turn that throws counts as a failed retry (retry_turn_error): on to the fallback, which posts once', async () => {
    const { task, turn } = await seedTaskAndTurn(world, ISSUE, { commentCall: null });
    let calls = 0;
    const out = await world.verification.verify({
      task,
      turn,
      runReplyRetryTurn: async () => {
        calls += 1;
        throw new Error('app-server exited');
      },
    });
    expect(calls).toBe(1);
    expect(out.result).toBe('confirmed_via_fallback');
    expect(gitea.posts()).toBe(1);
    const result = (await audits(task.taskId)).find((a) => a.action === 'reply.retry_turn_result');
    expect(result).toMatchObject({ errorCode: 'retry_turn_error', metadata: { turnKey: turn.turnKey, ok: false } });
  });

  it('a reply-retry turn that reports failure: retry_turn_failed, then the fallback', async () => {
    const { task, turn } = await seedTaskAndTurn(world, ISSUE, { commentCall: null });
    const out = await world.verification.verify({ task, turn, runReplyRetryTurn: async () => ({ ok: false }) });
    expect(out.result).toBe('confirmed_via_fallback');
    const result = (await audits(task.taskId)).find((a) => a.action === 'reply.retry_turn_result');
    expect(result).toMatchObject({ errorCode: 'retry_turn_failed', metadata: { ok: false } });
  });
});
