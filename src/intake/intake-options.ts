// What the webhook intake is given (intake.ts) and what it answers to: shared by the intake, its
// kit (intake-kit.ts) and its handlers.
import type { ActorRuntime } from '../runtime/actor-runtime.js';
import type { Store } from '../store/types.js';
import type { QuotaPort } from '../usage/quota-check.js';
import type { RepoPermission } from '../webhook/authorize-actor.js';
import type { WebhookHeaders } from '../webhook/headers.js';
import type { RepositoryScope } from '../domain/repository-scope.js';
import type { GiteaCommentFacts } from './confirm-comment.js';
import type { IntakeResponse } from './intake-response.js';
import type { RetryPolicy } from './pending-intake.js';
import type { ReviewReader } from './review-lookup.js';
import type { SecurityEvents } from './security-events.js';

export interface IntakeLogger {
  warn(obj: Record<string, unknown>, msg?: string): void;
}

export interface IntakeOptions {
  /** Several nodes: this node's id, recorded on the tasks it accepts (the scheduler's claim preference). */
  nodeId?: string;
  store: Store;
  runtime: ActorRuntime;
  botLogin: string;
  /** Several for rotation; a signature under any of them is accepted. */
  secrets: readonly string[];
  allowUsers?: readonly string[];
  denyUsers?: readonly string[];
  /**
   * Host names the payload's repository URLs may name (CCWEB_GITEA_URL's, CCWEB_GITEA_PUBLIC_URL's);
   * another host → 400 `foreign_repository_origin` + security audit. Unset: not checked (tests).
   */
  repositoryHosts?: readonly string[];
  /** Gitea's `GET /repos/{o}/{r}/collaborators/{user}/permission`: confirms write access (the payload's permissions are a hint). */
  fetchPermission: (owner: string, repo: string, login: string) => Promise<RepoPermission>;
  /**
   * Gitea's `GET /repos/{o}/{r}/issues/comments/{id}` (src/gitea/comment-on-gitea.ts): the comment as
   * Gitea has it. Every mention that would act (a task, a stop) is compared with it first
   * (confirm-comment.ts); the text the agent receives is Gitea's.
   */
  commentOnGitea: (owner: string, repo: string, id: number) => Promise<GiteaCommentFacts>;
  /**
   * Gitea's review API (src/gitea/review-on-gitea.ts): a review delivery names neither the review nor
   * its line comments, so both are read here. Unset: review deliveries are ignored as
   * `unsupported_event`.
   */
  reviewOnGitea?: ReviewReader;
  /** Bounds of the retries of a comment Gitea has not decided on (pending-intake.ts). */
  pendingRetry?: Partial<RetryPolicy>;
  /** Comments waiting for Gitea at most; one more → 503. Default 1000. */
  maxPending?: number;
  /** How often the retry loop looks for due comments. Default 1000 ms. */
  pendingPollMs?: number;
  /**
   * The repositories whose waiting comments this node asks Gitea about again: the retry
   * loop skips a comment of a repository another node owns, asked per comment at each pass. Only the
   * loop: which node handles a delivery is decided before intake. Default: every repository.
   */
  scope?: Pick<RepositoryScope, 'owns' | 'leads'>;
  /**
   * Gitea's `GET /repositories/{id}`: the owner/name Gitea has for a repository id. Asked only when a
   * comment would register a repository nothing is stored for yet, so that it is registered under
   * Gitea's own letter case whatever case the payload used. Unset or failing: the payload's form.
   */
  repositoryName?: (repoId: number) => Promise<{ owner: string; name: string }>;
  workspaceRoot: string;
  now?: () => Date;
  /** How long a delivery record answers repeats. Default 30 days (Gitea never retries on its own; Replay is manual). */
  deliveryRetentionMs?: number;
  /** A permission lookup slower than this counts as failed (fail closed). Default 3000; Gitea gives up after 5 s. */
  permissionTimeoutMs?: number;
  /** `sessions.mcp.hostRef` for new sessions. Default `gitea-main`, as the session manager's. */
  mcpHostRef?: string;
  /**
   * Bad-signature requests come from anyone: they are counted per source and window into expiring
   * `security_events` records (security-events.ts), never one audit event each. Default: a sink
   * with 10-minute windows and 30 days of retention.
   */
  securityEvents?: SecurityEvents;
  /**
   * How long the per-author day counts of rejected mentions (`security_events`, kind
   * `mention_rejected`) are kept after their day. Default 30 days, as CCWEB_SECURITY_EVENT_RETENTION_DAYS.
   */
  securityEventRetentionMs?: number;
  /** Daily quotas (src/usage/quota-check.ts): a new task over one is refused with one comment. */
  quota?: QuotaPort;
  /** After a task was queued durably (e.g. wake the scheduler). Must not throw; errors are ignored. */
  /** A task (or its receipt) was written for the delivery `deliveryId`. */
  onAccepted?: (taskId: string, deliveryId: string) => void;
  /** After a stop was recorded and its events sent. */
  onStop?: (taskIds: string[]) => void;
  logger?: IntakeLogger;
}

export interface IntakeRequest {
  rawBody: Buffer;
  headers: WebhookHeaders;
  /** Defaults to the `Content-Type` header. */
  contentType?: string | undefined;
  /** The TCP peer, for the security audit of a bad signature. */
  remoteAddress?: string | undefined;
}

export interface Intake {
  handle(request: IntakeRequest): Promise<IntakeResponse>;
  /** Starts the loop that asks Gitea again about waiting comments (pending-intake.ts). */
  start(): void;
  /** One pass of that loop now: every waiting comment that is due. Resolves with how many were tried. */
  retryDue(): Promise<number>;
  /** Writes the counts of the current security-event window (call at shutdown). */
  flush(): Promise<void>;
  /** Stops the retry loop and the security-event window timer, and writes its counts. */
  close(): Promise<void>;
}

