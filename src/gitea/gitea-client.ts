/**
 * Typed Gitea REST client.
 *
 * Request paths, parameters and bodies are typed by `paths` generated from Gitea's own OpenAPI
 * document (scripts/gen-gitea-client.mjs → ./generated/gitea-api.ts) and sent with openapi-fetch.
 * The responses the service relies on are checked at run time (zod) and anything that does not
 * match becomes `gitea_bad_response`.
 *
 * Policy:
 * - `Authorization: token <t>`; the token never appears in an error message.
 * - Every attempt has its own timeout (AbortSignal) of `timeoutMs`.
 * - Reads (GET) are retried with exponential backoff on network errors, timeouts and 5xx only.
 *   Writes (POST/PATCH/DELETE) are never retried: a write whose answer was lost may have happened.
 */
import createClient from 'openapi-fetch';
import { z } from 'zod';
import type { components, paths } from './generated/gitea-api.js';

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

// ---------------------------------------------------------------------------------------------
// Response shapes (generated types, with the fields the service relies on made required)

type Schemas = components['schemas'];

const userSchema = z.looseObject({
  id: z.number().int(),
  login: z.string().min(1),
});
const commentSchema = z.looseObject({
  id: z.number().int().positive(),
  body: z.string(),
  user: userSchema,
  html_url: z.string(),
  created_at: z.string().min(1),
  updated_at: z.string().min(1),
});
const permissionSchema = z.looseObject({
  permission: z.string().min(1),
  user: userSchema.nullish(),
});

export type GiteaUser = Schemas['User'] & { id: number; login: string };
export type GiteaComment = Schemas['Comment'] & {
  id: number;
  body: string;
  user: GiteaUser;
  html_url: string;
  created_at: string;
  updated_at: string;
};
export type GiteaPermissionLevel = 'none' | 'read' | 'write' | 'admin' | 'owner';
export type GiteaCollaboratorPermission = Schemas['RepoCollaboratorPermission'] & {
  permission: GiteaPermissionLevel | (string & {});
};

// ---------------------------------------------------------------------------------------------

export interface GiteaClientOptions {
  /** Gitea root URL, e.g. `https://gitea.example.com` (with or without `/api/v1`). */
  baseUrl: string;
  token: string;
  /** Per-attempt timeout. Default 10 000 ms. */
  timeoutMs?: number;
  /** Extra attempts for reads on network errors/timeouts/5xx. Default 2. Writes never retry. */
  retries?: number;
  /** First backoff delay; doubles each retry (with up to 20 % jitter), capped at 5 s. Default 250 ms. */
  retryBaseDelayMs?: number;
  /** Replaceable fetch (tests). */
  fetch?: typeof globalThis.fetch;
  userAgent?: string;
}

export interface ListCommentsOptions {
  /** Only comments updated at or after this time (Gitea: inclusive, 1 s resolution). */
  since?: Date | string;
  /** Only comments updated at or before this time. */
  before?: Date | string;
}

export interface GiteaClient {
  readonly baseUrl: string;
  listIssueComments(owner: string, repo: string, index: number, opts?: ListCommentsOptions): Promise<GiteaComment[]>;
  createIssueComment(owner: string, repo: string, index: number, body: string): Promise<GiteaComment>;
  getComment(owner: string, repo: string, id: number): Promise<GiteaComment>;
  /** Rewrites one comment's body (the bot's own receipt: a notice is added by editing, not by a new comment). */
  editIssueComment(owner: string, repo: string, id: number, body: string): Promise<GiteaComment>;
  getCollaboratorPermission(owner: string, repo: string, user: string): Promise<GiteaCollaboratorPermission>;
  getCurrentUser(): Promise<GiteaUser>;
  /** `GET /repositories/{id}`: a repository's current owner/name (it follows renames and transfers). */
  getRepositoryById(id: number): Promise<GiteaRepositoryRef>;
  /** `GET /version`: cheap reachability probe (readiness, doctor). */
  getVersion(): Promise<{ version: string }>;
}

export interface GiteaRepositoryRef {
  id: number;
  name: string;
  full_name: string;
  owner: { login: string };
}

const repositoryRefSchema = z.looseObject({
  id: z.number(),
  name: z.string(),
  full_name: z.string(),
  owner: z.looseObject({ login: z.string() }),
});

/** RFC3339 at second resolution (Gitea compares unix seconds), flooring so `since` stays inclusive. */
export function toGiteaTime(t: Date | string): string {
  const d = typeof t === 'string' ? new Date(t) : t;
  if (Number.isNaN(d.getTime())) throw new TypeError(`invalid time: ${String(t)}`);
  return new Date(Math.floor(d.getTime() / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

function normaliseBaseUrl(u: string): string {
  const trimmed = u.replace(/\/+$/, '');
  return trimmed.endsWith('/api/v1') ? trimmed : `${trimmed}/api/v1`;
}

function codeForStatus(status: number, method: string): GiteaErrorCode {
  if (status === 401) return 'gitea_unauthorized';
  if (status === 403) return 'gitea_forbidden';
  if (status === 404) return 'gitea_not_found';
  if (status === 423) return 'gitea_locked';
  if (status >= 500) return 'gitea_server_error';
  void method;
  return 'gitea_bad_request';
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

interface RawResult {
  data?: unknown;
  error?: unknown;
  response: Response;
}

export function createGiteaClient(options: GiteaClientOptions): GiteaClient {
  const baseUrl = normaliseBaseUrl(options.baseUrl);
  const token = options.token;
  const timeoutMs = options.timeoutMs ?? 10_000;
  const retries = Math.max(0, options.retries ?? 2);
  const baseDelay = options.retryBaseDelayMs ?? 250;

  const client = createClient<paths>({
    baseUrl,
    fetch: options.fetch ?? globalThis.fetch,
    headers: {
      Authorization: `token ${token}`,
      Accept: 'application/json',
      'User-Agent': options.userAgent ?? 'ccweb-gitea',
    },
  });

  /** Removes the token from any text that could reach a log or an error message. */
  const redact = (s: string): string => (token ? s.split(token).join('[REDACTED]') : s);

  function messageFromBody(body: unknown): string | undefined {
    if (body && typeof body === 'object' && 'message' in body && typeof body.message === 'string') return body.message;
    if (typeof body === 'string' && body.length > 0) return body.slice(0, 200);
    return undefined;
  }

  async function call<T>(
    method: 'GET' | 'POST' | 'PATCH',
    endpoint: string,
    send: (signal: AbortSignal) => Promise<RawResult>,
    expectStatus: number,
    schema: z.ZodType,
  ): Promise<T> {
    const isRead = method === 'GET';
    const maxAttempts = isRead ? retries + 1 : 1;
    let attempt = 0;
    for (;;) {
      attempt += 1;
      let failure: GiteaError;
      const signal = AbortSignal.timeout(timeoutMs);
      try {
        const { data, error, response } = await send(signal);
        if (response.status === expectStatus) {
          const parsed = schema.safeParse(data);
          if (parsed.success) return parsed.data as T;
          throw new GiteaError({
            code: 'gitea_bad_response',
            message: redact(`${method} ${endpoint}: response does not match the expected shape: ${parsed.error.issues
              .slice(0, 3)
              .map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`)
              .join('; ')}`),
            status: response.status,
            method,
            endpoint,
            attempts: attempt,
          });
        }
        const detail = messageFromBody(error);
        failure = new GiteaError({
          code: response.ok ? 'gitea_bad_response' : codeForStatus(response.status, method),
          message: redact(`${method} ${endpoint}: HTTP ${response.status}${detail ? `: ${detail}` : ''}`),
          status: response.status,
          method,
          endpoint,
          attempts: attempt,
        });
      } catch (e) {
        if (e instanceof GiteaError) throw e;
        const err = e as { name?: string; message?: string; cause?: unknown };
        if (signal.aborted || err?.name === 'TimeoutError' || err?.name === 'AbortError') {
          failure = new GiteaError({
            code: 'gitea_timeout',
            message: `${method} ${endpoint}: no answer within ${timeoutMs} ms`,
            method,
            endpoint,
            attempts: attempt,
          });
        } else if (err?.name === 'SyntaxError') {
          // openapi-fetch parses JSON for us: a 2xx whose body is not JSON.
          throw new GiteaError({
            code: 'gitea_bad_response',
            message: `${method} ${endpoint}: response is not JSON`,
            method,
            endpoint,
            attempts: attempt,
          });
        } else {
          const causeCode = (err?.cause as { code?: string } | undefined)?.code;
          failure = new GiteaError({
            code: 'gitea_network',
            message: redact(`${method} ${endpoint}: network error${causeCode ? ` (${causeCode})` : err?.message ? ` (${err.message})` : ''}`),
            method,
            endpoint,
            attempts: attempt,
          });
        }
      }
      const retryable = failure.code === 'gitea_server_error' || failure.code === 'gitea_network' || failure.code === 'gitea_timeout';
      if (!isRead || !retryable || attempt >= maxAttempts) throw failure;
      const backoff = Math.min(5_000, baseDelay * 2 ** (attempt - 1));
      await sleep(backoff + Math.floor(Math.random() * backoff * 0.2));
    }
  }

  return {
    baseUrl,

    listIssueComments(owner, repo, index, opts = {}) {
      const query: { since?: string; before?: string } = {};
      if (opts.since !== undefined) query.since = toGiteaTime(opts.since);
      if (opts.before !== undefined) query.before = toGiteaTime(opts.before);
      return call<GiteaComment[]>(
        'GET',
        '/repos/{owner}/{repo}/issues/{index}/comments',
        (signal) =>
          client.GET('/repos/{owner}/{repo}/issues/{index}/comments', {
            params: { path: { owner, repo, index }, query },
            signal,
          }),
        200,
        z.array(commentSchema),
      );
    },

    createIssueComment(owner, repo, index, body) {
      return call<GiteaComment>(
        'POST',
        '/repos/{owner}/{repo}/issues/{index}/comments',
        (signal) =>
          client.POST('/repos/{owner}/{repo}/issues/{index}/comments', {
            params: { path: { owner, repo, index } },
            body: { body },
            signal,
          }),
        201,
        commentSchema,
      );
    },

    getComment(owner, repo, id) {
      return call<GiteaComment>(
        'GET',
        '/repos/{owner}/{repo}/issues/comments/{id}',
        (signal) =>
          client.GET('/repos/{owner}/{repo}/issues/comments/{id}', {
            params: { path: { owner, repo, id } },
            signal,
          }),
        200,
        commentSchema,
      );
    },

    editIssueComment(owner, repo, id, body) {
      return call<GiteaComment>(
        'PATCH',
        '/repos/{owner}/{repo}/issues/comments/{id}',
        (signal) =>
          client.PATCH('/repos/{owner}/{repo}/issues/comments/{id}', {
            params: { path: { owner, repo, id } },
            body: { body },
            signal,
          }),
        200,
        commentSchema,
      );
    },

    getCollaboratorPermission(owner, repo, user) {
      return call<GiteaCollaboratorPermission>(
        'GET',
        '/repos/{owner}/{repo}/collaborators/{collaborator}/permission',
        (signal) =>
          client.GET('/repos/{owner}/{repo}/collaborators/{collaborator}/permission', {
            params: { path: { owner, repo, collaborator: user } },
            signal,
          }),
        200,
        permissionSchema,
      );
    },

    getRepositoryById(id) {
      return call<GiteaRepositoryRef>(
        'GET',
        '/repositories/{id}',
        (signal) => client.GET('/repositories/{id}', { params: { path: { id } }, signal }),
        200,
        repositoryRefSchema,
      );
    },

    getVersion() {
      return call<{ version: string }>('GET', '/version', (signal) => client.GET('/version', { signal }), 200, z.looseObject({ version: z.string() }));
    },

    getCurrentUser() {
      return call<GiteaUser>('GET', '/user', (signal) => client.GET('/user', { signal }), 200, userSchema);
    },
  };
}
