import type { DeliveryMode, PublishRecord } from '../domain/record-fields.js';
import type { TaskRecord } from '../domain/records.js';
import type { Store, Tx } from '../store/types.js';
import type { GitLogger } from '../workspace/run-git.js';
import type { GiteaPullsClient } from './gitea-pulls.js';

// Declared with the task record: `task.publish` is a field of it.
export type { DeliveryMode, PublishRecord };

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
  /** `fence`: checked in every record the publish writes for the task (the caller's lease is still current). */
  publish(taskId: string, options?: { summary?: string | null; signal?: AbortSignal; fence?: (tx: Tx) => Promise<void> }): Promise<PublishOutcome>;
  /** The worktree a task's agent works in. */
  worktreePathFor(task: TaskRecord): Promise<string>;
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
