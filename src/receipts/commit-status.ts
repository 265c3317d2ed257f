/**
 * The bot's own commit status (`ccweb`) on the head it pushed: pending while its task goes on,
 * success or failure when the task ends, linked to the task's receipt. Branch protection can then
 * require "the agent's run finished", and Gitea shows an honest failure on the commit. Set in the
 * task's repository (Gitea reads a pull request's statuses, and its required ones, from the base
 * repository, which holds a fork's head too) after each transition this node commits; what was set
 * is kept on the task (`publish.commitStatus`), so each state is set once. A status Gitea refuses is
 * tried again with a backoff; it never fails the task.
 */
import { stateIsFinal } from '../../machines/state-nodes.js';
import { taskMachine, taskStateHas } from '../../machines/task-lifecycle.js';
import type { CommentRecord, TaskRecord } from '../domain/records.js';
import type { CommitStatusInput, GiteaClient } from '../gitea/gitea-client.js';
import type { ActorRuntime } from '../runtime/actor-runtime.js';
import type { Store } from '../store/types.js';
import { TASK_KIND } from '../tasks/task-actor.js';
import { createCommentWorker } from './comment-worker.js';
import { receiptCommentKey } from './receipt-record.js';
import { commentWebUrl } from './receipt-progress.js';

export const COMMIT_STATUS_CONTEXT = 'ccweb';
/** Waits before setting a refused status again, then the last one for every try after. */
const RETRY_DELAYS_MS = [5_000, 30_000, 120_000, 600_000];
const MAX_TRIES = 8;

type WantedStatus = { sha: string; state: CommitStatusInput['state']; description: string };

/**
 * The status the task's head should show now; null when there is none to set. The head is the
 * published one; once the task ended it is also the head a status was already set on (a later
 * publish of the task that failed leaves that head its pull request's head: it gets the failure).
 */
export function wantedCommitStatus(task: Pick<TaskRecord, 'state' | 'publish'>): WantedStatus | null {
  const pub = task.publish;
  const final = stateIsFinal(taskMachine, task.state);
  const sha = pub?.status === 'published' && pub.headSha ? pub.headSha : final ? pub?.commitStatus?.sha : undefined;
  if (!sha) return null;
  if (!final) return { sha, state: 'pending', description: 'the agent is still working on this task' };
  return taskStateHas(task.state, 'failureReceipt') || pub?.status !== 'published'
    ? { sha, state: 'failure', description: "the agent's task did not finish: see its receipt" }
    : { sha, state: 'success', description: "the agent's task finished" };
}

const sameStatus = (a: { sha: string; state: string } | null | undefined, b: { sha: string; state: string } | null | undefined) => a?.sha === b?.sha && a?.state === b?.state;

export interface CommitStatusesOptions {
  store: Store;
  runtime: Pick<ActorRuntime, 'onTransition'>;
  gitea: Pick<GiteaClient, 'createCommitStatus'>;
  logger?: (msg: string, fields: Record<string, unknown>) => void;
}

export function createCommitStatuses(options: CommitStatusesOptions): { start(): void; stop(): void } {
  const { store, gitea } = options;
  const log = options.logger ?? (() => undefined);
  const open = new Set<string>();
  const tries = new Map<string, number>();

  /** Sets the task's wanted status if it is not set yet; false when it is to be tried again. */
  async function visit(taskId: string): Promise<boolean> {
    const task = await store.get<TaskRecord>('tasks', taskId);
    const wanted = task ? wantedCommitStatus(task) : null;
    if (!task || !wanted || sameStatus(task.publish?.commitStatus, wanted)) return true;
    const receipt = await store.get<CommentRecord>('comments', receiptCommentKey(taskId, 'received'));
    const targetUrl = receipt?.commentId != null ? commentWebUrl(task, receipt.commentId) : null;
    try {
      await gitea.createCommitStatus(task.owner, task.repo, wanted.sha, { state: wanted.state, context: COMMIT_STATUS_CONTEXT, description: wanted.description, targetUrl });
    } catch (error) {
      log('commit status not set; tried again later', { taskId, sha: wanted.sha, state: wanted.state, error: error instanceof Error ? error.message : String(error) });
      return false;
    }
    return store.transact(async (tx) => {
      const cur = await tx.get<TaskRecord>('tasks', taskId);
      // The task moved on while the status was set (another node's transition): set what it asks now.
      if (!cur?.publish || !sameStatus(wantedCommitStatus(cur), wanted)) return false;
      await tx.put<TaskRecord>('tasks', taskId, { ...cur, publish: { ...cur.publish, commitStatus: { sha: wanted.sha, state: wanted.state } } });
      await tx.appendAudit({ action: 'publish.commit_status', actor: 'system:commit_status', taskId, metadata: { sha: wanted.sha, state: wanted.state } });
      return true;
    });
  }

  async function pass(): Promise<void> {
    for (const taskId of [...open]) {
      if (worker.stopped) return;
      open.delete(taskId);
      const done = await visit(taskId).catch((error: unknown) => {
        log('commit status pass failed', { taskId, error: error instanceof Error ? error.message : String(error) });
        return false;
      });
      if (done) {
        tries.delete(taskId);
        continue;
      }
      const n = (tries.get(taskId) ?? 0) + 1;
      if (n >= MAX_TRIES) {
        tries.delete(taskId);
        continue;
      }
      tries.set(taskId, n);
      open.add(taskId);
      worker.timers.schedule(RETRY_DELAYS_MS[Math.min(n, RETRY_DELAYS_MS.length) - 1]!);
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
