// The HTTP answers of spec §6.1, as data: intake decides, the route only writes them out.
// Error bodies are fixed strings: an unauthenticated caller learns nothing from them.

export interface IntakeResponse {
  status: number;
  body: Record<string, unknown>;
}

export const UNAUTHORIZED: IntakeResponse = { status: 401, body: { error: 'unauthorized' } };
export const INVALID_PAYLOAD: IntakeResponse = { status: 400, body: { error: 'invalid_payload' } };
/** A signed payload whose repository URLs name a host other than the configured Gitea. */
export const FOREIGN_REPOSITORY_ORIGIN: IntakeResponse = { status: 400, body: { error: 'foreign_repository_origin' } };
export const UNSUPPORTED_MEDIA_TYPE: IntakeResponse = { status: 415, body: { error: 'unsupported_media_type' } };
export const PAYLOAD_TOO_LARGE: IntakeResponse = { status: 413, body: { error: 'payload_too_large' } };
/** The body did not arrive within CCWEB_HTTP_BODY_TIMEOUT_SECONDS (a slow or stalled client). */
export const REQUEST_TIMEOUT: IntakeResponse = { status: 408, body: { error: 'request_timeout' } };
export const REPOSITORY_DISABLED: IntakeResponse = { status: 409, body: { error: 'repository_disabled' } };
export const STORE_UNAVAILABLE: IntakeResponse = { status: 503, body: { error: 'store_unavailable' } };
/** More comments wait for Gitea than CCWEB_INTAKE_MAX_PENDING: nothing stored; Gitea's Replay tries again. */
export const PENDING_BACKLOG_FULL: IntakeResponse = { status: 503, body: { error: 'intake_backlog_full' } };
export const INTERNAL_ERROR: IntakeResponse = { status: 500, body: { error: 'internal_error' } };

export function accepted(deliveryId: string, taskId: string): IntakeResponse {
  return { status: 202, body: { deliveryId, taskId, state: 'queued' } };
}

/**
 * Gitea could not yet confirm the comment or the author's permission (a passing failure): nothing
 * runs yet; the comment waits and is asked about again (src/intake/pending-intake.ts). The shape of
 * an accepted delivery, with no task yet and the state `pending_confirmation`.
 */
export function pendingConfirmation(deliveryId: string, p: { attempts: number; nextAttemptAt: string | null; state: string }): IntakeResponse {
  return { status: 202, body: { deliveryId, taskId: null, state: 'pending_confirmation', attempts: p.attempts, nextAttemptAt: p.nextAttemptAt, gaveUp: p.state === 'gave_up' } };
}

export function ignored(reason: string): IntakeResponse {
  return { status: 200, body: { status: 'ignored', reason } };
}

export function duplicate(taskId: string | null): IntakeResponse {
  return { status: 200, body: { status: 'duplicate', taskId } };
}

/** `taskId` null: a rejected mention counted without a task of its own (rejected-mentions.ts). */
export function rejected(reason: string, taskId: string | null): IntakeResponse {
  return { status: 200, body: { status: 'rejected', reason, taskId } };
}

export function stopped(taskIds: string[]): IntakeResponse {
  return { status: 200, body: { status: 'stop', taskIds } };
}

/**
 * A repeat of a known delivery gets the first answer again. Its 202 becomes 200 (§6.1: a repeat is
 * not a new enqueue); any other status is kept, so a repeat of a 409 is still a 409.
 */
export function repeatOf(original: IntakeResponse): IntakeResponse {
  return { status: original.status === 202 ? 200 : original.status, body: { ...original.body } };
}
