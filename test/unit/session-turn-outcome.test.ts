import { describe, expect, it } from 'vitest';
import type { ThreadItem } from '../../src/codex/protocol/ts/v2/ThreadItem.js';
import { findCommentCall, requestedQuestionsText, waitingUserQuestion } from '../../src/sessions/turn-outcome.js';

const call = (tool: string, args: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
  ({ type: 'mcpToolCall', id: `c-${tool}`, server: 'gitea', tool, status: 'completed', arguments: args, result: { content: [] }, error: null, ...extra }) as unknown as ThreadItem;

describe('comment-call recognition', () => {
  it('recognises the old and the new gitea-mcp comment tools, by index or issue_number', () => {
    expect(findCommentCall([call('create_issue_comment', { owner: 'a', repo: 'b', index: 42, body: 'x' })], 42)).toEqual({ tool: 'create_issue_comment', index: 42, accepted: true, error: null });
    expect(findCommentCall([call('issue_write', { method: 'add_comment', issue_number: 42, body: 'x' })], 42)).toMatchObject({ tool: 'issue_write', index: 42, accepted: true });
    expect(findCommentCall([call('issue_write', { method: 'add_comment', index: '42' })], 42)).toMatchObject({ index: 42 });
  });

  it('ignores other tools, other methods, other servers and other resources', () => {
    expect(findCommentCall([call('issue_write', { method: 'edit_comment', index: 42 })], 42)).toBeNull();
    expect(findCommentCall([call('get_issue_comments_by_index', { index: 42 })], 42)).toBeNull();
    expect(findCommentCall([call('create_issue_comment', { index: 41 })], 42)).toBeNull();
    expect(findCommentCall([call('create_issue_comment', { index: 42 }, { server: 'other' })], 42)).toBeNull();
    expect(findCommentCall([{ type: 'agentMessage', id: 'm', text: 'hi' } as unknown as ThreadItem], 42)).toBeNull();
  });

  it('a failed call or a tool error is a comment call that was not accepted', () => {
    expect(findCommentCall([call('create_issue_comment', { index: 42 }, { status: 'failed', error: { message: '403 locked' } })], 42)).toEqual({ tool: 'create_issue_comment', index: 42, accepted: false, error: '403 locked' });
    expect(findCommentCall([call('create_issue_comment', { index: 42 }, { result: { isError: true, content: [] } })], 42)).toMatchObject({ accepted: false, error: 'tool returned an error' });
  });

  it('the last comment call wins', () => {
    const items = [call('create_issue_comment', { index: 42 }, { status: 'failed', error: 'x' }), call('issue_write', { method: 'add_comment', index: 42 })];
    expect(findCommentCall(items, 42)).toMatchObject({ tool: 'issue_write', accepted: true });
  });
});

describe('waiting_user detection', () => {
  it('is the sentinel as the last line, and the question is what comes before it', () => {
    expect(waitingUserQuestion('Which branch?\nCCWEB_WAITING_USER')).toBe('Which branch?');
    expect(waitingUserQuestion('Which branch?\n  CCWEB_WAITING_USER  \n\n')).toBe('Which branch?');
    expect(waitingUserQuestion('CCWEB_WAITING_USER')).toBe('(the agent is waiting for your answer)');
  });

  it('is not a sentinel elsewhere, nor a plain question', () => {
    expect(waitingUserQuestion('I will not use CCWEB_WAITING_USER here.\nDone.')).toBeNull();
    expect(waitingUserQuestion('Do you want more?')).toBeNull();
    expect(waitingUserQuestion(null)).toBeNull();
  });

  it("Codex's own requestUserInput questions become the question text", () => {
    expect(requestedQuestionsText([{ questions: [{ id: 'q', question: 'Which branch?' }] }])).toBe('Which branch?');
    expect(requestedQuestionsText([])).toBeNull();
  });
});
