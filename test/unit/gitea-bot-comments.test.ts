// The pure half of reading the bot's comments back (src/gitea/bot-comments.ts): which comments count
// and what `since` Gitea is asked with. The I/O half runs against the REST double in
// test/integration/bot-comments.test.ts.
import { describe, expect, it } from 'vitest';
import { formatMarker, formatReceiptMarker, hasMarker, hasReceiptMarker } from '../../src/domain/marker.js';
import { BOT_COMMENT_SINCE_MARGIN_MS, botCommentsWithMarker, sinceFilter, threadOf } from '../../src/gitea/bot-comments.js';
import type { GiteaComment } from '../../src/gitea/gitea-client.js';

function comment(id: number, login: string, body: string, created = '2026-03-10T08:00:00Z'): GiteaComment {
  return { id, body, user: { id: id + 100, login }, html_url: '', created_at: created, updated_at: created } as GiteaComment;
}

const receipt = 't1:status:received';
const isReceipt = (body: string) => hasReceiptMarker(body, receipt);

describe('botCommentsWithMarker', () => {
  it('keeps only the bot (any case) with the marker', () => {
    const list = [
      comment(1, 'mallory', `quoting ${formatReceiptMarker(receipt)}`),
      comment(2, 'giteabot', `other ${formatReceiptMarker('t1:status:failed')}`),
      comment(3, 'giteabot', 'no marker at all'),
      comment(4, 'GiteaBot', `ok\n\n${formatReceiptMarker(receipt)}`),
      comment(5, 'giteabot2', `ok\n\n${formatReceiptMarker(receipt)}`),
    ];
    expect(botCommentsWithMarker(list, 'GITEABOT', isReceipt).map((c) => c.id)).toEqual([4]);
  });

  it('orders earliest first by created time, then by id', () => {
    const m = formatReceiptMarker(receipt);
    const list = [comment(9, 'giteabot', m, '2026-03-10T08:00:05Z'), comment(8, 'giteabot', m, '2026-03-10T08:00:01Z'), comment(7, 'giteabot', m, '2026-03-10T08:00:01Z')];
    expect(botCommentsWithMarker(list, 'giteabot', isReceipt).map((c) => c.id)).toEqual([7, 8, 9]);
  });

  it('uses the matcher it is given (a reply marker matches exactly, not a quoted older one)', () => {
    const fields = { taskId: 't1', turnKey: 't1:2', resourceKey: 'r' };
    const list = [comment(1, 'giteabot', formatMarker({ ...fields, turnKey: 't1:1' })), comment(2, 'giteabot', formatMarker(fields))];
    expect(botCommentsWithMarker(list, 'giteabot', (b) => hasMarker(b, fields)).map((c) => c.id)).toEqual([2]);
    expect(botCommentsWithMarker([], 'giteabot', () => true)).toEqual([]);
  });
});

describe('sinceFilter', () => {
  it('subtracts the margin (default five minutes) from a date or epoch milliseconds', () => {
    const at = Date.parse('2026-03-10T08:00:00Z');
    expect(BOT_COMMENT_SINCE_MARGIN_MS).toBe(300_000);
    expect(sinceFilter(at).toISOString()).toBe('2026-03-10T07:55:00.000Z');
    expect(sinceFilter(new Date(at), 1_000).toISOString()).toBe('2026-03-10T07:59:59.000Z');
    expect(sinceFilter(at, 0).getTime()).toBe(at);
  });
});

describe('threadOf', () => {
  it('is the task repository and its issue or pull-request number', () => {
    expect(threadOf({ owner: 'acme', repo: 'w', resource: { number: 12 } })).toEqual({ owner: 'acme', repo: 'w', issue: 12 });
  });
});
