import type { AuditEvent, StoredRecord } from '../types.js';

export interface AcceptedCommentV1 {
  /** First audit seq reserved for this record (set by the store transaction). */
  a0: number;
  at: string;
  receivedAt: string;
  expiresAt: string;
  deliveryKey: string;
  deliveryId: string;
  eventType: string;
  payloadHash: string;
  taskId: string;
  triggerKey: string;
  /** Audit actor, e.g. `gitea:user:bob`. */
  by: string;
  task: {
    repoKey: string;
    resourceKey: string;
    kind: string;
    number: number;
    owner: string;
    repo: string;
    commentId: number;
    commentUrl: string;
    author: string;
    instruction: string;
    refs: unknown;
  };
  /** Present when this comment registers its repository. */
  repository: { instanceId: string; repoId: number; cloneUrl: string; defaultBranch: string; workspacePath: string } | null;
  /** Present when this comment opens its resource's session. */
  session: { hostRef: string } | null;
}

export type ExpandedOp = ['c' | 'p', string, string, StoredRecord] | ['a', AuditEvent];

export declare const NAME: 'intake.accept/1';
export declare const TASK_MACHINE_VERSION: number;
export declare function expand(p: AcceptedCommentV1): ExpandedOp[];
export declare function queuedSnapshot(taskId: string): Record<string, unknown>;
