/**
 * Typed Gitea REST client for comments, permissions, users and repositories.
 *
 * Request paths, parameters and bodies are typed by `paths` generated from Gitea's own OpenAPI
 * document (scripts/gen-gitea-client.mjs → ./generated/gitea-api.ts) and sent with openapi-fetch.
 * The responses the service relies on are checked at run time (zod) and anything that does not
 * match becomes `gitea_bad_response`. Token, timeouts and retries: gitea-transport.ts (the same
 * policy for src/publish/gitea-pulls.ts).
 */
import { z } from 'zod';
import type { components } from './generated/gitea-api.js';
import { createGiteaTransport, type GiteaClientOptions } from './gitea-transport.js';

export { GITEA_ERROR_CODES, GiteaError, isGiteaError, type GiteaErrorCode } from './gitea-error.js';
export type { GiteaClientOptions } from './gitea-transport.js';

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
  /** One page of a pull request's reviews, oldest first (a review delivery names no review id). */
  listPullReviews(owner: string, repo: string, index: number, page: number, limit: number): Promise<GiteaPullReview[]>;
  /** A review's line comments with path, position and diff hunk. */
  listPullReviewComments(owner: string, repo: string, index: number, id: number): Promise<GiteaPullReviewComment[]>;
  /** `GET /repos/{o}/{r}/pulls/{index}`: who opened it (the "request changes on the bot's PR" option). */
  getPullRequestAuthor(owner: string, repo: string, index: number): Promise<{ login: string }>;
  /** Sets a commit status (`POST /repos/{o}/{r}/statuses/{sha}`); Gitea shows the latest per context. */
  createCommitStatus(owner: string, repo: string, sha: string, status: CommitStatusInput): Promise<void>;
}

const pullReviewSchema = z.looseObject({
  id: z.number().int().positive(),
  body: z.string(),
  state: z.string(),
  user: userSchema,
  submitted_at: z.string(),
  html_url: z.string(),
  commit_id: z.string().nullish(),
  dismissed: z.boolean().nullish(),
  comments_count: z.number().int().nullish(),
});
const pullReviewCommentSchema = z.looseObject({
  id: z.number().int().positive(),
  body: z.string(),
  user: userSchema,
  path: z.string(),
  position: z.number().int(),
  original_position: z.number().int(),
  diff_hunk: z.string(),
  html_url: z.string(),
  commit_id: z.string().nullish(),
  created_at: z.string(),
  updated_at: z.string(),
  pull_request_review_id: z.number().int(),
});
export type GiteaPullReview = z.infer<typeof pullReviewSchema>;
export type GiteaPullReviewComment = z.infer<typeof pullReviewCommentSchema>;

export interface CommitStatusInput {
  state: 'pending' | 'success' | 'failure' | 'error';
  context: string;
  description: string;
  targetUrl: string | null;
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

export function createGiteaClient(options: GiteaClientOptions): GiteaClient {
  const { baseUrl, client, call } = createGiteaTransport(options);
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

    listPullReviews(owner, repo, index, page, limit) {
      return call<GiteaPullReview[]>(
        'GET',
        '/repos/{owner}/{repo}/pulls/{index}/reviews',
        (signal) => client.GET('/repos/{owner}/{repo}/pulls/{index}/reviews', { params: { path: { owner, repo, index }, query: { page, limit } }, signal }),
        200,
        z.array(pullReviewSchema),
      );
    },

    listPullReviewComments(owner, repo, index, id) {
      return call<GiteaPullReviewComment[]>(
        'GET',
        '/repos/{owner}/{repo}/pulls/{index}/reviews/{id}/comments',
        (signal) => client.GET('/repos/{owner}/{repo}/pulls/{index}/reviews/{id}/comments', { params: { path: { owner, repo, index, id } }, signal }),
        200,
        z.array(pullReviewCommentSchema),
      );
    },

    async getPullRequestAuthor(owner, repo, index) {
      const pr = await call<{ user: GiteaUser }>(
        'GET',
        '/repos/{owner}/{repo}/pulls/{index}',
        (signal) => client.GET('/repos/{owner}/{repo}/pulls/{index}', { params: { path: { owner, repo, index } }, signal }),
        200,
        z.looseObject({ user: userSchema }),
      );
      return { login: pr.user.login };
    },

    async createCommitStatus(owner, repo, sha, status) {
      await call<unknown>(
        'POST',
        '/repos/{owner}/{repo}/statuses/{sha}',
        (signal) =>
          client.POST('/repos/{owner}/{repo}/statuses/{sha}', {
            params: { path: { owner, repo, sha } },
            body: { state: status.state, context: status.context, description: status.description, ...(status.targetUrl !== null ? { target_url: status.targetUrl } : {}) },
            signal,
          }),
        201,
        z.looseObject({}),
      );
    },
  };
}
