// The nested shapes the stored records carry, written by publish/, receipts/, retention/ and
// messages/. Here, with the records, so that a record type says what it holds and
// domain/records.ts names every field without importing a part (the platform imports no part); the
// parts import them from here.

import type { DiffSize } from './usage-records.js';

/** How a finished change is delivered (CCWEB_DELIVERY_MODE). */
export type DeliveryMode = 'pull_request' | 'branch' | 'off';

/** `TaskRecord.publish`: what the publisher did with the task's change (src/publish/). */
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
  /**
   * The size of the change those commits make (from their merge base to the pushed head), measured
   * before the push; counted once in usage when the publish is verified. Absent on older records.
   */
  diff?: DiffSize | null;
  pullRequest: { number: number; url: string } | null;
  /** Where an unpublished change is kept. */
  kept: { branch: string; patchFile: string } | null;
  /** Paths the publisher refused to commit (CI definitions), kept apart; the rest was published. */
  withheld?: { paths: string[]; branch: string; patchFile: string } | null;
  errorCode: string | null;
  message: string | null;
  /** The bot's `ccweb` commit status last set on `headSha` (src/receipts/commit-status.ts). */
  commitStatus?: { sha: string; state: 'pending' | 'success' | 'failure' | 'error' };
  updatedAt: string;
}

/** `TaskRecord.lastGitError`: the last failed clone/fetch, redacted and bounded (src/executor/). */
export interface GitErrorNote {
  code: string;
  message: string;
  at: string;
}

/** The keys of the records archived with a task, per collection (src/retention/task-archiver.ts). */
export interface ArchivedRecordKeys {
  turns: string[];
  comments: string[];
  actors: string[];
  webhook_deliveries: string[];
  comment_triggers: string[];
}

/** `TaskRecord.archive`: when the task was archived, and what was archived with it. */
export interface TaskArchiveInfo {
  at: string;
  records: ArchivedRecordKeys;
}

/** `CommentRecord.quota`: the daily quota a refused mention was over (src/usage/quota-check.ts). */
export interface QuotaNotice {
  code: string;
  limit: number;
  used: number;
  retryAt: string;
}

/** `CommentRecord.inputTooLarge`: a refused mention's length and the limit it was over. */
export interface InputTooLargeNotice {
  chars: number;
  limit: number;
}

/** A stage of a task as its receipt shows it. */
export type ProgressStage = 'queued' | 'preparing' | 'working' | 'waiting_user' | 'retry_wait' | 'blocked' | 'publishing' | 'verifying' | 'stopping' | 'done' | 'failed' | 'cancelled';

/** `CommentRecord.progress` of a receipt: its last edit (src/receipts/receipt-progress-worker.ts). */
export interface ProgressMemo {
  /** The stage and body hash of the last edit Gitea took, and when. */
  stage: ProgressStage;
  bodyHash: string;
  at: string;
}
