import { isGiteaError } from '../gitea/gitea-client.js';

/** A failure of a verification step with a stable code (kept in the audit log). */
export class VerificationStepError extends Error {
  override readonly name = 'VerificationStepError';
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export function verificationErrorCodeOf(error: unknown): string {
  if (isGiteaError(error)) return error.code;
  if (error instanceof VerificationStepError) return error.code;
  return 'verification_error';
}

/** An error's message, cut to what an audit event keeps. */
export function messageOf(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).slice(0, 200);
}
