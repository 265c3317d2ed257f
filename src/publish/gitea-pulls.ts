// The few Gitea REST calls change delivery needs: a branch's head, a pull request, the open pull
// requests of a head branch, and creating one. Separate from src/gitea/gitea-client.ts (comments and
// permissions) so the two change independently; the same policy: `Authorization: token`, a timeout per
// attempt, reads retried on 5xx/network errors, writes never retried, the token never in a message.
// Shapes: Gitea 1.26's OpenAPI document (Branch, PullRequest); only the fields used are checked.
import { z } from 'zod';

export class GiteaPullsError extends Error {
  override readonly name = 'GiteaPullsError';
  constructor(
    readonly status: number | undefined,
    readonly endpoint: string,
    message: string,
  ) {
    super(message);
  }
  /** Gitea answered (a status), so the outcome is known; otherwise a write may or may not have happened. */
  get answered(): boolean {
    return this.status !== undefined;
  }
}

const branchSchema = z.object({ name: z.string(), commit: z.object({ id: z.string() }) });

const pullSchema = z.object({
  number: z.number().int(),
  state: z.string(),
  html_url: z.string(),
  merged: z.boolean().nullish(),
  body: z.string().nullish(),
  head: z.object({
    ref: z.string(),
    sha: z.string(),
    repo_id: z.number().nullish(),
    repo: z.object({ id: z.number(), full_name: z.string() }).nullish(),
  }),
  base: z.object({
    ref: z.string(),
    repo_id: z.number().nullish(),
    repo: z.object({ id: z.number(), full_name: z.string() }).nullish(),
  }),
});

export type GiteaPull = z.infer<typeof pullSchema>;
export type GiteaBranch = z.infer<typeof branchSchema>;

export interface GiteaPullsClient {
  /** The branch's head commit, or null when Gitea does not know the branch (404). */
  getBranch(owner: string, repo: string, branch: string): Promise<GiteaBranch | null>;
  getPull(owner: string, repo: string, index: number): Promise<GiteaPull>;
  /** Open pull requests whose head is `headBranch` of this same repository. */
  openPullsForHead(owner: string, repo: string, headBranch: string): Promise<GiteaPull[]>;
  createPull(owner: string, repo: string, body: { head: string; base: string; title: string; body: string }): Promise<GiteaPull>;
  /** A comment on an issue or pull request (used to link a fork's branch). */
  createComment(owner: string, repo: string, index: number, body: string): Promise<{ id: number; html_url: string }>;
  listComments(owner: string, repo: string, index: number): Promise<Array<{ id: number; body: string; user: { login: string } }>>;
}

export interface GiteaPullsOptions {
  baseUrl: string;
  token: string;
  timeoutMs?: number;
  retries?: number;
  fetch?: typeof globalThis.fetch;
}

const seg = encodeURIComponent;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export function createGiteaPullsClient(options: GiteaPullsOptions): GiteaPullsClient {
  const base = `${options.baseUrl.replace(/\/+$/, '').replace(/\/api\/v1$/, '')}/api/v1`;
  const doFetch = options.fetch ?? globalThis.fetch;
  const timeoutMs = options.timeoutMs ?? 15_000;
  const retries = options.retries ?? 2;
  const redact = (s: string) => (options.token ? s.split(options.token).join('[REDACTED]') : s);

  async function call<T>(method: 'GET' | 'POST', path: string, endpoint: string, expect: number[], schema: z.ZodType<T>, body?: unknown): Promise<{ status: number; data: T | null }> {
    const attempts = method === 'GET' ? retries + 1 : 1;
    for (let attempt = 1; ; attempt++) {
      let failure: GiteaPullsError;
      try {
        const res = await doFetch(`${base}${path}`, {
          method,
          headers: {
            Authorization: `token ${options.token}`,
            Accept: 'application/json',
            'User-Agent': 'ccweb-gitea',
            ...(body === undefined ? {} : { 'Content-Type': 'application/json' }),
          },
          body: body === undefined ? undefined : JSON.stringify(body),
          signal: AbortSignal.timeout(timeoutMs),
        });
        const text = await res.text();
        if (expect.includes(res.status)) {
          if (res.status === 404) return { status: 404, data: null };
          const parsed = schema.safeParse(text ? JSON.parse(text) : null);
          if (!parsed.success) throw new GiteaPullsError(res.status, endpoint, `${method} ${endpoint}: unexpected response shape`);
          return { status: res.status, data: parsed.data };
        }
        let detail = '';
        try {
          detail = String((JSON.parse(text) as { message?: unknown }).message ?? '');
        } catch {
          detail = text.slice(0, 200);
        }
        failure = new GiteaPullsError(res.status, endpoint, redact(`${method} ${endpoint}: HTTP ${res.status}${detail ? `: ${detail.slice(0, 300)}` : ''}`));
        if (res.status < 500) throw failure;
      } catch (err) {
        if (err instanceof GiteaPullsError && err.status !== undefined && err.status < 500) throw err;
        failure = err instanceof GiteaPullsError ? err : new GiteaPullsError(undefined, endpoint, redact(`${method} ${endpoint}: ${(err as Error).message}`));
      }
      if (attempt >= attempts) throw failure;
      await sleep(250 * 2 ** (attempt - 1));
    }
  }

  return {
    async getBranch(owner, repo, branch) {
      const r = await call('GET', `/repos/${seg(owner)}/${seg(repo)}/branches/${seg(branch)}`, '/repos/{owner}/{repo}/branches/{branch}', [200, 404], branchSchema);
      return r.data;
    },
    async getPull(owner, repo, index) {
      const r = await call('GET', `/repos/${seg(owner)}/${seg(repo)}/pulls/${index}`, '/repos/{owner}/{repo}/pulls/{index}', [200], pullSchema);
      return r.data!;
    },
    async openPullsForHead(owner, repo, headBranch) {
      const found: GiteaPull[] = [];
      // Paged (Gitea caps `limit` at 50); a repository with thousands of open pull requests is read to the end.
      for (let page = 1; page <= 200; page++) {
        const r = await call('GET', `/repos/${seg(owner)}/${seg(repo)}/pulls?state=open&limit=50&page=${page}`, '/repos/{owner}/{repo}/pulls', [200], z.array(pullSchema));
        const list = r.data ?? [];
        for (const p of list) {
          const sameRepo = p.head.repo_id == null || p.base.repo_id == null || p.head.repo_id === p.base.repo_id;
          if (p.head.ref === headBranch && sameRepo && p.state === 'open') found.push(p);
        }
        if (list.length < 50) break;
      }
      return found;
    },
    async createPull(owner, repo, body) {
      const r = await call('POST', `/repos/${seg(owner)}/${seg(repo)}/pulls`, '/repos/{owner}/{repo}/pulls', [201], pullSchema, body);
      return r.data!;
    },
    async createComment(owner, repo, index, body) {
      const r = await call(
        'POST',
        `/repos/${seg(owner)}/${seg(repo)}/issues/${index}/comments`,
        '/repos/{owner}/{repo}/issues/{index}/comments',
        [201],
        z.object({ id: z.number(), html_url: z.string() }),
        { body },
      );
      return r.data!;
    },
    async listComments(owner, repo, index) {
      const r = await call(
        'GET',
        `/repos/${seg(owner)}/${seg(repo)}/issues/${index}/comments`,
        '/repos/{owner}/{repo}/issues/{index}/comments',
        [200],
        z.array(z.object({ id: z.number(), body: z.string(), user: z.object({ login: z.string() }) })),
      );
      return r.data ?? [];
    },
  };
}
