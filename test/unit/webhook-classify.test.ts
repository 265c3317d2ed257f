import { describe, expect, it } from 'vitest';
import {
  EDITED_COMMENT_POLICY,
  classifyComment,
  classifyEvent,
  isBotSelf,
  visibleProse,
  mentionsBot,
  parseCommand,
} from '../../src/webhook/classify.js';
import { normalizeComment, type NormalizedComment } from '../../src/webhook/normalize-comment.js';
import { loadFixture, mutatedDelivery, withoutHeader, type FixtureName } from '../support/webhook-fixtures.js';

const BOT = 'ccweb-bot';

function normalized(name: FixtureName, mutate?: (p: any) => void): NormalizedComment {
  const d = mutate ? mutatedDelivery(name, mutate) : loadFixture(name);
  const r = normalizeComment(d.headers, d.body);
  if (!r.ok) throw new Error(r.issues);
  return r.value;
}

describe('classifyEvent', () => {
  it('issue and PR conversation comments pass', () => {
    expect(classifyEvent(loadFixture('issue_comment_created_on_issue').headers)).toEqual({ ok: true, eventType: 'issue_comment' });
    expect(classifyEvent(loadFixture('pull_request_comment_created').headers)).toEqual({
      ok: true,
      eventType: 'pull_request_comment',
    });
  });

  it('review comments, push and others are ignored unsupported_event', () => {
    const { headers } = loadFixture('issue_comment_created_on_issue');
    const cases: Array<[string, string]> = [
      ['pull_request_comment', 'pull_request_review_comment'],
      ['push', 'push'],
      ['issues', 'issues'],
      ['issue_comment', 'pull_request_review_comment'],
      ['pull_request', 'pull_request_review_approved'],
    ];
    for (const [event, type] of cases) {
      expect(classifyEvent({ ...headers, 'X-Gitea-Event': event, 'X-Gitea-Event-Type': type })).toEqual({
        ok: false,
        outcome: 'ignored',
        reason: 'unsupported_event',
      });
    }
  });

  it('a missing event header is invalid_payload', () => {
    const { headers } = loadFixture('issue_comment_created_on_issue');
    for (const name of ['X-Gitea-Event', 'X-Gitea-Event-Type']) {
      const r = classifyEvent(withoutHeader(headers, name));
      expect(r).toMatchObject({ ok: false, outcome: 'invalid', code: 'invalid_payload' });
    }
  });
});

describe('classifyComment on the fixtures', () => {
  it('issue comment mentioning the bot → accept with the body as instruction', () => {
    const c = normalized('issue_comment_created_on_issue');
    expect(classifyComment(c, BOT)).toEqual({
      outcome: 'accept',
      command: { kind: 'instruction', text: '@ccweb-bot please fix the failing build on main' },
    });
  });

  it('PR comment → accept', () => {
    expect(classifyComment(normalized('pull_request_comment_created'), BOT).outcome).toBe('accept');
  });

  it('bot self-comment → ignored bot_self_comment (case-insensitive)', () => {
    const c = normalized('issue_comment_created_by_bot');
    expect(classifyComment(c, BOT)).toEqual({ outcome: 'ignored', reason: 'bot_self_comment' });
    expect(classifyComment(c, 'CCWeb-Bot')).toEqual({ outcome: 'ignored', reason: 'bot_self_comment' });
    // Even when the bot's own comment mentions itself.
    const loud = normalized('issue_comment_created_by_bot', (p) => (p.comment.body = '@ccweb-bot done'));
    expect(classifyComment(loud, BOT)).toEqual({ outcome: 'ignored', reason: 'bot_self_comment' });
    expect(isBotSelf('ccweb-bot', '')).toBe(false);
  });

  it(`edited fixture → ignored edited_comment (policy: ${EDITED_COMMENT_POLICY})`, () => {
    const c = normalized('issue_comment_edited');
    expect(c.comment.body).toContain('@ccweb-bot');
    expect(classifyComment(c, BOT)).toEqual({ outcome: 'ignored', reason: 'edited_comment' });
  });

  it('an edit that adds a mention still does nothing', () => {
    const c = normalized('issue_comment_edited', (p) => {
      p.changes.body.from = 'please fix the failing build';
    });
    expect(classifyComment(c, BOT)).toEqual({ outcome: 'ignored', reason: 'edited_comment' });
  });

  it('deleted and unknown actions are ignored', () => {
    expect(classifyComment(normalized('issue_comment_created_on_issue', (p) => (p.action = 'deleted')), BOT)).toEqual({
      outcome: 'ignored',
      reason: 'deleted_comment',
    });
    expect(classifyComment(normalized('issue_comment_created_on_issue', (p) => (p.action = 'pinned')), BOT)).toEqual({
      outcome: 'ignored',
      reason: 'unsupported_action',
    });
  });

  it('no mention → ignored no_mention', () => {
    const c = normalized('issue_comment_created_on_issue', (p) => (p.comment.body = 'thanks, looks good'));
    expect(classifyComment(c, BOT)).toEqual({ outcome: 'ignored', reason: 'no_mention' });
  });

  it('a stop command → accept with kind stop', () => {
    const c = normalized('issue_comment_created_on_issue', (p) => (p.comment.body = '@ccweb-bot stop'));
    expect(classifyComment(c, BOT)).toEqual({ outcome: 'accept', command: { kind: 'stop' } });
  });
});

describe('mentionsBot', () => {
  const yes = [
    '@ccweb-bot please fix',
    'please fix @ccweb-bot',
    '@CCWEB-BOT please',
    'hey @ccweb-bot, please',
    'hey @ccweb-bot.',
    'hey @ccweb-bot!',
    '(@ccweb-bot)',
    '[@ccweb-bot]',
    'cc:@ccweb-bot',
    '请@ccweb-bot 修复',
    '@ccweb-bot请修复',
    'مرحبا @ccweb-bot',
    'line one\r\n@ccweb-bot line two',
    '**@ccweb-bot** bold',
    '> quoted\n\n@ccweb-bot not quoted',
    '```\ncode\n```\n@ccweb-bot after the fence',
    '`code` @ccweb-bot `more code`',
    'a ``` b @ccweb-bot',
  ];
  for (const body of yes) {
    it(`mentions: ${JSON.stringify(body)}`, () => expect(mentionsBot(body, BOT)).toBe(true));
  }

  const no = [
    'no mention here',
    'ccweb-bot without the at',
    '@ccweb-botx is someone else',
    '@ccweb-bot-2 is someone else',
    '@ccweb-bot_x is someone else',
    '@ccweb-bot.example is a domain',
    'mail email@ccweb-bot please', // e-mail-like: the left side is a word, not a boundary
    'see https://gitea.example.com/@ccweb-bot',
    'escaped \\@ccweb-bot',
    '`@ccweb-bot` in inline code',
    '``a ` @ccweb-bot`` in a double-backtick span',
    '```\n@ccweb-bot in a fence\n```',
    '~~~\n@ccweb-bot in a tilde fence\n~~~',
    '```js\nconsole.log("@ccweb-bot")\n```',
    '````\n```\n@ccweb-bot inside a longer fence\n````',
    '```\nunclosed fence\n@ccweb-bot',
    '> @ccweb-bot quoted',
    '  > @ccweb-bot indented quote',
    '>> @ccweb-bot nested quote',
    'text\r\n> @ccweb-bot quoted with CRLF\r\nmore text',
    '@ccweb',
    '',
  ];
  for (const body of no) {
    it(`does not mention: ${JSON.stringify(body)}`, () => expect(mentionsBot(body, BOT)).toBe(false));
  }

  it('a code span does not cross a blank line', () => {
    expect(mentionsBot('`open\n\n@ccweb-bot help`', BOT)).toBe(true);
    expect(mentionsBot('`open\n@ccweb-bot help`', BOT)).toBe(false);
  });

  it('logins with regex metacharacters are matched literally', () => {
    expect(mentionsBot('@bot.v2 go', 'bot.v2')).toBe(true);
    expect(mentionsBot('@botxv2 go', 'bot.v2')).toBe(false);
  });

  it('visibleProse leaves out code, quotes, HTML and link texts', () => {
    expect(visibleProse('a `b` c\n> q\n```\nx\n```\nd <!-- e --> [f](http://x) g').replace(/\s+/g, ' ')).toBe('a c d g');
  });
});

describe('parseCommand', () => {
  it('no mention → null', () => {
    expect(parseCommand('hello', BOT)).toBeNull();
    expect(parseCommand('> @ccweb-bot stop', BOT)).toBeNull();
  });

  it('the first mention followed by the single word stop is a stop', () => {
    for (const body of ['@ccweb-bot stop', '@ccweb-bot STOP', '  @ccweb-bot   Stop.  ', 'Hey @ccweb-bot stop!', '@ccweb-bot\nstop']) {
      expect(parseCommand(body, BOT)).toEqual({ kind: 'stop' });
    }
  });

  it('anything else is an instruction carrying the whole body, untouched', () => {
    for (const body of [
      '@ccweb-bot stop the build from failing',
      '@ccweb-bot please stop',
      '@ccweb-bot stopping',
      '@ccweb-bot fix it\n@ccweb-bot stop',
      '> @ccweb-bot do x\n\n@ccweb-bot do y  ',
    ]) {
      expect(parseCommand(body, BOT)).toEqual({ kind: 'instruction', text: body });
    }
  });

  it('a quoted earlier mention does not hide a real stop', () => {
    expect(parseCommand('> @ccweb-bot fix the build\n\n@ccweb-bot stop', BOT)).toEqual({ kind: 'stop' });
  });
});
