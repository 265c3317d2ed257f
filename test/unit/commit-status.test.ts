// Which `ccweb` commit status the bot sets on the head it pushed, for each kind of task state:
// nothing before a push is published, pending while the task goes on, then how it ended.
import { describe, expect, it, onTestFinished, vi } from 'vitest';
import type { TaskEvent } from '../../machines/task-lifecycle.js';
import type { PublishRecord } from '../../src/domain/record-fields.js';
import type { TaskRecord } from '../../src/domain/records.js';
import { createCommitStatuses, wantedCommitStatus } from '../../src/receipts/commit-status.js';
import { taskActorId, taskKind } from '../../src/tasks/task-actor.js';
import { createTestRuntime } from '../support/test-runtime.js';

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
const task = (state: string, publish: PublishRecord | null = published) => ({ state: state as TaskRecord['state'], publish: publish ?? undefined });

describe('the commit status of a pushed head', () => {
  it('none before the push is published, or without a head', () => {
    expect(wantedCommitStatus(task('running', null))).toBeNull();
    expect(wantedCommitStatus(task('publishing', { ...published, status: 'pushing' }))).toBeNull();
    expect(wantedCommitStatus(task('verifying_reply', { ...published, headSha: null }))).toBeNull();
  });

  it('pending while the task goes on; success or failure once it ended', () => {
    for (const s of ['verifying_reply', 'retry_wait', 'running', 'aborting']) expect(wantedCommitStatus(task(s))).toMatchObject({ sha: 'abc123', state: 'pending' });
    for (const s of ['succeeded', 'succeeded_with_rest_fallback']) expect(wantedCommitStatus(task(s))?.state).toBe('success');
    for (const s of ['failed', 'failed_reply', 'cancelled', 'aborted']) expect(wantedCommitStatus(task(s))?.state).toBe('failure');
  });

  it('a head that got a status and was then left by a publish that failed gets the failure once the task ended', () => {
    const kept: PublishRecord = { ...published, status: 'kept', headSha: 'def456', commitStatus: { sha: 'abc123', state: 'pending' } };
    expect(wantedCommitStatus(task('running', kept))).toBeNull();
    expect(wantedCommitStatus(task('failed', kept))).toMatchObject({ sha: 'abc123', state: 'failure' });
    expect(wantedCommitStatus(task('failed', { ...kept, commitStatus: undefined }))).toBeNull();
  });
});

describe('the commit status worker', () => {
  it('sets the status of each transition once; a status Gitea refuses is set again after a while', async () => {
    const t = await createTestRuntime([taskKind()]);
    onTestFinished(() => t.close());
    const calls: string[] = [];
    let refuse = 1;
    // A test double for Gitea's status API only: it refuses the first final status (a fault the real Gitea gives only when down).
    const gitea = {
      createCommitStatus: async (owner: string, repo: string, sha: string, status: { state: string }) => {
        calls.push(`${owner}/${repo}@${sha}:${status.state}`);
        if (status.state === 'success' && refuse-- > 0) throw new Error('test: Gitea refused');
      },
    };
    const statuses = createCommitStatuses({ store: t.store, runtime: t.runtime, gitea });
    statuses.start();
    onTestFinished(() => statuses.stop());
    const events: TaskEvent[] = [{ type: 'ACCEPT' }, { type: 'CLAIM', leaseId: 'lease-1' }, { type: 'WORKSPACE_READY' }, { type: 'TURN_REPLIED' }];
    const created = await t.store.transact(async (tx) => {
      await tx.insert('tasks', 't1', { taskId: 't1', state: 'received', stateVersion: 0, owner: 'acme', repo: 'widget', publish: published });
      return t.runtime.createInTx(tx, 'task', taskActorId('t1'), { taskId: 't1' }, { taskId: 't1', events });
    });
    created.start();
    await vi.waitFor(async () => expect((await t.store.get<TaskRecord>('tasks', 't1'))?.publish?.commitStatus).toEqual({ sha: 'abc123', state: 'pending' }), { timeout: 5_000, interval: 50 });
    expect((await t.runtime.send(taskActorId('t1'), { type: 'REPLY_CONFIRMED' })).ok).toBe(true);
    await vi.waitFor(async () => expect((await t.store.get<TaskRecord>('tasks', 't1'))?.publish?.commitStatus).toEqual({ sha: 'abc123', state: 'success' }), { timeout: 10_000, interval: 100 });
    expect(calls).toEqual(['acme/widget@abc123:pending', 'acme/widget@abc123:success', 'acme/widget@abc123:success']);
  }, 20_000);
});
