import type { TaskRecord } from '../domain/records.js';
import type { Store } from '../store/types.js';
import type { GitLogger } from '../workspace/run-git.js';
import type { GiteaPullsClient } from './gitea-pulls.js';

export type DeliveryMode = 'pull_request' | 'branch' | 'off';

/** What the task record carries about its delivery (`task.publish`), shown in the task detail. */
export interface PublishRecord {
  status: 'pushing' | 'published' | 'nothing_to_publish' | 'not_published' | 'kept';
  mode: DeliveryMode;
  /** The remote branch the change goes to. */
  branch: string | null;
  /** The repository of that branch when it is not the task's own: a fork (`owner/name`). */
  repository?: string | null;
  /** The head this task pushed (or is about to push). */
  headSha: string | null;
  /** Commits this task brought onto the branch, oldest first. */
  commits: string[];
  pullRequest: { number: number; url: string } | null;
  /** Where an unpublished change is kept. */
  kept: { branch: string; patchFile: string } | null;
  /** Paths the publisher refused to commit (CI definitions), kept apart; the rest was published. */
  withheld?: { paths: string[]; branch: string; patchFile: string } | null;
  errorCode: string | null;
  message: string | null;
  updatedAt: string;
}

export type PublishOutcome =
  | { ok: true; record: PublishRecord }
  | { ok: false; errorCode: string; message: string; record: PublishRecord | null };

export interface PublisherOptions {
  store: Store;
  gitea: GiteaPullsClient;
  token: string;
  botLogin: string;
  giteaUrl: string;
  workspaceRoot: string;
  /** Where patches of unpublished changes go (`<dataDir>/patches`). */
  patchDir: string;
  mode?: DeliveryMode;
  branchPrefix?: string;
  instanceId?: string;
  gitTimeoutMs?: number;
  /** How long to wait for Gitea to show a pushed branch / a pull request's new head. */
  settleTimeoutMs?: number;
  logger?: GitLogger;
  log?: (msg: string, fields: Record<string, unknown>) => void;
  now?: () => Date;
  /** Counts outcomes for /metrics. */
  onOutcome?: (outcome: string) => void;
}

export interface Publisher {
  /** Publishes what the task's worktree holds; idempotent; safe to call again after any crash. */
  publish(taskId: string, options?: { summary?: string | null; signal?: AbortSignal }): Promise<PublishOutcome>;
  /** The worktree a task's agent works in. */
  worktreePathFor(task: TaskRecord): string;
}

/** A publish step that failed, with the error code the task and its receipt carry. */
export class PublishError extends Error {
  constructor(
    readonly errorCode: string,
    message: string,
  ) {
    super(message);
  }
}
