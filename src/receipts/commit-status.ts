/**
 * The bot's own commit status (`ccweb`) on every head it pushed: pending while its task goes on,
 * success or failure when the task ends, linked to the task's receipt. Branch protection can then
 * require "the agent's run finished", and Gitea shows an honest failure on the commit. Posted by the
 * node that owns the task's repository, after each transition of a task with a pushed head; what was
 * posted is kept on the task (`publish.status`), so a status is posted once per state it shows.
 * A status Gitea refuses is logged and tried again at the next transition: it never fails the task.
 */
import { stateIsFinal } from '../../machines/state-nodes.js';
import { TASK_KIND } from '../tasks/task-actor.js';
import { taskMachine, taskStateHas } from '../../machines/task-lifecycle.js';
import type { CommentRecord, TaskRecord } from '../domain/records.js';
import { EVERY_REPOSITORY, type RepositoryScope } from '../domain/repository-scope.js';
import type { CommitStatusInput, GiteaClient } from '../gitea/gitea-client.js';
import type { ActorRuntime } from '../runtime/actor-runtime.js';
import type { Store } from '../store/types.js';
import { createCommentWorker } from './comment-worker.js';
import { receiptCommentKey } from './receipt-record.js';
import { commentWebUrl } from './receipt-progress.js';

export const COMMIT_STATUS_CONTEXT = 'ccweb';

/** The status the task's pushed head should show now, with the commit it goes on; null before a push. */
export function wantedCommitStatus(task: Pick<TaskRecord, 'state' | 'publish' | 'owner' | 'repo'>): { owner: string; repo: string; sha: string; state: CommitStatusInput['state']; description: string } | null {
  const pub = task.publish;
  if (!pub || pub.status !== 'published' || !pub.headSha) return null;
  // A fork's head lives in the fork: its statuses are the fork's.
  const [owner, repo] = pub.repository ? (pub.repository.split('/') as [string, string]) : [task.owner, task.repo];
  if (!stateIsFinal(taskMachine, task.state)) return { owner, repo, sha: pub.headSha, state: 'pending', description: 'the agent is still working on this task' };
  return taskStateHas(task.state, 'failureReceipt')
    ? { owner, repo, sha: pub.headSha, state: 'failure', description: 'the agent\'s task did not finish: see its receipt' }
    : { owner, repo, sha: pub.headSha, state: 'success', description: 'the agent\'s task finished' };
}

export interface CommitStatusesOptions {
  store: Store;
  runtime: Pick<ActorRuntime, 'onTransition'>;
  gitea: Pick<GiteaClient, 'createCommitStatus'>;
  scope?: Pick<RepositoryScope, 'owns'>;
  logger?: (msg: string, fields: Record<string, unknown>) => void;
}

export function createCommitStatuses(options: CommitStatusesOptions): { start(): void; stop(): void } {
  const { store, gitea } = options;
  const scope = options.scope ?? EVERY_REPOSITORY;
  const log = options.logger ?? (() => undefined);
  const open = new Set<string>();

  async function visit(taskId: string): Promise<void> {
    const task = await store.get<TaskRecord>('tasks', taskId);
    if (!task || !scope.owns(task.repoKey)) return;
    const wanted = wantedCommitStatus(task);
    const posted = task.publish?.status === 'published' ? task.publish.commitStatus : undefined;
    if (!wanted || (posted?.sha === wanted.sha && posted.state === wanted.state)) return;
    const receipt = await store.get<CommentRecord>('comments', receiptCommentKey(taskId, 'received'));
    const targetUrl = receipt?.commentId != null ? commentWebUrl(task, receipt.commentId) : null;
    try {
      await gitea.createCommitStatus(wanted.owner, wanted.repo, wanted.sha, { state: wanted.state, context: COMMIT_STATUS_CONTEXT, description: wanted.description, targetUrl });
    } catch (error) {
      log('commit status not set; tried again at the task\'s next transition', { taskId, sha: wanted.sha, state: wanted.state, error: error instanceof Error ? error.message : String(error) });
      return;
    }
    await store.transact(async (tx) => {
      const cur = await tx.get<TaskRecord>('tasks', taskId);
      if (!cur?.publish) return;
      await tx.put<TaskRecord>('tasks', taskId, { ...cur, publish: { ...cur.publish, commitStatus: { sha: wanted.sha, state: wanted.state } } });
      await tx.appendAudit({ action: 'publish.commit_status', actor: 'system:commit_status', taskId, metadata: { sha: wanted.sha, state: wanted.state, repository: `${wanted.owner}/${wanted.repo}` } });
    });
  }

  async function pass(): Promise<void> {
    for (const taskId of [...open]) {
      if (worker.stopped) return;
      open.delete(taskId);
      await visit(taskId).catch((error: unknown) => log('commit status pass failed', { taskId, error: error instanceof Error ? error.message : String(error) }));
    }
  }

  const worker = createCommentWorker(
    options.runtime,
    pass,
    (n) => {
      const taskId = n.kind === TASK_KIND ? (n.taskId ?? (n.context as { taskId?: string } | null)?.taskId) : undefined;
      if (!taskId || worker.stopped) return;
      open.add(taskId);
      worker.kick();
    },
    (error) => log('commit status pass failed', { error: String(error) }),
  );

  return { start: () => worker.listen(), stop: () => worker.stop() };
}
