// The compact accepted-comment record intake journals (accepted-comment.ts): what it carries, and
// when a comment fits the format at all.
import { describe, expect, it } from 'vitest';
import { acceptedCommentRecord, fitsAcceptedComment } from '../../src/intake/accepted-comment.js';
import { INLINE_TEXT_LIMIT } from '../../src/tasks/task-texts.js';
import type { NormalizedComment } from '../../src/webhook/normalize-comment.js';

const comment = (body: string, refs?: NormalizedComment['refs']): NormalizedComment =>
  ({
    instanceId: 'default',
    repoKey: 'default:o/r',
    resourceKey: 'default:o/r:pull:3',
    resource: { kind: 'pull', number: 3 },
    repo: { id: 9, owner: 'o', name: 'r', cloneUrl: 'https://g/o/r.git', defaultBranch: 'main' },
    comment: { id: 77, body, htmlUrl: 'https://g/o/r/pulls/3#c77' },
    actor: { login: 'bob' },
    ...(refs ? { refs } : {}),
  }) as unknown as NormalizedComment;

const input = (c: NormalizedComment, first: boolean) => ({
  comment: c,
  deliveryKey: 'default:d1',
  deliveryId: 'd1',
  eventType: 'issue_comment',
  payloadHash: 'sha256:ab',
  receivedAt: new Date('2026-01-01T00:00:00.000Z'),
  retentionMs: 86_400_000,
  taskId: 'gitea-task-1',
  triggerKey: 't1',
  at: new Date('2026-01-01T00:00:00.005Z'),
  newRepository: first ? { workspacePath: '/w/o/r' } : null,
  newSession: first ? { hostRef: 'gitea-main' } : null,
});

describe('acceptedCommentRecord', () => {
  it('carries the task fields, the audit actor, the delivery expiry, and what is new', () => {
    const refs = { base: 'main', head: 'feature', headSha: 'abc' };
    const r = acceptedCommentRecord(input(comment('@bot fix', refs), true));
    expect(r).toMatchObject({
      at: '2026-01-01T00:00:00.005Z',
      receivedAt: '2026-01-01T00:00:00.000Z',
      expiresAt: '2026-01-02T00:00:00.000Z',
      by: 'gitea:user:bob',
      task: { repoKey: 'default:o/r', resourceKey: 'default:o/r:pull:3', kind: 'pull', number: 3, owner: 'o', repo: 'r', commentId: 77, author: 'bob', instruction: '@bot fix', refs },
      repository: { instanceId: 'default', repoId: 9, cloneUrl: 'https://g/o/r.git', defaultBranch: 'main', workspacePath: '/w/o/r' },
      session: { hostRef: 'gitea-main' },
    });
    expect(r.task.refs).not.toBe(refs);
    expect(r).not.toHaveProperty('a0');
  });

  it('no repository or session when they exist; null refs without a pull request', () => {
    const r = acceptedCommentRecord(input(comment('@bot fix'), false));
    expect(r.repository).toBeNull();
    expect(r.session).toBeNull();
    expect(r.task.refs).toBeNull();
  });
});

describe('fitsAcceptedComment', () => {
  it('a text the task record keeps inline fits; a longer one (stored once in task_texts) does not', () => {
    expect(fitsAcceptedComment(comment('x'.repeat(INLINE_TEXT_LIMIT)))).toBe(true);
    expect(fitsAcceptedComment(comment('x'.repeat(INLINE_TEXT_LIMIT + 1)))).toBe(false);
  });
});
