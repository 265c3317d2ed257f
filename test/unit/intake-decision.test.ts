// decideWrite: the precedence of intake's outcomes (spec §5.1), and that facts are asked lazily.
import { describe, expect, it } from 'vitest';
import type { CommentTriggerRecord, DeliveryRecord, TaskRecord } from '../../src/domain/records.js';
import { decideWrite, type WriteFacts } from '../../src/intake/intake-decision.js';
import type { Plan } from '../../src/intake/intake-types.js';
import type { QuotaRefusal } from '../../src/usage/quota-check.js';
import { inputTooLarge, type InputTooLarge } from '../../src/domain/agent-input.js';

const delivery = { deliveryKey: 'd' } as DeliveryRecord;
const trigger = { triggerKey: 't', taskId: 'x' } as CommentTriggerRecord;
const waiting = { taskId: 'w' } as TaskRecord;
const refusal = { code: 'quota_user_tasks_per_day', limit: 1, used: 1, retryAt: 'r' } as QuotaRefusal;

/** Facts with everything absent unless given; records which were asked. */
function facts(given: Partial<{ delivery: DeliveryRecord; trigger: CommentTriggerRecord; disabled: boolean; noticedToday: boolean; readerNoticeDue: boolean; waiting: TaskRecord; refusal: QuotaRefusal; hasComment: boolean; tooLarge: InputTooLarge }> = {}) {
  const asked: string[] = [];
  const f: WriteFacts = {
    delivery: () => (asked.push('delivery'), given.delivery),
    trigger: () => (asked.push('trigger'), given.trigger),
    hasComment: given.hasComment ?? true,
    repositoryDisabled: () => (asked.push('disabled'), given.disabled ?? false),
    disabledNoticeDue: () => (asked.push('noticed'), !(given.noticedToday ?? false)),
    readerNoticeDue: () => (asked.push('readerNotice'), given.readerNoticeDue ?? false),
    inputTooLarge: () => (asked.push('size'), given.tooLarge ?? null),
    waitingTask: () => (asked.push('waiting'), given.waiting),
    quotaRefusal: () => (asked.push('quota'), given.refusal ?? null),
  };
  return { f, asked };
}

const ACCEPT: Plan = { kind: 'accept' };

describe('decideWrite', () => {
  it('a known delivery answers first, whatever else holds', async () => {
    const { f, asked } = facts({ delivery, trigger, disabled: true, waiting, refusal });
    expect(await decideWrite(ACCEPT, f)).toEqual({ kind: 'repeat', delivery });
    expect(asked).toEqual(['delivery']);
  });

  it('then a known comment (a replay under a new delivery id), before ignore or a disabled repository', async () => {
    expect(await decideWrite({ kind: 'ignored', reason: 'edited' }, facts({ trigger, disabled: true }).f)).toEqual({ kind: 'duplicate_comment', trigger });
  });

  it('an ignored delivery is recorded as ignored even without a comment', async () => {
    expect(await decideWrite({ kind: 'ignored', reason: 'edited' }, facts({ hasComment: false }).f)).toEqual({ kind: 'ignored', reason: 'edited' });
  });

  it('a probe with nothing known decides nothing, and does not look for waiting tasks or quotas', async () => {
    const { f, asked } = facts();
    expect(await decideWrite({ kind: 'probe' }, f)).toEqual({ kind: 'none' });
    expect(asked).toEqual(['delivery', 'trigger', 'disabled']);
    expect(await decideWrite({ kind: 'probe' }, facts({ hasComment: false }).f)).toEqual({ kind: 'none' });
  });

  it('a disabled repository refuses before the plan: stop, reject and accept alike', async () => {
    for (const plan of [ACCEPT, { kind: 'stop' } as Plan, { kind: 'reject', reason: 'no_write' } as Plan, { kind: 'probe' } as Plan]) {
      expect(await decideWrite(plan, facts({ disabled: true, waiting, refusal, noticedToday: true }).f)).toEqual({ kind: 'repository_disabled', notice: false });
    }
  });

  it('in a disabled repository a writer\'s mention or stop gets the thread\'s one notice of the day; a reject or a probe never does', async () => {
    for (const plan of [ACCEPT, { kind: 'stop' } as Plan]) {
      expect(await decideWrite(plan, facts({ disabled: true }).f)).toEqual({ kind: 'repository_disabled', notice: true });
      expect(await decideWrite(plan, facts({ disabled: true, noticedToday: true }).f)).toEqual({ kind: 'repository_disabled', notice: false });
    }
    const { f, asked } = facts({ disabled: true });
    expect(await decideWrite({ kind: 'reject', reason: 'no_write' }, f)).toEqual({ kind: 'repository_disabled', notice: false });
    expect(asked).not.toContain('noticed');
    // Before the permission check: answered only when the thread had its notice today; else who asks decides.
    expect(await decideWrite({ kind: 'probe' }, facts({ disabled: true, noticedToday: true }).f)).toEqual({ kind: 'repository_disabled', notice: false });
    expect(await decideWrite({ kind: 'probe' }, facts({ disabled: true }).f)).toEqual({ kind: 'none' });
  });

  it("a reader's mention gets the thread's notice of the day when it is due; no other rejection, and never in a disabled repository", async () => {
    const reader: Plan = { kind: 'reject', reason: 'actor_not_authorized', reader: true };
    expect(await decideWrite(reader, facts({ readerNoticeDue: true }).f)).toEqual({ kind: 'reject', reason: 'actor_not_authorized', notice: true });
    expect(await decideWrite(reader, facts({ readerNoticeDue: false }).f)).toEqual({ kind: 'reject', reason: 'actor_not_authorized', notice: false });
    // Refused by the operator's deny or allow list, not by Gitea's permission: "only writers can ask" would not be true.
    const listed = facts({ readerNoticeDue: true });
    expect(await decideWrite({ kind: 'reject', reason: 'actor_not_authorized' }, listed.f)).toEqual({ kind: 'reject', reason: 'actor_not_authorized', notice: false });
    expect(listed.asked).not.toContain('readerNotice');
    const disabled = facts({ readerNoticeDue: true, disabled: true });
    expect(await decideWrite(reader, disabled.f)).toEqual({ kind: 'repository_disabled', notice: false });
    expect(disabled.asked).not.toContain('readerNotice');
    // A known comment (a Replay) or delivery answers first: no second notice for the same mention.
    expect(await decideWrite(reader, facts({ trigger, readerNoticeDue: true }).f)).toEqual({ kind: 'duplicate_comment', trigger });
  });

  it('stop and reject follow their plan, ignoring waiting tasks and quotas', async () => {
    expect(await decideWrite({ kind: 'stop' }, facts({ waiting, refusal }).f)).toEqual({ kind: 'stop' });
    expect(await decideWrite({ kind: 'reject', reason: 'no_write' }, facts({ waiting, refusal }).f)).toEqual({ kind: 'reject', reason: 'no_write', notice: false });
  });

  it('an accepted comment continues a waiting task before any quota is counted; then the quota; then a new task', async () => {
    expect(await decideWrite(ACCEPT, facts({ waiting, refusal }).f)).toEqual({ kind: 'follow_up', task: waiting });
    expect(await decideWrite(ACCEPT, facts({ refusal }).f)).toEqual({ kind: 'quota_refused', refusal });
    const { f, asked } = facts();
    expect(await decideWrite(ACCEPT, f)).toEqual({ kind: 'accept' });
    expect(asked).toEqual(['delivery', 'trigger', 'disabled', 'size', 'waiting', 'quota']);
  });

  it('a comment too long for the agent is refused before it continues a waiting task or counts against a quota', async () => {
    const tooLarge = { chars: 1_000_001, limit: 1_000_000 };
    expect(await decideWrite(ACCEPT, facts({ tooLarge, waiting, refusal }).f)).toEqual({ kind: 'input_too_large', size: tooLarge });
    // Whoever may not trigger work is told that, not the size; a disabled repository says only that (once a day).
    expect(await decideWrite({ kind: 'reject', reason: 'no_write' }, facts({ tooLarge }).f)).toEqual({ kind: 'reject', reason: 'no_write', notice: false });
    expect(await decideWrite(ACCEPT, facts({ tooLarge, disabled: true, noticedToday: true }).f)).toEqual({ kind: 'repository_disabled', notice: false });
  });

  it('with the real size rule: one character over the limit is refused, the limit itself accepted', async () => {
    const at = async (body: string) => (await decideWrite(ACCEPT, { ...facts().f, inputTooLarge: () => inputTooLarge(body) })).kind;
    expect(await at('a'.repeat(1_000_000))).toBe('accept');
    expect(await at('a'.repeat(1_000_001))).toBe('input_too_large');
  });
});
