// The REST fallback's writes are fenced by the lease of the worker that follows the verifier
// (src/leases/lease-fence.ts): a worker whose lease was taken over, or expired on the database's
// clock, records no fallback intent and makes no POST; the verifier it followed is not failed by
// that, and the worker holding the lease now posts the one answer.
// Real: the store (SQLite, with its lease rows), the runtime, the verification. Gitea stand-in (the
// REST double on 127.0.0.1), as in verification.test.ts: what is counted here is the POSTs it got.
import { describe, expect, it } from 'vitest';
import type { CommentRecord } from '../../src/domain/records.js';
import { leaseFence } from '../../src/leases/lease-fence.js';
import { replyCommentKey, verifierActorId } from '../../src/verification/reply-verification.js';
import { grantTestLeaseIn } from '../support/test-lease.js';
import { seedTaskAndTurn, type GiteaFixture, type World } from '../support/verification-world.js';
import { openWorldEachTest } from '../support/verification-world-each-test.js';

const ISSUE = 9;
let gitea: GiteaFixture;
let world: World;
openWorldEachTest([ISSUE], { opened: (fresh) => ({ gitea, world } = fresh), current: () => world });

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const TTL_MS = 300;

describe('the fallback post under a lost lease', () => {
  it.each([
    ['another worker took the lease over', 'taken'],
    ['the lease expired on the database clock (nobody took it yet)', 'expired'],
  ] as const)('%s: no intent, no POST, the verifier waits in fallback_posting for the next holder, who posts one answer', async (_name, how) => {
    const { task, turn } = await seedTaskAndTurn(world, ISSUE, { commentCall: { tool: 'issue_write', index: 4, accepted: false, error: 'mcp_tool_error' } });
    const lease1 = { repoKey: task.repoKey, leaseId: 'lease-1', owner: 'node-a', taskId: task.taskId };
    await grantTestLeaseIn(world.store, { ...lease1, ttlMs: TTL_MS });
    const lease2 = { repoKey: task.repoKey, leaseId: 'lease-2', owner: 'node-b', taskId: task.taskId };

    // The one retry turn posts nothing; meanwhile the lease runs out (and, taken: another worker gets it).
    const first = world.verification.verify({
      task,
      turn,
      fence: leaseFence(lease1),
      runReplyRetryTurn: async () => {
        await sleep(TTL_MS + 100);
        if (how === 'taken') await grantTestLeaseIn(world.store, lease2);
        return { ok: true };
      },
    });

    await expect(first).rejects.toMatchObject({ code: 'lease_lost' });
    expect(gitea.posts()).toBe(0);
    expect(await world.store.get<CommentRecord>('comments', replyCommentKey(turn.turnKey))).toBeUndefined();
    const actions = (await world.store.audit({ taskId: task.taskId })).map((e) => e.action);
    expect(actions).not.toContain('reply.fallback_intent');
    expect(actions).not.toContain('reply.failed');
    expect((await world.runtime.stateOf(verifierActorId(turn.turnKey)))?.state).toBe('fallback_posting');

    // The worker that holds the lease now follows the same verifier: one fallback answer.
    if (how === 'expired') await grantTestLeaseIn(world.store, lease2);
    const second = await world.verification.verify({ task, turn, fence: leaseFence(lease2), runReplyRetryTurn: async () => ({ ok: true }) });
    expect(second).toMatchObject({ result: 'confirmed_via_fallback' });
    expect(gitea.posts()).toBe(1);
    expect(gitea.comments(ISSUE)).toHaveLength(1);
  });
});
