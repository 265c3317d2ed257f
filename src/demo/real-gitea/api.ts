/** Minimal REST calls to a real Gitea as a given user (token or password), for seeding and tests. */

export type GiteaAuth = { token: string } | { basic: { login: string; password: string } } | null;

export interface ApiResult<T = unknown> {
  status: number;
  body: T;
  headers: Headers;
}

export class GiteaApiError extends Error {
  constructor(
    readonly method: string,
    readonly path: string,
    readonly status: number,
    readonly text: string,
  ) {
    super(`${method} ${path}: HTTP ${status}: ${text.slice(0, 500)}`);
  }
}

export async function giteaApi<T = unknown>(
  baseUrl: string,
  auth: GiteaAuth,
  method: string,
  path: string,
  body?: unknown,
  expect?: number | number[],
): Promise<ApiResult<T>> {
  const headers: Record<string, string> = { Accept: 'application/json' };
  if (auth && 'token' in auth) headers.Authorization = `token ${auth.token}`;
  if (auth && 'basic' in auth) headers.Authorization = `Basic ${Buffer.from(`${auth.basic.login}:${auth.basic.password}`).toString('base64')}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(`${baseUrl}/api/v1${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  const expected = expect === undefined ? null : Array.isArray(expect) ? expect : [expect];
  if (expected ? !expected.includes(res.status) : !res.ok) throw new GiteaApiError(method, path, res.status, text);
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    /* not JSON */
  }
  return { status: res.status, body: parsed as T, headers: res.headers };
}

/** Retries `fn` until it resolves (Gitea does some things asynchronously, e.g. registering a pushed branch). */
export async function eventually<T>(what: string, fn: () => Promise<T>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      return await fn();
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms: ${String((last as Error)?.message ?? last)}`);
    await new Promise((r) => setTimeout(r, 150));
  }
}
