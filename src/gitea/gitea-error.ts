// The one error every Gitea REST call throws (both clients: comments and permissions in
// gitea-client.ts, branches and pull requests in src/publish/gitea-pulls.ts).

export type GiteaErrorCode =
  | 'gitea_unauthorized'
  | 'gitea_forbidden'
  | 'gitea_not_found'
  | 'gitea_locked'
  | 'gitea_bad_request'
  | 'gitea_server_error'
  | 'gitea_timeout'
  | 'gitea_network'
  | 'gitea_bad_response';

export const GITEA_ERROR_CODES: readonly GiteaErrorCode[] = [
  'gitea_unauthorized',
  'gitea_forbidden',
  'gitea_not_found',
  'gitea_locked',
  'gitea_bad_request',
  'gitea_server_error',
  'gitea_timeout',
  'gitea_network',
  'gitea_bad_response',
];

export class GiteaError extends Error {
  override readonly name = 'GiteaError';
  readonly code: GiteaErrorCode;
  /** HTTP status when Gitea answered; undefined for timeouts and network errors. */
  readonly status: number | undefined;
  readonly method: string;
  /** The path template (e.g. `/repos/{owner}/{repo}/issues/{index}/comments`), never a URL with credentials. */
  readonly endpoint: string;
  /** How many attempts were made (1 + retries used). */
  readonly attempts: number;
  /**
   * True when Gitea gave a definite answer (an HTTP status), false when the outcome is unknown
   * (timeout, network error). For a write, unknown means it may or may not have happened.
   */
  readonly answered: boolean;

  constructor(init: {
    code: GiteaErrorCode;
    message: string;
    status?: number;
    method: string;
    endpoint: string;
    attempts: number;
    cause?: unknown;
  }) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.code = init.code;
    this.status = init.status;
    this.method = init.method;
    this.endpoint = init.endpoint;
    this.attempts = init.attempts;
    this.answered = init.status !== undefined;
  }
}

export function isGiteaError(e: unknown): e is GiteaError {
  return e instanceof GiteaError;
}
