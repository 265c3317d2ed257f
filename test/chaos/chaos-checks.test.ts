// The chaos run's and the history's checks must be able to fail: each is fed a hand-made history with the violation.
import { describe, expect, it } from 'vitest';
import type { AuditEvent } from '../../src/store/types.js';
import { checkComments, checkDeliveries, checkRuns } from '../support/chaos-checks.js';
import { checkLeases } from '../support/history-check.js';

let seq = 0;
const ev = (action: string, e: Partial<AuditEvent>): AuditEvent => ({ eventId: `e${++seq}`, seq, timestamp: new Date().toISOString(), actor: 'test', action, ...e });
const task = (taskId: string, fromState: string | null, toState: string, event: Record<string, unknown> = {}) =>
  ev('task.transition', { taskId, actorId: `task:${taskId}`, fromState, toState, metadata: { event } });
const lock = (repoKey: string, fromState: string, toState: string, event: Record<string, unknown>) =>
  ev('lock.transition', { actorId: `lock:${repoKey}`, fromState, toState, metadata: { event } });

describe('chaos checks', () => {
  const tasks = [
    { taskId: 'a', repoKey: 'r' },
    { taskId: 'b', repoKey: 'r' },
  ];

  it('accepts serial runs that each hold the lease they name', () => {
    const events = [
      lock('r', 'free', 'held', { type: 'ACQUIRE', leaseId: 'L1' }),
      task('a', 'queued', 'preparing', { type: 'CLAIM', leaseId: 'L1' }),
      task('a', 'preparing', 'succeeded'),
      lock('r', 'held', 'free', { type: 'RELEASE', leaseId: 'L1' }),
      lock('r', 'free', 'held', { type: 'ACQUIRE', leaseId: 'L2' }),
      task('b', 'queued', 'preparing', { type: 'CLAIM', leaseId: 'L2' }),
    ];
    const r = checkRuns(events, tasks);
    expect({ runs: r.runs, overlaps: r.overlaps.length, claims: r.claimsWithoutLease.length }).toEqual({ runs: 2, overlaps: 0, claims: 0 });
  });

  it('finds two runs of one repository at once, and a claim naming a lease the lock does not hold', () => {
    const events = [
      lock('r', 'free', 'held', { type: 'ACQUIRE', leaseId: 'L1' }),
      task('a', 'queued', 'preparing', { type: 'CLAIM', leaseId: 'L1' }),
      task('b', 'queued', 'preparing', { type: 'CLAIM', leaseId: 'L9' }),
    ];
    const r = checkRuns(events, tasks);
    expect(r.overlaps).toHaveLength(1);
    expect(r.claimsWithoutLease.map((c) => c.taskId)).toEqual(['b']);
  });

  it("checks the lease rows' epochs: a skipped or repeated epoch, a claim under an older grant", () => {
    const t0 = Date.parse('2026-01-01T00:00:00Z');
    const at = (ms: number) => new Date(t0 + ms).toISOString();
    const granted = (leaseId: string, epoch: number, from: number, until: number) =>
      ev('lease.granted', { actorId: 'lock:r', metadata: { repoKey: 'r', leaseId, epoch, grantedAt: at(from), expiresAt: at(until) } });
    const serial = checkRuns(
      [granted('L1', 1, 0, 1000), lock('r', 'free', 'held', { type: 'ACQUIRE', leaseId: 'L1' }), task('a', 'queued', 'preparing', { type: 'CLAIM', leaseId: 'L1' }), lock('r', 'held', 'free', { type: 'RELEASE', leaseId: 'L1' }), granted('L2', 2, 500, 1500)],
      tasks,
    );
    expect({ grants: serial.leaseGrants, problems: serial.epochProblems }).toEqual({ grants: 2, problems: [] });
    const r = checkRuns(
      [
        granted('L1', 1, 0, 1000),
        lock('r', 'free', 'held', { type: 'ACQUIRE', leaseId: 'L1' }),
        // A skipped epoch.
        granted('L2', 3, 500, 1500),
        task('a', 'queued', 'preparing', { type: 'CLAIM', leaseId: 'L1' }),
      ],
      tasks,
    );
    expect(r.epochProblems.map((p) => p.problem)).toEqual([
      'epoch 3 after 1',
      'a claimed under L1, not the latest grant (epoch 3)',
    ]);
  });

  describe("leases on the database's clock (checkLeases)", () => {
    const t0 = Date.parse('2026-01-01T00:00:00Z');
    const at = (ms: number) => new Date(t0 + ms).toISOString();
    const granted = (leaseId: string, epoch: number, from: number, replaced?: { epoch: number; endedAt: number }) =>
      ev('lease.granted', { actorId: 'lock:r', metadata: { repoKey: 'r', leaseId, epoch, grantedAt: at(from), expiresAt: at(from + 6000), replaced: replaced ? { epoch: replaced.epoch, endedAt: at(replaced.endedAt) } : null } });
    const ended = (epoch: number, endedAt: number, how = 'released') => ev('lease.ended', { actorId: 'lock:r', metadata: { repoKey: 'r', epoch, how, endedAt: at(endedAt) } });

    it('accepts a run cut off, its lease expired, and its retry under the next epoch; and a takeover of a lease never released', () => {
      const r = checkLeases(
        [
          granted('L1', 1, 0),
          task('a', 'queued', 'preparing', { type: 'CLAIM', leaseId: 'L1' }),
          task('a', 'preparing', 'running'),
          ended(1, 8000, 'expired'),
          task('a', 'running', 'retry_wait'),
          granted('L2', 2, 8100),
          task('a', 'retry_wait', 'preparing', { type: 'RETRY_DUE', leaseId: 'L2' }),
          // Its node lost it without a word: the next grant ends it at its last expiry.
          granted('L3', 3, 20_000, { epoch: 2, endedAt: 19_000 }),
          task('b', 'queued', 'preparing', { type: 'CLAIM', leaseId: 'L3' }),
        ],
        tasks,
      );
      expect({ runs: r.runs, takeovers: r.takeovers, problems: [...r.leaseProblems, ...r.overlappingRuns, ...r.runsWithoutGrant] }).toEqual({ runs: 3, takeovers: 1, problems: [] });
      expect(r.runSpans.map((x) => [x.taskId, x.span.epoch, x.span.from - t0, x.span.until === null ? null : x.span.until - t0])).toEqual([
        ['a', 1, 0, 8000],
        ['a', 2, 8100, 19_000],
        ['b', 3, 20_000, null],
      ]);
    });

    it('finds a forged history: a retry granted while the cut-off run still held its lease, a grant after a lease never seen to end, two tasks under one lease, a run under no grant', () => {
      const r = checkLeases(
        [
          granted('L1', 1, 0),
          task('a', 'queued', 'preparing', { type: 'CLAIM', leaseId: 'L1' }),
          // The cut-off run's lease ended at 8 s on the database's clock, but the retry's was granted at 7 s.
          ended(1, 8000, 'expired'),
          granted('L2', 2, 7000),
          task('a', 'retry_wait', 'preparing', { type: 'RETRY_DUE', leaseId: 'L2' }),
          task('b', 'queued', 'preparing', { type: 'CLAIM', leaseId: 'L2' }),
          granted('L3', 3, 30_000),
          task('b', 'retry_wait', 'preparing', { type: 'RETRY_DUE', leaseId: 'L9' }),
        ],
        tasks,
      );
      expect(r.leaseProblems.map((p) => p.problem)).toEqual([`epoch 2 granted at ${at(7000)}, before epoch 1 ended at ${at(8000)}`, `epoch 3 granted at ${at(30_000)} while epoch 2 was never seen to end`]);
      expect(r.overlappingRuns.map((p) => p.problem)).toEqual([`epoch 1 ${at(0)}..${at(8000)} overlaps epoch 2 ${at(7000)}..not ended`, `epoch 1 ${at(0)}..${at(8000)} overlaps epoch 2 ${at(7000)}..not ended`, 'two tasks under one lease (epoch 2)']);
      expect(r.runsWithoutGrant.map((x) => x.leaseId)).toEqual(['L9']);
    });
  });

  it('finds a 202 without a task and a delivery that made two', () => {
    const r = checkDeliveries(
      [
        { deliveryId: 'd1', status: 202 },
        { deliveryId: 'd2', status: 202 },
        { deliveryId: 'd3', status: null },
      ],
      [
        { taskId: 't1', deliveryId: 'd1' },
        { taskId: 't2', deliveryId: 'd1' },
        { taskId: 't3', deliveryId: 'd3' },
      ],
    );
    expect({ missing: r.missing, doubled: r.doubled, withoutAck: r.tasksWithoutAck }).toEqual({ missing: ['d2'], doubled: ['d1'], withoutAck: 1 });
  });

  it('finds a missing receipt, a doubled receipt and two answers', () => {
    const receipt = (id: string) => `giteabot: 已收到 <!-- ccweb receipt=${id}:status:received -->`;
    const answer = (id: string, n: number) => `done <!-- ccweb taskId=${id} turnKey=${id}:${n} resource=default:a/b:issue:1 -->`;
    const bot = (body: string) => ({ user: 'ccweb-bot', body });
    const comments: Record<string, Array<{ user: string; body: string }>> = {
      ok: [bot(receipt('ok')), bot(answer('ok', 1)), { user: 'alice', body: answer('ok', 1) }],
      none: [bot(answer('none', 1))],
      twice: [bot(receipt('twice')), bot(receipt('twice')), bot(answer('twice', 1)), bot(answer('twice', 2))],
    };
    const r = checkComments(
      [
        { taskId: 'ok', state: 'succeeded' },
        { taskId: 'none', state: 'succeeded' },
        { taskId: 'twice', state: 'succeeded_with_rest_fallback' },
      ],
      (id) => comments[id]!,
      'ccweb-bot',
    );
    expect(r.receiptsOk).toBe(1);
    expect(r.receiptProblems).toEqual([
      { taskId: 'none', count: 0 },
      { taskId: 'twice', count: 2 },
    ]);
    expect(r.answerProblems).toEqual([{ taskId: 'twice', state: 'succeeded_with_rest_fallback', count: 2 }]);
  });
});
