// The stored records of spec §4: field names are the cross-module contract. Times are ISO-8601 UTC
// strings; enums are lower snake_case. Store keys are given with each collection. Each type names
// every field any writer stores, and nothing else (no index signature, so a field written
// or read under another name is a type error, not a silent `unknown`).
import type { TaskState } from '../../machines/task-lifecycle.js';
import type { CollectionName } from '../store/types.js';
import type { TaskUsage, TurnUsage } from './usage-records.js';
import type { ReviewContext } from './review-input.js';
import type { GitErrorNote, InputTooLargeNotice, ProgressMemo, PublishRecord, QuotaNotice, TaskArchiveInfo } from './record-fields.js';

/** `webhook_deliveries`, key = deliveryKey (`default:<X-Gitea-Delivery>`). §4.1 */
export interface DeliveryRecord {
  deliveryKey: string;
  deliveryId: string;
  eventType: string;
  receivedAt: string;
  signatureValid: boolean;
  normalized: boolean;
  taskId: string | null;
  status: 'accepted' | 'ignored' | 'duplicate' | 'rejected';
  /** Why it was ignored/rejected/duplicate (stable snake_case code). */
  reason: string | null;
  payloadHash: string;
  /** The HTTP answer given the first time, returned again for a repeat of the same delivery. */
  response: { status: number; body: Record<string, unknown> };
  expiresAt: string;
}

/** `comment_triggers`, key = `<repoKey>:comment:<id>:<action>:<updatedAt>`: Replay (new UUID, same body) dedup. */
export interface CommentTriggerRecord {
  triggerKey: string;
  deliveryKey: string;
  taskId: string | null;
  createdAt: string;
}

/** `repositories`, key = repoKey. §4.2 (`version` is the CAS field). */
export interface RepositoryRecord {
  repoKey: string;
  instanceId: string;
  owner: string;
  name: string;
  cloneUrl: string;
  workspacePath: string;
  defaultBranch: string;
  /** Gitea's repository id: renames and transfers are followed by it. Absent on records stored by versions that did not record it. */
  repoId?: number;
  /** `owner/name` on Gitea now, once the executor saw the repository moved (src/executor/); absent until then. */
  currentFullName?: string;
  status: 'active' | 'disabled' | 'blocked';
  /** Tool groups the agent may use here beyond reading and answering (src/mcp-gate/gate-policy.ts EXTRA_GROUPS). */
  agentToolGroups?: string[];
  /**
   * What the publisher may commit here (src/publish/protected-paths.ts; POST /repos/:repoKey/publish-paths):
   * CI definitions only with allowCiChanges, the operator's protectedPaths never. Absent: the defaults.
   */
  publishPaths?: { allowCiChanges: boolean; protectedPaths: string[] };
  /**
   * Whether a writer's "request changes" review on a pull request the bot opened starts a task without
   * a mention (POST /repos/:repoKey/review-triggers). Absent: off.
   */
  reviewTriggers?: { requestChanges: boolean };
  /**
   * Whether a mention by someone without write access gets the thread's one notice of the day that
   * only people with write access can ask the bot (POST /repos/:repoKey/reader-notices). Absent: on.
   */
  readerNotices?: { enabled: boolean };
  registeredAt: string;
  lastFetchAt: string | null;
  version: number;
}

/** `sessions`, key = sessionKey (= resourceKey). §4.3 */
export interface SessionRecord {
  sessionKey: string;
  resourceKey: string;
  repoKey: string;
  kind: 'issue' | 'pull_request';
  number: number;
  threadId: string | null;
  runtime: { app: 'codexapp'; mode: 'yolo' };
  mcp: { server: 'gitea'; transport: 'stdio'; hostRef: string };
  status: 'active' | 'waiting_user' | 'closed';
  /** Several nodes: the node whose CODEX_HOME holds the thread (it started or last resumed it). */
  threadNode?: string;
  lastTaskId: string | null;
  lastTurnId: string | null;
  createdAt: string;
  updatedAt: string;
  version: number;
}

/** `tasks`, key = taskId. §4.4 — the mirror fields are rewritten by the task actor's projection. */
export interface TaskRecord {
  taskId: string;
  deliveryKey: string;
  deliveryId: string;
  repoKey: string;
  resourceKey: string;
  sessionKey: string;
  resource: { kind: 'issue' | 'pull_request'; number: number };
  owner: string;
  repo: string;
  commentId: number;
  commentUrl: string;
  author: string;
  /** The comment body, untouched (or its first INLINE_TEXT_LIMIT characters, see the fields below). Untrusted data. */
  instruction: string;
  /** A long instruction is stored once in `task_texts` under this key (src/tasks/task-texts.ts). */
  instructionRef?: string;
  /** The whole instruction's length, when `instruction` holds only part of it. */
  instructionLength?: number;
  /** A mention that never runs keeps only an excerpt (`instruction`), its length and this hash. */
  instructionExcerptOnly?: true;
  /** `sha256:<hex>` of the whole instruction, with `instructionExcerptOnly`. */
  instructionSha256?: string;
  /**
   * Replies after the task asked the user something (`waiting_user`); the last one is the next turn's
   * input. Untrusted. A long body is stored once in `task_texts` under `bodyRef`.
   */
  followUps?: Array<{ commentId: number; author: string; body: string; commentUrl: string; deliveryKey: string; at: string; bodyRef?: string }>;
  refs: { base: string; head: string; headSha: string } | null;
  /** A line comment or a review: what it is and where its lines are; the text is in `instruction`. */
  review?: ReviewContext;
  state: TaskState;
  attempt: number;
  replyAttempt: number;
  threadId: string | null;
  turnId: string | null;
  leaseId: string | null;
  nextRetryAt: string | null;
  errorCode: string | null;
  mcpFailureReason: string | null;
  stoppedBy: string | null;
  /** Arrival order: the store's monotonic sequence at intake, for FIFO per repository. */
  queueSeq: number;
  /** Several nodes: the node whose intake accepted the task (the scheduler's claim preference). */
  acceptedBy?: string;
  /** Tokens, turns, wall time and diff size so far (src/usage/); absent before the first turn ended. */
  usage?: TaskUsage;
  /** What the publisher did with the change (src/publish/); absent before it ran. */
  publish?: PublishRecord;
  /** The last failed clone/fetch, redacted and bounded, for the task detail. */
  lastGitError?: GitErrorNote;
  /** Set when the task was archived with its records (src/retention/task-archiver.ts). */
  archive?: TaskArchiveInfo;
  createdAt: string;
  updatedAt: string;
  stateVersion: number;
}

/** The agent's call of the comment tool in a turn, as found in its items (src/sessions/turn-outcome.ts). */
export interface CommentCall {
  tool: string;
  index: number | null;
  accepted: boolean;
  error: string | null;
}

/** `turns`, key = turnKey (`<taskId>:<attemptKey>`). §4.5 */
export interface TurnRecord {
  turnKey: string;
  /** Codex's turn id, known once `turn/start` answered. */
  turnId: string | null;
  taskId: string;
  threadId: string;
  kind: 'normal' | 'reply_retry';
  status: 'started' | 'completed' | 'interrupted' | 'failed' | 'cancelled';
  eventSeq: number;
  /** The correlation marker the reply must carry (§6.4). */
  marker: string;
  finalMessage: string | null;
  /**
   * The question the turn ended asking the user (`waiting_user`), without the waiting line; absent
   * otherwise. Verified on Gitea like an answer; the REST fallback posts this text, not the final message.
   */
  question?: string | null;
  commentCall: CommentCall | null;
  startedAt: string;
  completedAt: string | null;
  /** What the turn used (src/usage/); absent on turns recorded before usage accounting. */
  usage?: TurnUsage;
}

/** `comments`, key = commentKey (`<taskId>:status:<state>` for receipts, `<turnKey>:reply` for answers). §4.5 */
export interface CommentRecord {
  commentKey: string;
  taskId: string;
  /** `notice`: an edit of the task's `received` receipt (src/receipts/receipt-notice.ts), not a comment of its own. */
  kind: 'status' | 'mcp_final' | 'rest_fallback' | 'notice';
  resourceKey: string;
  turnId: string | null;
  commentId: number | null;
  /** The comment's page on Gitea (`html_url`), when known: the admin page links to it. */
  htmlUrl?: string | null;
  marker: string;
  bodyHash: string;
  status: 'pending' | 'sent' | 'confirmed' | 'failed';
  errorCode: string | null;
  /** A `notice` row: why it was written (`blocked_workspace`, `resumed`, a budget code) and its text. */
  reason?: string;
  text?: string;
  /** A `refused` receipt says which refusal, by the one of these five it carries (receipt-decisions.ts). */
  quota?: QuotaNotice;
  inputTooLarge?: InputTooLargeNotice;
  nothingToStop?: true;
  repositoryDisabled?: true;
  /** A mention by someone without write access: the thread's one notice of the day that only writers can ask. */
  readerNotice?: true;
  /** The `received` receipt as a tracking comment: its last edit; `final` once the outcome is shown. */
  progress?: ProgressMemo & { final?: boolean };
  /** The process that wrote the last send intent (a lease owner id) and when: its POST may still be on its way. */
  sending?: { by: string; at: string };
  createdAt: string;
  updatedAt: string;
}

/** `control`, key = `global`. §4.5 */
export interface ControlRecord {
  globalPaused: boolean;
  pauseReason: string | null;
  updatedBy: string | null;
  updatedAt: string | null;
  version: number;
}

/** `control_requests`, key = requestId: the first result of an operator request, returned on repeats. */
export interface ControlRequestRecord {
  requestId: string;
  operator: string;
  action: string;
  target: string | null;
  reason: string;
  response: { status: number; body: Record<string, unknown> };
  createdAt: string;
}

/** `leases`, key = repoKey: the repo-lock actor's projection, for queries. §7 */
export interface LeaseRecord {
  repoKey: string;
  leaseId: string | null;
  owner: string | null;
  taskId: string | null;
  expiresAt: string | null;
  state: 'free' | 'held';
  /**
   * The lease row's epoch (src/store/sql/leases.ts) of the current or last lease: what a write made for
   * the task checks. Absent on a record written before lease rows existed.
   */
  epoch?: number | null;
}

/**
 * `repository_owners`, key = the folded repoKey (CCWEB_CLUSTER_MODE=active): the one node
 * that hosts the repository's actors, claims its tasks and takes the requests about it.
 */
export interface RepositoryOwnerRecord {
  repoKey: string;
  nodeId: string;
  /** When this node took it. */
  since: string;
  /** The node it was taken from (its heartbeat had stopped), or null for a repository nobody owned. */
  previous: string | null;
}

export const GLOBAL_CONTROL_KEY = 'global';

/** Secondary indexes the service keeps (passed to `createStore`). */
export const STORE_INDEXES: Partial<Record<CollectionName, string[]>> = {
  // Not deliveryKey: nothing looks a task up by it (the delivery record names its task), and every
  // accepted comment would grow one more map in step with the task map.
  tasks: ['repoKey', 'resourceKey', 'state'],
  webhook_deliveries: ['taskId'],
  comment_triggers: ['taskId'],
  turns: ['taskId'],
  // `status`: the receipt outbox and the notice worker look for pending rows at every pass.
  comments: ['taskId', 'status', 'kind'],
  // `status`: restoring at start reads the unfinished actors only.
  actors: ['taskId', 'kind', 'status'],
  usage: ['day'],
};
