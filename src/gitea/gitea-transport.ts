/**
 * The transport under every Gitea REST call of the service (gitea-client.ts and
 * src/publish/gitea-pulls.ts): one policy, one place.
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
import createClient, { type Client } from 'openapi-fetch';
import type { z } from 'zod';
import type { paths } from './generated/gitea-api.js';
import { GiteaError, type GiteaErrorCode } from './gitea-error.js';

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

/** Each attempt's limit unless the client is given another (the service never is). */
export const DEFAULT_GITEA_TIMEOUT_MS = 10_000;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export interface RawResult {
  data?: unknown;
  error?: unknown;
  response: Response;
}

export interface GiteaTransport {
  /** The API root, `…/api/v1`. */
  readonly baseUrl: string;
  /** openapi-fetch over Gitea's generated `paths`, with the token and the service's User-Agent. */
  readonly client: Client<paths>;
  /**
   * One request under the policy: `send` makes it (with the per-attempt signal); an answer other than
   * `expectStatus` or one that does not match `schema` is a GiteaError.
   */
  call<T>(method: 'GET' | 'POST' | 'PATCH', endpoint: string, send: (signal: AbortSignal) => Promise<RawResult>, expectStatus: number, schema: z.ZodType): Promise<T>;
}

export function createGiteaTransport(options: GiteaClientOptions): GiteaTransport {
  const baseUrl = normaliseBaseUrl(options.baseUrl);
  const token = options.token;
  const timeoutMs = options.timeoutMs ?? DEFAULT_GITEA_TIMEOUT_MS;
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

  return { baseUrl, client, call };
}
