// One entry of the intake's table (intake.ts): what a kind of delivery becomes. The intake verifies
// the signature, the delivery id and repeats, then gives the delivery to the first handler that
// takes it; a delivery no handler takes is recorded as ignored (`unsupported_event`).
import type { WebhookHeaders } from '../webhook/headers.js';
import type { Waiting } from './intake-kit.js';
import type { IntakeRequest } from './intake-options.js';
import type { IntakeResponse } from './intake-response.js';
import type { Subject } from './intake-types.js';
import type { PendingIntakeRecord } from './pending-intake.js';

export interface IntakeHandler {
  /** Whether this handler decides a delivery with these headers (its event and type). */
  takes(headers: WebhookHeaders): boolean;
  /** Decides a signed, new delivery (`subject` as far as the intake knows it; the handler fills in the rest). */
  handle(request: IntakeRequest, subject: Subject, json: Buffer): Promise<IntakeResponse>;
  /** Whether a delivery left waiting for Gitea is one of this handler's. */
  owns(record: PendingIntakeRecord): boolean;
  /** Asks Gitea about a waiting delivery again; the outcome is written under the delivery it came in. */
  retry(record: PendingIntakeRecord, subject: Subject, waiting: Waiting): Promise<void>;
}
