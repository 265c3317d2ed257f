// The few Gitea REST calls change delivery needs: a branch's head, a pull request, the open pull
// requests of a head branch, creating one, and a comment linking a fork's branch. The interface is
// change delivery's own (publisher.ts and its tests' doubles use it); the requests go through the
// service's one Gitea transport (src/gitea/gitea-transport.ts: token, timeout per attempt, reads
// retried on 5xx/network errors, writes never retried, the token never in a message).
// Shapes: Gitea 1.26's OpenAPI document (Branch, PullRequest); only the fields used are checked.
import { z } from 'zod';
import { createGiteaClient, GiteaError, type GiteaClientOptions } from '../gitea/gitea-client.js';
import { createGiteaTransport } from '../gitea/gitea-transport.js';

/**
 * What these calls throw: the transport's GiteaError (`status`, `endpoint`, `answered`), under the
 * name publisher.ts catches.
 */
export { GiteaError as GiteaPullsError };

const branchSchema = z.object({ name: z.string(), commit: z.object({ id: z.string() }) });

const pullSchema = z.object({
  number: z.number().int(),
  state: z.string(),
  html_url: z.string(),
  merged: z.boolean().nullish(),
  body: z.string().nullish(),
  /** The author lets users with write access to the base repository push to the head branch (a fork's). */
  allow_maintainer_edit: z.boolean().nullish(),
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

/** As for the comments client; the timeout per attempt defaults to 15 s (pull requests can be slow to create). */
export type GiteaPullsOptions = GiteaClientOptions;

/** Gitea caps `limit` at 50. */
const PAGE = 50;

export function createGiteaPullsClient(options: GiteaPullsOptions): GiteaPullsClient {
  const withDefaults = { ...options, timeoutMs: options.timeoutMs ?? 15_000 };
  const { client, call } = createGiteaTransport(withDefaults);
  const comments = createGiteaClient(withDefaults);

  return {
    async getBranch(owner, repo, branch) {
      try {
        return await call<GiteaBranch>(
          'GET',
          '/repos/{owner}/{repo}/branches/{branch}',
          (signal) => client.GET('/repos/{owner}/{repo}/branches/{branch}', { params: { path: { owner, repo, branch } }, signal }),
          200,
          branchSchema,
        );
      } catch (error) {
        if (error instanceof GiteaError && error.status === 404) return null;
        throw error;
      }
    },
    getPull(owner, repo, index) {
      return call<GiteaPull>(
        'GET',
        '/repos/{owner}/{repo}/pulls/{index}',
        (signal) => client.GET('/repos/{owner}/{repo}/pulls/{index}', { params: { path: { owner, repo, index } }, signal }),
        200,
        pullSchema,
      );
    },
    async openPullsForHead(owner, repo, headBranch) {
      const found: GiteaPull[] = [];
      // Paged; a repository with thousands of open pull requests is read to the end.
      for (let page = 1; page <= 200; page++) {
        const list = await call<GiteaPull[]>(
          'GET',
          '/repos/{owner}/{repo}/pulls',
          (signal) => client.GET('/repos/{owner}/{repo}/pulls', { params: { path: { owner, repo }, query: { state: 'open', limit: PAGE, page } }, signal }),
          200,
          z.array(pullSchema),
        );
        for (const p of list) {
          const sameRepo = p.head.repo_id == null || p.base.repo_id == null || p.head.repo_id === p.base.repo_id;
          if (p.head.ref === headBranch && sameRepo && p.state === 'open') found.push(p);
        }
        if (list.length < PAGE) break;
      }
      return found;
    },
    createPull(owner, repo, body) {
      return call<GiteaPull>(
        'POST',
        '/repos/{owner}/{repo}/pulls',
        (signal) => client.POST('/repos/{owner}/{repo}/pulls', { params: { path: { owner, repo } }, body, signal }),
        201,
        pullSchema,
      );
    },
    createComment(owner, repo, index, body) {
      return comments.createIssueComment(owner, repo, index, body);
    },
    listComments(owner, repo, index) {
      return comments.listIssueComments(owner, repo, index);
    },
  };
}
