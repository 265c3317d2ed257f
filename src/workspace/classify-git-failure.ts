// Pure: which error code and retry policy a failed git command maps to (spec §8).
import type { GitResult } from './run-git.js';

export type GitFailureCode = 'auth_failed' | 'git_failed' | 'timeout';

export interface GitFailureClass {
  code: GitFailureCode;
  retryable: boolean;
}

const AUTH = [
  /Authentication failed/i,
  /could not read Username/i,
  /could not read Password/i,
  /The requested URL returned error: 40[13]/i,
  /terminal prompts disabled/i,
  /HTTP Basic: Access denied/i,
];

// Transient transport trouble: worth the task machine's retry.
const TRANSIENT = [
  /Could not resolve host/i,
  /Failed to connect/i,
  /Connection refused/i,
  /Connection reset/i,
  /Connection timed out/i,
  /Operation timed out/i,
  /The requested URL returned error: (5\d\d|429)/i,
  /RPC failed/i,
  /early EOF/i,
  /unexpected disconnect/i,
  /remote end hung up/i,
  /SSL_/i,
];

export function classifyGitFailure(result: Pick<GitResult, 'stderr' | 'timedOut'>): GitFailureClass {
  if (result.timedOut) return { code: 'timeout', retryable: true };
  if (AUTH.some((re) => re.test(result.stderr))) return { code: 'auth_failed', retryable: true };
  if (TRANSIENT.some((re) => re.test(result.stderr))) return { code: 'git_failed', retryable: true };
  return { code: 'git_failed', retryable: false };
}
