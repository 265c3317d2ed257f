// Types shared by the intake pipeline (intake.ts and its handlers, intake-kit.ts) and its write transaction (write-outcome.ts).
import type { NormalizedComment } from '../webhook/normalize-comment.js';
import type { IntakeResponse } from './intake-response.js';
import type { StopTarget } from './stop-tasks.js';

/** What the final transaction should write when no uniqueness rule or disabled repository intervenes. */
export type Plan =
  | { kind: 'ignored'; reason: string }
  | { kind: 'accept' }
  /** `reader`: Gitea says the commenter has no write access (not the operator's lists): the thread may be told who can ask. */
  | { kind: 'reject'; reason: string; reader?: boolean }
  | { kind: 'stop' }
  /** Write only if a check hits (used before authorisation); otherwise write nothing. */
  | { kind: 'probe' };

/** The delivery being decided: what the pipeline learnt before the transaction. */
export interface Subject {
  deliveryKey: string;
  deliveryId: string;
  eventType: string;
  hash: string;
  receivedAt: Date;
  /** Re-keyed to the stored repository record for its name (canonical-repository.ts). */
  comment: NormalizedComment | null;
  triggerKey: string | null;
  /**
   * The trigger key in the payload's own letter case when that differs from `triggerKey`: a trigger
   * written under it (before names were compared case-insensitively) still marks the comment as known.
   */
  payloadTriggerKey?: string | null;
}

/** What the transaction decided; `null` only for a probe that found nothing to decide. */
export type Outcome = {
  response: IntakeResponse;
  /** Call once durable: brings a created actor to life / announces it. */
  start?: () => void;
  taskId?: string;
  stop?: StopTarget[];
  followUp?: string;
  /** A refusal's one comment was queued (e.g. a reader's notice): the receipt outbox has a row to post. */
  notice?: true;
} | null;
