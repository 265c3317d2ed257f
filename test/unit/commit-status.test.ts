// Which `ccweb` commit status the bot sets on the head it pushed, for each kind of task state:
// nothing before a push is published, pending while the task goes on, then how it ended.
import { describe, expect, it } from 'vitest';
import type { PublishRecord } from '../../src/domain/record-fields.js';
import type { TaskRecord } from '../../src/domain/records.js';
import { wantedCommitStatus } from '../../src/receipts/commit-status.js';

const published: PublishRecord = {
  status: 'published',
  mode: 'pull_request',
  branch: 'ccweb/issue-1',
  headSha: 'abc123',
  commits: ['abc123'],
  pullRequest: { number: 2, url: 'http://127.0.0.1/pulls/2' },
  kept: null,
  errorCode: null,
  message: null,
  updatedAt: '2026-12-07T00:00:00.000Z',
};
const task = (state: string, publish: PublishRecord | null = published) => ({ state: state as TaskRecord['state'], publish: publish ?? undefined, owner: 'acme', repo: 'widget' });

describe('the commit status of a pushed head', () => {
  it('none before the push is published, or without a head', () => {
    expect(wantedCommitStatus(task('running', null))).toBeNull();
    expect(wantedCommitStatus(task('publishing', { ...published, status: 'pushing' }))).toBeNull();
    expect(wantedCommitStatus(task('verifying_reply', { ...published, headSha: null }))).toBeNull();
  });

  it('pending while the task goes on; success or failure once it ended', () => {
    for (const s of ['verifying_reply', 'retry_wait', 'running', 'aborting']) expect(wantedCommitStatus(task(s))).toMatchObject({ owner: 'acme', repo: 'widget', sha: 'abc123', state: 'pending' });
    for (const s of ['succeeded', 'succeeded_with_rest_fallback']) expect(wantedCommitStatus(task(s))?.state).toBe('success');
    for (const s of ['failed', 'failed_reply', 'cancelled', 'aborted']) expect(wantedCommitStatus(task(s))?.state).toBe('failure');
  });

  it("a fork's head gets its status in the fork", () => {
    expect(wantedCommitStatus(task('succeeded', { ...published, repository: 'bob/widget-fork' }))).toMatchObject({ owner: 'bob', repo: 'widget-fork', state: 'success' });
  });
});
