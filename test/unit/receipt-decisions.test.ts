// The receipt outbox's pure decisions (src/receipts/receipt-decisions.ts, receipt-retry.ts,
// receipt-writes.ts' audit event): no store, no Gitea.
import { describe, expect, it } from 'vitest';
import { GiteaError } from '../../src/gitea/gitea-client.js';
import { pendingReceiptRecord, receiptCommentKey } from '../../src/receipts/receipt-record.js';
import { getsFailureReceipt, reactionTo, receiptBody, receiptStateOf, sendClaimWaitMs, triedBefore, waitsForReceived } from '../../src/receipts/receipt-decisions.js';
import { failureReceiptText, NOT_PUBLISHED_NOTICE_STATE, notPublishedReceiptText, receivedReceiptText } from '../../src/receipts/receipt-text.js';
import { refusalReceiptText } from '../../src/receipts/limit-texts.js';
import { isPermanentReceiptError, receiptRetryDecision } from '../../src/receipts/receipt-retry.js';
import { failedStepAudit } from '../../src/receipts/receipt-writes.js';
import { TASK_KIND } from '../../src/tasks/task-actor.js';
import { taskRecord } from '../support/verification-world.js';

const task = taskRecord(7, { taskId: 't7', errorCode: 'mcp_command_missing' });
const row = (state: string) => pendingReceiptRecord(task, state);

function giteaError(code: ConstructorParameters<typeof GiteaError>[0]['code'], status?: number): GiteaError {
  return new GiteaError({ code, message: `${code} happened`, ...(status === undefined ? {} : { status }), method: 'POST', endpoint: '/x', attempts: 1 });
}

describe('receipt rows', () => {
  it('reads the state from the row key, even one with colons in the task id', () => {
    expect(receiptStateOf(row('received'))).toBe('received');
    expect(receiptStateOf(pendingReceiptRecord({ taskId: 'a:b', resourceKey: 'r' }, 'failed_reply'))).toBe('failed_reply');
  });

  it('posts the text of the row state, ending with the row marker', () => {
    const rec = row('received');
    expect(receiptBody(task, rec, 'en')).toBe(`${receivedReceiptText(task, 'en')}\n\n${rec.marker}`);
    expect(receiptBody(task, row('aborted'), 'zh')).toBe(`${failureReceiptText(task, 'aborted', 'zh')}\n\n${row('aborted').marker}`);
    expect(receiptBody(task, row(NOT_PUBLISHED_NOTICE_STATE), 'en')).toContain(notPublishedReceiptText(task, 'en'));
    const quota = { code: 'quota_user_tasks_per_day', limit: 5, used: 5, retryAt: '2026-03-11T00:00:00.000Z' };
    expect(receiptBody(task, { ...row('refused'), quota }, 'en')).toContain(refusalReceiptText(task, quota, 'en'));
    // A reader's notice: who may ask, and nothing of the task (no id, no text) in what the thread shows.
    for (const locale of ['en', 'zh'] as const) {
      const notice = receiptBody({ ...task, author: 'bob', instruction: '@ccweb-bot delete the tests' }, { ...row('refused'), readerNotice: true }, locale);
      const shown = notice.split('\n\n<!--')[0]!;
      expect(shown).toMatch(locale === 'en' ? /^giteabot: @bob, only people with write access to this repository can ask the bot/ : /^giteabot: @bob，只有对本仓库有写权限的人/);
      expect(shown).not.toContain('t7');
      expect(shown).not.toContain('delete');
    }
    // A refusal row without its quota figures falls back to the plain receipt rather than inventing numbers.
    expect(receiptBody(task, row('refused'), 'en')).toContain(receivedReceiptText(task, 'en'));
  });

  it('gives a failure receipt to every failure except a task stopped by its own budget', () => {
    expect(getsFailureReceipt({ errorCode: 'mcp_command_missing' }, 'failed')).toBe(true);
    expect(getsFailureReceipt({ errorCode: 'budget_task_tokens' }, 'failed')).toBe(false);
    expect(getsFailureReceipt({ errorCode: 'budget_task_turns' }, 'aborted')).toBe(true);
    expect(getsFailureReceipt({ errorCode: null }, 'cancelled')).toBe(true);
  });

  it('holds a failure receipt back while the received one is pending, never the received one itself', () => {
    expect(waitsForReceived(row('failed'), { status: 'pending' })).toBe(true);
    expect(waitsForReceived(row('failed'), { status: 'sent' })).toBe(false);
    expect(waitsForReceived(row('failed'), { status: 'failed' })).toBe(false);
    expect(waitsForReceived(row('failed'), undefined)).toBe(false);
    expect(waitsForReceived(row('received'), { status: 'pending' })).toBe(false);
  });

  it('looks for an earlier attempt only when this row wrote a send intent', () => {
    const key = receiptCommentKey('t7', 'received');
    expect(triedBefore([], key)).toBe(false);
    expect(triedBefore([{ action: 'receipt.send_intent', metadata: { commentKey: receiptCommentKey('t7', 'failed') } }], key)).toBe(false);
    expect(triedBefore([{ action: 'receipt.send_result', metadata: { commentKey: key } }], key)).toBe(false);
    expect(triedBefore([{ action: 'receipt.send_intent', metadata: { commentKey: key } }], key)).toBe(true);
  });
});

describe('what a transition asks of the outbox', () => {
  const n = (fromState: string | null, toState: string, extra: Partial<Parameters<typeof reactionTo>[0]> = {}) =>
    reactionTo({ kind: TASK_KIND, fromState, toState, taskId: 't7', context: { taskId: 't7' }, ...extra });

  it('kicks on queued and after publishing, ensures a failure receipt on a failure state', () => {
    expect(n('received', 'queued')).toEqual({ kick: true });
    expect(n('publishing', 'verifying_reply')).toEqual({ kick: true });
    expect(n('running', 'verifying_reply')).toEqual({ kick: false });
    expect(n('running', 'failed')).toEqual({ kick: false, failureReceipt: { taskId: 't7', state: 'failed' } });
    expect(n('publishing', 'failed')).toEqual({ kick: true, failureReceipt: { taskId: 't7', state: 'failed' } });
    expect(n('verifying_reply', 'failed_reply')).toEqual({ kick: false, failureReceipt: { taskId: 't7', state: 'failed_reply' } });
  });

  it('takes the task id from the context first, then the notice, and ignores other kinds', () => {
    expect(n('running', 'aborted', { context: { taskId: 'ctx' }, taskId: 'notice' }).failureReceipt?.taskId).toBe('ctx');
    expect(n('running', 'aborted', { context: null, taskId: 'notice' }).failureReceipt?.taskId).toBe('notice');
    expect(n('running', 'aborted', { context: null, taskId: null })).toEqual({ kick: false });
    expect(reactionTo({ kind: 'verifier', fromState: null, toState: 'failed', taskId: 't7', context: null })).toEqual({ kick: false });
    expect(reactionTo({ kind: 'verifier', fromState: null, toState: 'queued', taskId: 't7', context: null })).toEqual({ kick: false });
  });
});

describe('after a failed attempt', () => {
  const delays = [10, 20];

  it('fails at once on a permanent Gitea answer, with its status', () => {
    for (const code of ['gitea_unauthorized', 'gitea_forbidden', 'gitea_not_found', 'gitea_locked', 'gitea_bad_request'] as const) {
      expect(isPermanentReceiptError(giteaError(code, 403))).toBe(true);
      expect(receiptRetryDecision(giteaError(code, 403), 'send', 0, delays)).toEqual({ kind: 'fail', errorCode: code, metadata: { step: 'send', status: 403 } });
    }
  });

  it('retries a transient failure after the next delay until the delays run out', () => {
    const err = giteaError('gitea_server_error', 500);
    expect(isPermanentReceiptError(err)).toBe(false);
    expect(receiptRetryDecision(err, 'lookup', 0, delays)).toEqual({ kind: 'retry', errorCode: 'gitea_server_error', failures: 1, delayMs: 10 });
    expect(receiptRetryDecision(err, 'lookup', 1, delays)).toEqual({ kind: 'retry', errorCode: 'gitea_server_error', failures: 2, delayMs: 20 });
    expect(receiptRetryDecision(err, 'lookup', 2, delays)).toEqual({ kind: 'fail', errorCode: 'gitea_server_error', metadata: { step: 'lookup', exhausted: true, attempts: 3 } });
    expect(receiptRetryDecision(giteaError('gitea_timeout'), 'send', 0, [])).toMatchObject({ kind: 'fail', metadata: { exhausted: true } });
  });

  it('treats an error that is not from Gitea (store trouble) as transient', () => {
    expect(receiptRetryDecision(new Error('disk full'), 'send', 0, delays)).toEqual({ kind: 'retry', errorCode: 'receipt_send_error', failures: 1, delayMs: 10 });
  });

  it('audits a failed POST with its status and whether Gitea answered; a failed lookup without', () => {
    const rec = row('received');
    expect(failedStepAudit(rec, 'send', giteaError('gitea_server_error', 502))).toEqual({
      action: 'receipt.send_result',
      actor: 'system',
      taskId: 't7',
      errorCode: 'gitea_server_error',
      metadata: { commentKey: rec.commentKey, ok: false, status: 502, answered: true, message: 'gitea_server_error happened' },
    });
    expect(failedStepAudit(rec, 'send', giteaError('gitea_timeout')).metadata).toMatchObject({ status: null, answered: false });
    expect(failedStepAudit(rec, 'lookup', new Error('x'.repeat(300)))).toEqual({
      action: 'receipt.lookup_result',
      actor: 'system',
      taskId: 't7',
      errorCode: 'receipt_send_error',
      metadata: { commentKey: rec.commentKey, ok: false, message: 'x'.repeat(200) },
    });
  });
});

describe('who may post a row another process wrote an intent for', () => {
  const at = '2026-12-06T10:00:00.000Z';
  const t = Date.parse(at);
  it('nobody sending, or this very process: post now', () => {
    expect(sendClaimWaitMs(undefined, 'node-a/1/1', t, 30_000)).toBe(0);
    expect(sendClaimWaitMs({ by: 'node-a/1/1', at }, 'node-a/1/1', t, 30_000)).toBe(0);
  });
  it('an earlier process of this node is gone: post now', () => {
    expect(sendClaimWaitMs({ by: 'node-a/1/1', at }, 'node-a/2/5', t + 1, 30_000)).toBe(0);
  });
  it("another node's fresh intent: wait until its POST must have landed, then post (after the lookup)", () => {
    expect(sendClaimWaitMs({ by: 'node-b/9/9', at }, 'node-a/2/5', t + 10_000, 30_000)).toBe(20_000);
    expect(sendClaimWaitMs({ by: 'node-b/9/9', at }, 'node-a/2/5', t + 30_000, 30_000)).toBe(0);
    // An owner id of an unexpected shape is another process too.
    expect(sendClaimWaitMs({ by: 'odd', at }, 'node-a/2/5', t, 30_000)).toBe(30_000);
  });
});
