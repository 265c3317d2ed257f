// What the task's effects need from the parts that do the work (each port implemented in its own folder).
import type { ActorRuntime } from '../runtime/actor-runtime.js';
import type { Store } from '../store/types.js';
import type { LeaseFence } from '../leases/lease-fence.js';
import type { RepositoryRecord, TaskRecord, TurnRecord } from '../domain/records.js';
import type { TurnOutcome } from '../domain/turn-outcome.js';

/** What the task's effects need from the workspace manager (src/workspace). */
export interface WorkspacePort {
  /** `current`: the repository's owner/name on Gitea now (after a rename or transfer), when known. */
  prepare(task: TaskRecord, repo: RepositoryRecord, signal: AbortSignal, current?: { owner: string; name: string }): Promise<
    | { ok: true; path: string; head: string; lastFetchAt: string }
    | { ok: false; code: string; retryable: boolean; message: string }
  >;
  /** Where the task's agent works (its resource's worktree); default: the repository's workspace path. */
  pathFor?(task: TaskRecord, repo: RepositoryRecord): string;
}

/** What the task's effects need from change delivery (src/publish): publish, idempotently, what the turn left. */
export interface PublishPort {
  /** `fence`: checked in each write the publish makes for the task (src/leases/lease-fence.ts). */
  publish(taskId: string, options?: { signal?: AbortSignal; fence?: LeaseFence }): Promise<{ ok: true } | { ok: false; errorCode: string; message: string }>;
}

export type { TurnOutcome };

/** What the task's effects need from the Codex session manager (src/sessions). */
export interface SessionPort {
  ensureThread(task: TaskRecord, cwd: string): Promise<{ threadId: string; resumed: boolean }>;
  runTurn(
    task: TaskRecord,
    options: { kind: 'normal' | 'reply_retry'; cwd: string; signal: AbortSignal; replyRetryPrompt?: string; fence?: LeaseFence },
  ): Promise<TurnOutcome>;
  interrupt(taskId: string): Promise<{ confirmed: boolean }>;
}

export type VerificationResult =
  | { result: 'confirmed'; commentId?: number }
  | { result: 'confirmed_via_fallback'; commentId?: number; mcpFailureReason?: string | null }
  | { result: 'failed'; errorCode?: string };

/** What the task's effects need from reply verification (src/verification). */
export interface VerificationPort {
  verify(input: {
    task: TaskRecord;
    turn: TurnRecord;
    runReplyRetryTurn: () => Promise<{ ok: boolean }>;
    /** Checked in each write the verification makes for the task (its fallback post): rejects with LeaseLostError once the lease is gone. */
    fence?: LeaseFence;
  }): Promise<VerificationResult>;
  replyRetryPrompt(previousFinalMessage: string | null, marker: string): string;
  /** The retry turn's prompt after a question that did not land; without it, `replyRetryPrompt` of the question. */
  questionRetryPrompt?(question: string, marker: string): string;
}

export interface ExecutorOptions {
  store: Store;
  runtime: ActorRuntime;
  workspace: WorkspacePort;
  sessions: SessionPort;
  verification: VerificationPort;
  /** Change delivery; without it a turn goes straight to verification (nothing is published). */
  publisher?: PublishPort;
  /**
   * Whether the bot's comment carrying `turn`'s marker is on Gitea. Before a retry runs the
   * instruction again after an interrupted turn (a restart, a crash of the app-server), this tells
   * whether the agent had already answered: then the answer is verified instead of produced twice.
   */
  replyExists?: (task: TaskRecord, turn: TurnRecord) => Promise<boolean>;
  /**
   * The repository's owner/name on Gitea now, looked up by its id (it follows renames and transfers);
   * null when Gitea does not know it or cannot be asked (the record's owner/name are used then).
   */
  currentRepository?: (repo: RepositoryRecord) => Promise<{ owner: string; name: string } | null>;
  /** Delay before an execution retry (§8: at most one). */
  retryDelayMs?: number;
  /**
   * When a failed step's retry is due, if something knows better than `retryDelayMs` (a provider
   * rate limit's reset, src/usage/provider-hold.ts); null → the usual delay.
   */
  retryAtFor?: (errorCode: string) => number | null;
  now?: () => number;
  log?: (msg: string, fields: Record<string, unknown>) => void;
}

