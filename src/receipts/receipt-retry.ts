/**
 * What the receipt outbox does after a failed attempt (spec §9.3) — pure decisions, no I/O: a
 * permanent Gitea answer fails the row at once; a transient one (5xx, timeout, network) is retried
 * after the next configured delay, until the delays run out.
 */
import { isGiteaError } from '../gitea/gitea-client.js';

/** The attempt that failed: the lookup of an earlier attempt's comment, or the POST itself. */
export type ReceiptStep = 'lookup' | 'send';

const PERMANENT_CODES: readonly string[] = ['gitea_unauthorized', 'gitea_forbidden', 'gitea_not_found', 'gitea_locked', 'gitea_bad_request'];

/** Gitea answered, and asking again will not change the answer. */
export function isPermanentReceiptError(error: unknown): boolean {
  return isGiteaError(error) && PERMANENT_CODES.includes(error.code);
}

export function receiptErrorCodeOf(error: unknown): string {
  return isGiteaError(error) ? error.code : 'receipt_send_error';
}

export function errorMessageOf(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).slice(0, 200);
}

export type ReceiptRetryDecision =
  | { kind: 'fail'; errorCode: string; metadata: Record<string, unknown> }
  | { kind: 'retry'; errorCode: string; failures: number; delayMs: number };

/**
 * After a failed attempt: fail the row (permanent, or no delay left) or retry after a delay.
 * `failuresBefore` counts this process's earlier transient failures of the row.
 */
export function receiptRetryDecision(error: unknown, step: ReceiptStep, failuresBefore: number, delaysMs: readonly number[]): ReceiptRetryDecision {
  const errorCode = receiptErrorCodeOf(error);
  if (isPermanentReceiptError(error)) {
    return { kind: 'fail', errorCode, metadata: { step, status: isGiteaError(error) ? error.status ?? null : null } };
  }
  const failures = failuresBefore + 1;
  if (failures > delaysMs.length) return { kind: 'fail', errorCode, metadata: { step, exhausted: true, attempts: failures } };
  return { kind: 'retry', errorCode, failures, delayMs: delaysMs[failures - 1]! };
}
