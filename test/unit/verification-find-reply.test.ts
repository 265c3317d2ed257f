import { describe, expect, it } from 'vitest';
import { formatMarker } from '../../src/domain/marker.js';
import type { GiteaComment } from '../../src/gitea/gitea-client.js';
import { findReplyComments } from '../../src/verification/find-reply.js';
import { questionRetryPrompt, replyBodyWithMarker, replyRetryPrompt } from '../../src/verification/reply-body.js';

const fields = { taskId: 't1', turnKey: 't1:1', resourceKey: 'default:acme/w:issue:7' };
const marker = formatMarker(fields);

function comment(id: number, login: string, body: string, created = '2026-03-10T08:00:00Z'): GiteaComment {
  return { id, body, user: { id: id + 100, login }, html_url: '', created_at: created, updated_at: created } as GiteaComment;
}

describe('findReplyComments', () => {
  it('matches only the bot (any case) with exactly this marker', () => {
    const list = [
      comment(1, 'mallory', `x ${marker}`),
      comment(2, 'GiteaBot', `x ${formatMarker({ ...fields, turnKey: 't1:0' })}`),
      comment(3, 'giteabot', `x ${formatMarker({ ...fields, taskId: 't2' })}`),
      comment(4, 'giteabot', `x ${formatMarker({ ...fields, resourceKey: 'default:acme/w:issue:8' })}`),
      comment(5, 'GITEABOT', `answer\n${marker}`),
    ];
    const m = findReplyComments(list, 'giteabot', fields);
    expect(m.first?.id).toBe(5);
    expect(m.extras).toEqual([]);
  });

  it('confirms the earliest of several copies and lists the rest as extras', () => {
    const list = [
      comment(9, 'giteabot', marker, '2026-03-10T08:00:05Z'),
      comment(7, 'giteabot', marker, '2026-03-10T08:00:01Z'),
      comment(8, 'giteabot', marker, '2026-03-10T08:00:01Z'),
    ];
    const m = findReplyComments(list, 'giteabot', fields);
    expect(m.first?.id).toBe(7);
    expect(m.extras.map((c) => c.id)).toEqual([8, 9]);
  });

  it('finds nothing in an empty list', () => {
    expect(findReplyComments([], 'giteabot', fields)).toEqual({ first: undefined, extras: [] });
  });
});

describe('reply bodies', () => {
  it('appends the marker once', () => {
    expect(replyBodyWithMarker('answer\n\n', marker)).toBe(`answer\n\n${marker}`);
    expect(replyBodyWithMarker(`answer\n\n${marker}`, marker)).toBe(`answer\n\n${marker}`);
  });

  it('the retry prompt asks to re-post the previous answer unchanged and do nothing else', () => {
    const p = replyRetryPrompt('Use a mutex.', marker);
    expect(p).toContain('Post it again');
    expect(p).toContain('Change nothing else');
    expect(p).toContain(`-----\nUse a mutex.\n\n${marker}\n-----`);
    const none = replyRetryPrompt(null, marker);
    expect(none).toContain(marker);
    expect(none).toContain('previous final answer');
  });

  it("a question's retry prompt quotes the question with the marker and asks to wait for the user again", () => {
    const p = questionRetryPrompt('Which branch?', marker);
    expect(p).toContain('did not appear as a comment');
    expect(p).toContain(`-----\nWhich branch?\n\n${marker}\n-----`);
    expect(p).toContain('CCWEB_WAITING_USER');
  });
});
