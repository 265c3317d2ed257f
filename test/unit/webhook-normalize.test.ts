import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  commentTriggerKey,
  isSafeName,
  normalizeComment,
  taskIdFor,
  type NormalizedComment,
} from '../../src/webhook/normalize-comment.js';
import { loadFixture, mutatedDelivery, withoutHeader } from '../support/webhook-fixtures.js';

function ok(result: ReturnType<typeof normalizeComment>): NormalizedComment {
  if (!result.ok) throw new Error(`expected ok, got ${result.issues}`);
  return result.value;
}

function invalid(result: ReturnType<typeof normalizeComment>): string {
  expect(result.ok).toBe(false);
  if (result.ok) throw new Error('unreachable');
  expect(result.code).toBe('invalid_payload');
  return result.issues;
}

describe('normalizeComment on the shared fixtures', () => {
  it('issue comment → spec §6.1 structure', () => {
    const { body, headers } = loadFixture('issue_comment_created_on_issue');
    const value = ok(normalizeComment(headers, body));
    expect(value).toEqual({
      instanceId: 'default',
      deliveryId: 'e0069e33-1c7c-4042-8e2f-57c5a45cd1cc',
      deliveryKey: 'default:e0069e33-1c7c-4042-8e2f-57c5a45cd1cc',
      eventType: 'issue_comment',
      action: 'created',
      repo: {
        id: 1,
        owner: 'alice',
        name: 'widgets',
        fullName: 'alice/widgets',
        cloneUrl: 'https://gitea.example.com/alice/widgets.git',
        htmlUrl: 'https://gitea.example.com/alice/widgets',
        sshUrl: 'root@gitea.example.com:alice/widgets.git', // recorded from real Gitea running as root
        defaultBranch: 'main',
      },
      repoKey: 'default:alice/widgets',
      resource: {
        kind: 'issue',
        number: 7,
        title: 'Build fails on main after dependency bump',
        htmlUrl: 'https://gitea.example.com/alice/widgets/issues/7',
      },
      resourceKey: 'default:alice/widgets:issue:7',
      comment: {
        id: 3,
        body: '@ccweb-bot please fix the failing build on main',
        createdAt: '2026-12-01T11:12:17Z',
        updatedAt: '2026-12-01T11:12:17Z',
        htmlUrl: 'https://gitea.example.com/alice/widgets/issues/7#issuecomment-3',
      },
      // The sender's Gitea user id: compared with the comment's author on Gitea.
      actor: { login: 'bob', isBot: false, id: 3 },
      permissions: { admin: false, push: true, pull: true },
    });
    expect(value.refs).toBeUndefined();
  });

  it('PR comment → kind pull_request + refs from the pull_request object', () => {
    const { body, headers } = loadFixture('pull_request_comment_created');
    const value = ok(normalizeComment(headers, body));
    expect(value.eventType).toBe('pull_request_comment');
    expect(value.resource.kind).toBe('pull_request');
    expect(value.resource.number).toBe(8);
    expect(value.resourceKey).toBe('default:alice/widgets:pull_request:8');
    expect(value.refs).toEqual({
      base: 'main',
      head: 'fix/login-timeout',
      headSha: '7b8eba8838a6a170d482740c54c12932cb498c39',
    });
    // `<>&` arrive escaped as \u0026 in the bytes and decode to the characters.
    expect(value.comment.body).toBe('@ccweb-bot please fix the lint errors & the failing test');
  });

  it('PR comment from Gitea < 1.23 (no pull_request object) → no refs', () => {
    const d = mutatedDelivery('pull_request_comment_created', (p) => {
      delete p.pull_request;
    });
    const value = ok(normalizeComment(d.headers, d.body));
    expect(value.resource.kind).toBe('pull_request');
    expect(value.refs).toBeUndefined();
  });

  it('edited and bot fixtures normalise (filters decide later)', () => {
    const edited = loadFixture('issue_comment_edited');
    expect(ok(normalizeComment(edited.headers, edited.body)).action).toBe('edited');
    const bot = loadFixture('issue_comment_created_by_bot');
    const value = ok(normalizeComment(bot.headers, bot.body, { botLogin: 'CCWEB-BOT' }));
    expect(value.actor).toEqual({ login: 'ccweb-bot', isBot: true, id: 4 });
  });

  it('accepts a string or an already parsed value', () => {
    const { body, headers } = loadFixture('issue_comment_created_on_issue');
    const fromBuffer = ok(normalizeComment(headers, body));
    expect(ok(normalizeComment(headers, body.toString('utf8')))).toEqual(fromBuffer);
    expect(ok(normalizeComment(headers, JSON.parse(body.toString('utf8'))))).toEqual(fromBuffer);
  });

  it('unicode, RTL and bidi control characters are preserved exactly', () => {
    const text = '@ccweb-bot 请修复 — مرحبا بالعالم \u202Eevil\u202C \u2067iso\u2069 🚀 e\u0301 \u200B';
    const d = mutatedDelivery('issue_comment_created_on_issue', (p) => {
      p.comment.body = text;
    });
    expect(ok(normalizeComment(d.headers, d.body)).comment.body).toBe(text);
  });

  it('timestamps with an offset are converted to UTC', () => {
    const d = mutatedDelivery('issue_comment_created_on_issue', (p) => {
      p.comment.created_at = '2026-07-20T17:15:42+08:00';
    });
    expect(ok(normalizeComment(d.headers, d.body)).comment.createdAt).toBe('2026-07-20T09:15:42Z');
  });
});

describe('normalizeComment rejects with invalid_payload', () => {
  it('non-JSON, invalid UTF-8, and non-object bodies', () => {
    const { headers } = loadFixture('issue_comment_created_on_issue');
    invalid(normalizeComment(headers, Buffer.from('not json')));
    invalid(normalizeComment(headers, Buffer.from([0x7b, 0xff, 0x7d])));
    invalid(normalizeComment(headers, Buffer.from('[]')));
    invalid(normalizeComment(headers, Buffer.from('null')));
    invalid(normalizeComment(headers, Buffer.from('')));
  });

  it('missing X-Gitea-Delivery, X-Gitea-Event-Type, or a malformed delivery id', () => {
    const { body, headers } = loadFixture('issue_comment_created_on_issue');
    expect(invalid(normalizeComment(withoutHeader(headers, 'X-Gitea-Delivery'), body))).toMatch(/X-Gitea-Delivery/);
    expect(invalid(normalizeComment({ ...headers, 'X-Gitea-Delivery': '' }, body))).toMatch(/X-Gitea-Delivery/);
    expect(invalid(normalizeComment({ ...headers, 'X-Gitea-Delivery': '../../etc' }, body))).toMatch(/X-Gitea-Delivery/);
    expect(invalid(normalizeComment({ ...headers, 'X-Gitea-Delivery': 'a b' }, body))).toMatch(/X-Gitea-Delivery/);
    expect(invalid(normalizeComment(withoutHeader(headers, 'X-Gitea-Event-Type'), body))).toMatch(/Event-Type/);
    invalid(normalizeComment({ ...headers, 'X-Gitea-Event-Type': 'push' }, body));
  });

  it('an Event-Type header that contradicts the signed is_pull', () => {
    const issue = loadFixture('issue_comment_created_on_issue');
    invalid(normalizeComment({ ...issue.headers, 'X-Gitea-Event-Type': 'pull_request_comment' }, issue.body));
    const pr = loadFixture('pull_request_comment_created');
    invalid(normalizeComment({ ...pr.headers, 'X-Gitea-Event-Type': 'issue_comment' }, pr.body));
  });

  const requiredFields: Array<[string, (p: any) => void]> = [
    ['action', (p) => delete p.action],
    ['issue', (p) => delete p.issue],
    ['issue.number', (p) => delete p.issue.number],
    ['comment', (p) => delete p.comment],
    ['comment.id', (p) => delete p.comment.id],
    ['comment.body', (p) => delete p.comment.body],
    ['comment.created_at', (p) => delete p.comment.created_at],
    ['comment.updated_at', (p) => (p.comment.updated_at = 'yesterday')],
    ['comment.html_url', (p) => delete p.comment.html_url],
    ['repository', (p) => delete p.repository],
    ['repository.name', (p) => delete p.repository.name],
    ['repository.owner', (p) => delete p.repository.owner],
    ['repository.clone_url', (p) => delete p.repository.clone_url],
    ['repository.full_name', (p) => (p.repository.full_name = 'mallory/widgets')],
    ['sender', (p) => delete p.sender],
    ['sender.login', (p) => (p.sender.login = '')],
    ['is_pull', (p) => delete p.is_pull],
    ['issue.number (string)', (p) => (p.issue.number = '7')],
    ['comment.id (negative)', (p) => (p.comment.id = -1)],
  ];
  for (const [label, mutate] of requiredFields) {
    it(`missing or bad ${label}`, () => {
      const d = mutatedDelivery('issue_comment_created_on_issue', mutate);
      invalid(normalizeComment(d.headers, d.body));
    });
  }

  it('a malformed pull_request object on a PR comment', () => {
    const d = mutatedDelivery('pull_request_comment_created', (p) => {
      p.pull_request.head.sha = 'not-a-sha';
    });
    invalid(normalizeComment(d.headers, d.body));
    const e = mutatedDelivery('pull_request_comment_created', (p) => {
      p.pull_request.number = 9;
    });
    invalid(normalizeComment(e.headers, e.body));
  });

  const unsafe = ['..', '.', 'a/b', 'a\\b', 'a\u0000b', 'a\nb', 'a\u007fb', '', '-rf', 'a..b', ' widgets', 'wïdgets'];
  for (const name of unsafe) {
    it(`repository name ${JSON.stringify(name)} could escape a path`, () => {
      const d = mutatedDelivery('issue_comment_created_on_issue', (p) => {
        p.repository.name = name;
        p.repository.full_name = `alice/${name}`;
      });
      invalid(normalizeComment(d.headers, d.body));
    });
    it(`owner name ${JSON.stringify(name)} could escape a path`, () => {
      const d = mutatedDelivery('issue_comment_created_on_issue', (p) => {
        p.repository.owner.login = name;
        p.repository.full_name = `${name}/widgets`;
      });
      invalid(normalizeComment(d.headers, d.body));
    });
  }

  it('isSafeName accepts real Gitea names', () => {
    for (const name of ['widgets', 'my-repo', 'my_repo', 'repo.js', '.profile', '.github', 'A1']) {
      expect(isSafeName(name)).toBe(true);
    }
  });
});

describe('keys', () => {
  it('taskIdFor = gitea-task- + first 24 hex of sha256(deliveryKey), stable', () => {
    const key = 'default:1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b';
    const expected = 'gitea-task-' + createHash('sha256').update(key).digest('hex').slice(0, 24);
    expect(taskIdFor(key)).toBe(expected);
    expect(taskIdFor(key)).toMatch(/^gitea-task-[0-9a-f]{24}$/);
    expect(taskIdFor('default:other')).not.toBe(expected);
  });

  it('commentTriggerKey is the same for a Replay (new delivery id, same body) and differs for an edit', () => {
    const { body, headers } = loadFixture('issue_comment_created_on_issue');
    const first = ok(normalizeComment(headers, body));
    const replay = ok(normalizeComment({ ...headers, 'X-Gitea-Delivery': '0d2f1c5e-0000-4000-8000-000000000001' }, body));
    expect(replay.deliveryKey).not.toBe(first.deliveryKey);
    expect(commentTriggerKey(replay)).toBe(commentTriggerKey(first));
    expect(commentTriggerKey(first)).toBe('default:alice/widgets:comment:3:created:2026-12-01T11:12:17Z');
    const edited = loadFixture('issue_comment_edited');
    expect(commentTriggerKey(ok(normalizeComment(edited.headers, edited.body)))).not.toBe(commentTriggerKey(first));
  });
});
