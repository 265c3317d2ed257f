import { describe, expect, it } from 'vitest';
import {
  describeErrorCode,
  describeStopper,
  failureReceiptText,
  isFailureReceiptState,
  mentionOf,
  receivedReceiptText,
} from '../../src/receipts/receipt-text.js';
import { EXPLAINED_ERROR_CODES, LOCALES } from '../../src/messages/catalogue.js';
import { loadConfig } from '../../src/config/index.js';
import { tooLongReceiptText } from '../../src/receipts/limit-texts.js';
import { bodyHashOf, pendingReceiptRecord, receiptCommentKey } from '../../src/receipts/receipt-record.js';

describe('receipt text', () => {
  it('says 已收到 and names the commenter in the default language (zh), nothing else from the comment', () => {
    expect(receivedReceiptText({ taskId: 'gitea-task-1', author: 'alice' })).toBe('giteabot: 已收到 — @alice 的请求已排队（任务 gitea-task-1）。');
    expect(receivedReceiptText({ taskId: 'gitea-task-1', author: 'alice' }, 'zh')).toBe(receivedReceiptText({ taskId: 'gitea-task-1', author: 'alice' }));
  });

  it('speaks English with locale en: no Chinese at all', () => {
    const t = receivedReceiptText({ taskId: 'gitea-task-1', author: 'alice' }, 'en');
    expect(t).toBe('giteabot: received — the request from @alice is queued (task gitea-task-1).');
    const base = { taskId: 't1', errorCode: 'mcp_command_missing', stoppedBy: 'admin:alice' };
    for (const state of ['failed', 'failed_reply', 'aborted', 'cancelled'] as const) {
      expect(failureReceiptText(base, state, 'en')).not.toMatch(/[\u3000-\u9fff\uff00-\uffef]/);
      expect(failureReceiptText(base, state, 'zh')).toMatch(/[\u4e00-\u9fff]/);
    }
  });

  it('a comment too long for the agent: one sentence per language naming its size, the limit, the task and the code', () => {
    const task = { taskId: 'gitea-task-9', author: 'alice' };
    const size = { chars: 1_000_001, limit: 1_000_000 };
    const en = tooLongReceiptText(task, size, 'en');
    const zh = tooLongReceiptText(task, size, 'zh');
    expect(tooLongReceiptText(task, size)).toBe(zh);
    for (const t of [en, zh]) {
      expect(t.startsWith('giteabot: ')).toBe(true);
      for (const part of ['1,000,001', '1,000,000', '@alice', 'gitea-task-9', '`input_too_large`']) expect(t).toContain(part);
      expect(t).not.toMatch(/unexpected|意外/);
    }
    expect(en).not.toMatch(/[\u3000-\u9fff\uff00-\uffef]/);
    expect(zh).toMatch(/[\u4e00-\u9fff]/);
  });

  it('drops a login that is not a plain Gitea login', () => {
    expect(mentionOf('alice.b-c_d')).toBe('@alice.b-c_d');
    expect(mentionOf('evil <b>')).toBeNull();
    expect(mentionOf('@everyone')).toBeNull();
    for (const locale of LOCALES) expect(receivedReceiptText({ taskId: 't', author: 'x](http://evil)' }, locale)).not.toContain('evil');
  });

  it('maps error codes to plain sentences, with a generic one for unknown codes', () => {
    expect(describeErrorCode('mcp_command_missing', 'en')).toBe('the Gitea tool server could not be started (command not found)');
    expect(describeErrorCode('reply_query_failed', 'en')).toMatch(/nothing was re-posted/);
    expect(describeErrorCode('something_new', 'en')).toBe('an unexpected error stopped it');
    expect(describeErrorCode(null, 'en')).toBe('an unexpected error stopped it');
    expect(describeErrorCode('mcp_command_missing')).toBe('Gitea 工具服务无法启动（找不到命令）');
    expect(describeErrorCode('something_new')).toBe('意外错误使其停止');
  });

  it('has a sentence for every explained error code in every language, each its own', () => {
    for (const locale of LOCALES) {
      const sentences = EXPLAINED_ERROR_CODES.map((code) => describeErrorCode(code, locale));
      expect(sentences.every((s) => s.length > 0 && s !== describeErrorCode(null, locale))).toBe(true);
      expect(new Set(sentences).size).toBe(sentences.length);
    }
  });

  it('names who stopped a task', () => {
    expect(describeStopper('admin:alice', 'en')).toBe('operator alice');
    expect(describeStopper('gitea:user:bob', 'en')).toBe('@bob');
    expect(describeStopper('bob', 'en')).toBe('@bob');
    expect(describeStopper('system', 'en')).toBe('the service');
    expect(describeStopper(null, 'en')).toBe('someone');
    expect(describeStopper('gitea:user:<img>', 'en')).toBe('someone');
    expect(describeStopper('admin:alice')).toBe('管理员 alice');
    expect(describeStopper('gitea:user:bob')).toBe('@bob');
  });

  it('writes one sentence per failure state', () => {
    const base = { taskId: 't1', errorCode: 'mcp_command_missing', stoppedBy: null };
    expect(failureReceiptText(base, 'failed', 'en')).toBe(
      'giteabot: task t1 failed: the Gitea tool server could not be started (command not found) (error code: `mcp_command_missing`).',
    );
    expect(failureReceiptText(base, 'failed')).toBe('giteabot: 任务 t1 失败：Gitea 工具服务无法启动（找不到命令）（错误码：`mcp_command_missing`）。');
    expect(failureReceiptText({ ...base, errorCode: 'rest_fallback_failed' }, 'failed_reply', 'en')).toMatch(/answer is not on this issue/);
    expect(failureReceiptText({ ...base, stoppedBy: 'admin:alice' }, 'aborted', 'en')).toMatch(/stopped by operator alice/);
    expect(failureReceiptText({ ...base, stoppedBy: 'gitea:user:bob' }, 'cancelled', 'en')).toMatch(/cancelled by @bob/);
    expect(failureReceiptText({ ...base, stoppedBy: 'gitea:user:bob' }, 'cancelled')).toBe('giteabot: 任务 t1 在完成前被 @bob 取消。');
  });

  it('knows which states get a failure receipt', () => {
    expect(['failed', 'failed_reply', 'aborted', 'cancelled'].every(isFailureReceiptState)).toBe(true);
    expect(['succeeded', 'succeeded_with_rest_fallback', 'running', 'waiting_user', 'ignored'].some(isFailureReceiptState)).toBe(false);
  });

  it('CCWEB_LOCALE picks the language (default zh); another value is refused naming the key and the choices', () => {
    const env = { CCWEB_WEBHOOK_SECRET: 's', CCWEB_GITEA_URL: 'http://127.0.0.1:3000', CCWEB_GITEA_TOKEN: 't', CCWEB_ADMIN_TOKEN: 'a' };
    expect(loadConfig({ env, cwd: '/tmp' }).locale ?? 'zh').toBe('zh');
    expect(loadConfig({ env: { ...env, CCWEB_LOCALE: 'EN' }, cwd: '/tmp' }).locale).toBe('en');
    expect(() => loadConfig({ env: { ...env, CCWEB_LOCALE: 'fr' }, cwd: '/tmp' })).toThrow(/CCWEB_LOCALE.*zh, en/s);
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
