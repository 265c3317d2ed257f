import { describe, expect, it } from 'vitest';
import {
  describeErrorCode,
  describeStopper,
  failureReceiptText,
  isFailureReceiptState,
  mentionOf,
  receivedReceiptText,
} from '../../src/receipts/receipt-text.js';
import { bodyHashOf, pendingReceiptRecord, receiptCommentKey } from '../../src/receipts/receipt-record.js';

describe('receipt text', () => {
  it('says 已收到 and names the commenter, nothing else from the comment', () => {
    const t = receivedReceiptText({ taskId: 'gitea-task-1', author: 'alice' });
    expect(t).toBe('giteabot: 已收到 — the request from @alice is queued (task gitea-task-1).');
  });

  it('drops a login that is not a plain Gitea login', () => {
    expect(mentionOf('alice.b-c_d')).toBe('@alice.b-c_d');
    expect(mentionOf('evil <b>')).toBeNull();
    expect(mentionOf('@everyone')).toBeNull();
    expect(receivedReceiptText({ taskId: 't', author: 'x](http://evil)' })).not.toContain('evil');
  });

  it('maps error codes to plain sentences, with a generic one for unknown codes', () => {
    expect(describeErrorCode('mcp_command_missing')).toBe('the Gitea tool server could not be started (command not found)');
    expect(describeErrorCode('reply_query_failed')).toMatch(/nothing was re-posted/);
    expect(describeErrorCode('something_new')).toBe('an unexpected error stopped it');
    expect(describeErrorCode(null)).toBe('an unexpected error stopped it');
  });

  it('names who stopped a task', () => {
    expect(describeStopper('admin:alice')).toBe('operator alice');
    expect(describeStopper('gitea:user:bob')).toBe('@bob');
    expect(describeStopper('bob')).toBe('@bob');
    expect(describeStopper('system')).toBe('the service');
    expect(describeStopper(null)).toBe('someone');
    expect(describeStopper('gitea:user:<img>')).toBe('someone');
  });

  it('writes one sentence per failure state', () => {
    const base = { taskId: 't1', errorCode: 'mcp_command_missing', stoppedBy: null };
    expect(failureReceiptText(base, 'failed')).toBe(
      'giteabot: task t1 failed: the Gitea tool server could not be started (command not found) (error code: `mcp_command_missing`).',
    );
    expect(failureReceiptText({ ...base, errorCode: 'rest_fallback_failed' }, 'failed_reply')).toMatch(/answer is not on this issue/);
    expect(failureReceiptText({ ...base, stoppedBy: 'admin:alice' }, 'aborted')).toMatch(/stopped by operator alice/);
    expect(failureReceiptText({ ...base, stoppedBy: 'gitea:user:bob' }, 'cancelled')).toMatch(/cancelled by @bob/);
  });

  it('knows which states get a failure receipt', () => {
    expect(['failed', 'failed_reply', 'aborted', 'cancelled'].every(isFailureReceiptState)).toBe(true);
    expect(['succeeded', 'succeeded_with_rest_fallback', 'running', 'waiting_user', 'ignored'].some(isFailureReceiptState)).toBe(false);
  });
});

describe('receipt record', () => {
  it('is a pending status row keyed taskId:status:state with the receipt marker', () => {
    const r = pendingReceiptRecord({ taskId: 't1', resourceKey: 'default:a/b:issue:1' }, 'received', new Date('2026-01-01T00:00:00Z'));
    expect(r).toMatchObject({
      commentKey: receiptCommentKey('t1', 'received'),
      kind: 'status',
      status: 'pending',
      commentId: null,
      marker: '<!-- ccweb receipt=t1:status:received -->',
      createdAt: '2026-01-01T00:00:00.000Z',
    });
    expect(bodyHashOf('x')).toMatch(/^sha256:[0-9a-f]{64}$/);
  });
});
