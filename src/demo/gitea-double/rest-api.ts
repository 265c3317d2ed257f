/**
 * In-memory Gitea REST double (basePath /api/v1), shaped after Gitea 1.26's own OpenAPI document
 * (test/fixtures/gitea/swagger-v1.26.3.json) and compared with a real Gitea 1.26.3
 * (test/integration/gitea-double-vs-real.test.ts). Its responses are validated against the
 * swagger definitions in test/integration/gitea-rest-double.test.ts.
 *
 * `handler(req, res)` returns false (and touches nothing) for paths outside `/api/v1/`, so it can be
 * combined with a git smart-HTTP handler on the same server.
 */
import { createServer, type IncomingMessage, type ServerResponse, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export type PermissionLevel = 'none' | 'read' | 'write' | 'admin' | 'owner';

export interface DoubleUserInit {
  login: string;
  fullName?: string;
  isAdmin?: boolean;
  /** Extra tokens that authenticate as this user. */
  token?: string;
}

export interface GiteaRestDoubleOptions {
  /** Token of the bot user (`botLogin`). */
  token: string;
  botLogin: string;
  /** Other users (commenters, repo owners). The bot is added automatically. */
  users?: (DoubleUserInit | string)[];
  /** Whether the bot is a site admin (may read anyone's permission). Default true. */
  botIsSiteAdmin?: boolean;
  /** Public root URL used in html_url/clone_url; default: from the request's Host header. */
  publicUrl?: string;
  /** Clock, for deterministic timestamps. */
  now?: () => Date;
  /**
   * Called for every comment actually created through the API (as Gitea fires its `issue_comment`
   * webhook, also for the bot's own comments), with the objects a webhook payload carries.
   */
  onCommentCreated?: (event: CommentCreatedEvent) => void;
  /**
   * A branch's head commit in the repository's git storage (null: no such branch). Without it the
   * double knows no branches: `GET …/branches/{name}` answers 404 and `POST …/pulls` 422, as before.
   */
  branchHead?: (owner: string, repo: string, branch: string) => Promise<string | null>;
}

export interface CommentCreatedEvent {
  owner: string;
  repo: string;
  index: number;
  isPull: boolean;
  issue: Record<string, unknown>;
  comment: Record<string, unknown>;
  /** As the commenter sees it: `permissions` are the commenter's (Gitea signs them into the payload). */
  repository: Record<string, unknown>;
  sender: Record<string, unknown>;
  pullRequest: Record<string, unknown> | null;
}

export interface AddIssueInit {
  number: number;
  title?: string;
  body?: string;
  isPull?: boolean;
  locked?: boolean;
  /** Author login; default the repo owner. */
  user?: string;
  state?: 'open' | 'closed';
  /** For PRs. */
  head?: { ref: string; sha?: string; owner?: string; repo?: string };
  base?: { ref?: string; sha?: string };
}

export interface AddCommentInit {
  user: string;
  body: string;
  createdAt?: Date;
  updatedAt?: Date;
}

type Json = Record<string, unknown>;

interface UserRec {
  id: number;
  login: string;
  fullName: string;
  isAdmin: boolean;
  created: Date;
}
interface RepoRec {
  id: number;
  owner: string;
  name: string;
  defaultBranch: string;
  archived: boolean;
  private: boolean;
  created: Date;
  perms: Map<string, PermissionLevel>;
}
interface IssueRec {
  id: number;
  repoKey: string;
  number: number;
  title: string;
  body: string;
  isPull: boolean;
  locked: boolean;
  user: string;
  state: 'open' | 'closed';
  created: Date;
  updated: Date;
  head: { ref: string; sha: string; owner: string; repo: string };
  base: { ref: string; sha: string };
  /** Opened through `POST …/pulls`: its head follows the branch, as on Gitea. */
  followsBranch?: boolean;
}
interface CommentRec {
  id: number;
  repoKey: string;
  issueNumber: number;
  user: string;
  body: string;
  created: Date;
  updated: Date;
}

export interface RecordedRequest {
  method: string;
  path: string;
  status: number;
  at: number;
}

type PathPattern = string | RegExp;
interface FailRule {
  pattern: PathPattern;
  status: number;
  remaining: number;
  method: string | undefined;
  afterEffect: boolean;
}
interface DelayRule {
  pattern: PathPattern;
  ms: number;
  method: string | undefined;
}
interface DropRule {
  pattern: PathPattern;
  remaining: number;
  method: string | undefined;
}

export interface GiteaRestFaults {
  /**
   * The next `count` matching requests answer `status` (default 500) with a Gitea-style error.
   * `afterEffect: true` performs the request first (e.g. the comment IS created) and then answers
   * the error: Gitea did it but said it failed.
   */
  failNext(pathPattern: PathPattern, status?: number, count?: number, opts?: { method?: string; afterEffect?: boolean }): void;
  /** Every matching request waits `ms` before it is handled (0 removes the rule). */
  delay(pathPattern: PathPattern, ms: number, opts?: { method?: string }): void;
  /** The next `count` matching requests get their connection destroyed without an answer. */
  dropConnection(pathPattern: PathPattern, count?: number, opts?: { method?: string }): void;
  /**
   * POST comment answers 201 with a well-formed comment that is never stored ("accepts but loses"):
   * `true`/`false` switches it for every POST, a number loses only the next that many.
   */
  loseCreatedComments(on: boolean | number): void;
  reset(): void;
}

export interface GiteaRestDouble {
  handler(req: IncomingMessage, res: ServerResponse): boolean;
  readonly faults: GiteaRestFaults;
  /** Every request that reached the handler (after auth), in order. */
  readonly requests: RecordedRequest[];
  setPublicUrl(url: string): void;
  addUser(user: DoubleUserInit | string): Json;
  addRepo(owner: string, repo: string, opts?: { defaultBranch?: string; archived?: boolean; private?: boolean }): Json;
  setArchived(owner: string, repo: string, archived: boolean): void;
  addIssue(owner: string, repo: string, init: AddIssueInit): Json;
  setLocked(owner: string, repo: string, index: number, locked: boolean): void;
  addComment(owner: string, repo: string, index: number, init: AddCommentInit): Json;
  /** The stored comments of one issue/PR, as the API serialises them, sorted like the API. */
  comments(owner: string, repo: string, index: number): Json[];
  setPermission(owner: string, repo: string, user: string, level: PermissionLevel): void;
}

const API_PREFIX = '/api/v1/';

/** Gitea serialises times as RFC3339 at second resolution. */
export function rfc3339(d: Date): string {
  return new Date(Math.floor(d.getTime() / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}
const unixSec = (d: Date) => Math.floor(d.getTime() / 1000);

function matches(pattern: PathPattern, path: string): boolean {
  return typeof pattern === 'string' ? path.includes(pattern) : pattern.test(path);
}

function fakeSha(seed: string): string {
  let h = 0x811c9dc5;
  let out = '';
  for (let round = 0; out.length < 40; round++) {
    for (const ch of `${seed}:${round}`) h = Math.imul(h ^ ch.charCodeAt(0), 0x01000193) >>> 0;
    out += h.toString(16).padStart(8, '0');
  }
  return out.slice(0, 40);
}

export function createGiteaRestDouble(options: GiteaRestDoubleOptions): GiteaRestDouble {
  const now = options.now ?? (() => new Date());
  let publicUrl = options.publicUrl?.replace(/\/+$/, '');
  let nextUserId = 1;
  let nextRepoId = 1;
  let nextIssueId = 1;
  let nextCommentId = 1;

  const users = new Map<string, UserRec>();
  const tokens = new Map<string, string>(); // token -> login
  const repos = new Map<string, RepoRec>();
  /** Commit statuses set through the API, oldest first. */
  const commitStatuses: Array<{ repo: string; id: number; sha: string; status: string; context: string; description: string; target_url: string; creator: unknown }> = [];
  const issues = new Map<string, IssueRec>(); // `${repoKey}#${number}`
  const comments = new Map<number, CommentRec>();
  const requests: RecordedRequest[] = [];

  let failRules: FailRule[] = [];
  let delayRules: DelayRule[] = [];
  let dropRules: DropRule[] = [];
  let loseComments = false;
  let loseNextComments = 0;

  const repoKey = (o: string, r: string) => `${o.toLowerCase()}/${r.toLowerCase()}`;
  const issueKey = (rk: string, n: number) => `${rk}#${n}`;

  function addUserRec(u: DoubleUserInit | string): UserRec {
    const init = typeof u === 'string' ? { login: u } : u;
    const existing = users.get(init.login.toLowerCase());
    if (existing) return existing;
    const rec: UserRec = {
      id: nextUserId++,
      login: init.login,
      fullName: init.fullName ?? '',
      isAdmin: init.isAdmin ?? false,
      created: now(),
    };
    users.set(init.login.toLowerCase(), rec);
    if (init.token) tokens.set(init.token, init.login);
    return rec;
  }

  addUserRec({ login: options.botLogin, isAdmin: options.botIsSiteAdmin ?? true, token: options.token, fullName: 'Gitea Bot' });
  for (const u of options.users ?? []) addUserRec(u);

  // ---------------------------------------------------------------------------------------------
  // Serialisers (field sets per Gitea 1.26 modules/structs + services/convert)

  let requestBase = 'http://localhost:3000';
  const base = () => publicUrl ?? requestBase;

  function userJson(u: UserRec): Json {
    return {
      id: u.id,
      login: u.login,
      login_name: '',
      source_id: 0,
      full_name: u.fullName,
      // Gitea's no-reply placeholder: `<id>+<login>@<NO_REPLY_ADDRESS>` (checked on a real 1.26.3).
      email: `${u.id}+${u.login}@noreply.localhost`,
      avatar_url: `${base()}/avatars/${fakeSha(u.login).slice(0, 32)}`,
      html_url: `${base()}/${u.login}`,
      language: '',
      is_admin: u.isAdmin,
      last_login: rfc3339(u.created),
      created: rfc3339(u.created),
      restricted: false,
      active: true,
      prohibit_login: false,
      location: '',
      website: '',
      description: '',
      visibility: 'public',
      followers_count: 0,
      following_count: 0,
      starred_repos_count: 0,
      username: u.login,
    };
  }

  function userByLogin(login: string): UserRec {
    return users.get(login.toLowerCase()) ?? addUserRec(login);
  }

  function permissionOf(repo: RepoRec, login: string): PermissionLevel {
    if (repo.owner.toLowerCase() === login.toLowerCase()) return 'owner';
    const u = users.get(login.toLowerCase());
    if (u?.isAdmin) return 'admin';
    return repo.perms.get(login.toLowerCase()) ?? (repo.private ? 'none' : 'read');
  }

  function repoJson(r: RepoRec, viewer: string | undefined): Json {
    const p = viewer ? permissionOf(r, viewer) : 'read';
    const owner = userByLogin(r.owner);
    const html = `${base()}/${r.owner}/${r.name}`;
    const host = new URL(base()).hostname;
    const issuesOpen = [...issues.values()].filter((i) => i.repoKey === repoKey(r.owner, r.name) && i.state === 'open');
    return {
      id: r.id,
      owner: userJson(owner),
      name: r.name,
      full_name: `${r.owner}/${r.name}`,
      description: '',
      empty: false,
      private: r.private,
      fork: false,
      template: false,
      mirror: false,
      size: 0,
      language: '',
      languages_url: `${base()}/api/v1/repos/${r.owner}/${r.name}/languages`,
      html_url: html,
      url: `${base()}/api/v1/repos/${r.owner}/${r.name}`,
      link: '',
      ssh_url: `git@${host}:${r.owner}/${r.name}.git`,
      clone_url: `${html}.git`,
      original_url: '',
      website: '',
      stars_count: 0,
      forks_count: 0,
      watchers_count: 0,
      open_issues_count: issuesOpen.filter((i) => !i.isPull).length,
      open_pr_counter: issuesOpen.filter((i) => i.isPull).length,
      release_counter: 0,
      branch_count: 1,
      default_branch: r.defaultBranch,
      archived: r.archived,
      created_at: rfc3339(r.created),
      updated_at: rfc3339(r.created),
      archived_at: rfc3339(r.archived ? r.created : new Date(0)),
      permissions: { admin: p === 'admin' || p === 'owner', push: p !== 'none' && p !== 'read', pull: p !== 'none' },
      has_code: true,
      has_issues: true,
      internal_tracker: { enable_time_tracker: true, allow_only_contributors_to_track_time: true, enable_issue_dependencies: true },
      has_wiki: true,
      has_pull_requests: true,
      has_projects: true,
      projects_mode: 'all',
      has_releases: true,
      has_packages: true,
      has_actions: true,
      ignore_whitespace_conflicts: false,
      allow_merge_commits: true,
      allow_rebase: true,
      allow_rebase_explicit: true,
      allow_squash_merge: true,
      allow_fast_forward_only_merge: true,
      allow_rebase_update: true,
      allow_manual_merge: false,
      autodetect_manual_merge: false,
      default_delete_branch_after_merge: false,
      default_merge_style: 'merge',
      default_allow_maintainer_edit: false,
      avatar_url: '',
      internal: false,
      mirror_interval: '',
      object_format_name: 'sha1',
      mirror_updated: rfc3339(new Date(0)),
      topics: [],
      licenses: [],
    };
  }

  function resourceHtml(i: IssueRec): string {
    const r = repos.get(i.repoKey)!;
    return `${base()}/${r.owner}/${r.name}/${i.isPull ? 'pulls' : 'issues'}/${i.number}`;
  }

  function commentJson(c: CommentRec): Json {
    const i = issues.get(issueKey(c.repoKey, c.issueNumber))!;
    const html = resourceHtml(i);
    return {
      id: c.id,
      html_url: `${html}#issuecomment-${c.id}`,
      pull_request_url: i.isPull ? html : '',
      issue_url: i.isPull ? '' : html,
      user: userJson(userByLogin(c.user)),
      original_author: '',
      original_author_id: 0,
      body: c.body,
      assets: [],
      created_at: rfc3339(c.created),
      updated_at: rfc3339(c.updated),
    };
  }

  function issueJson(i: IssueRec): Json {
    const r = repos.get(i.repoKey)!;
    const commentCount = [...comments.values()].filter((c) => c.repoKey === i.repoKey && c.issueNumber === i.number).length;
    return {
      id: i.id,
      url: `${base()}/api/v1/repos/${r.owner}/${r.name}/issues/${i.number}`,
      html_url: resourceHtml(i),
      number: i.number,
      user: userJson(userByLogin(i.user)),
      original_author: '',
      original_author_id: 0,
      title: i.title,
      body: i.body,
      ref: '',
      assets: [],
      labels: [],
      milestone: null,
      assignee: null,
      assignees: null,
      state: i.state,
      is_locked: i.locked,
      comments: commentCount,
      created_at: rfc3339(i.created),
      updated_at: rfc3339(i.updated),
      closed_at: null,
      due_date: null,
      time_estimate: 0,
      pull_request: i.isPull ? { merged: false, merged_at: null, draft: false, html_url: resourceHtml(i) } : null,
      repository: { id: r.id, name: r.name, owner: r.owner, full_name: `${r.owner}/${r.name}` },
      pin_order: 0,
      content_version: 0,
    };
  }

  function pullJson(i: IssueRec, viewer: string): Json {
    const r = repos.get(i.repoKey)!;
    const headRepo = repos.get(repoKey(i.head.owner, i.head.repo)) ?? r;
    const html = resourceHtml(i);
    const issue = issueJson(i);
    return {
      id: i.id,
      url: html,
      number: i.number,
      user: issue.user,
      title: i.title,
      body: i.body,
      labels: [],
      milestone: null,
      assignee: null,
      // A pull request serialises these as empty lists (an issue's `assignees` is null).
      assignees: [],
      requested_reviewers: [],
      requested_reviewers_teams: [],
      state: i.state,
      draft: false,
      is_locked: i.locked,
      comments: issue.comments,
      additions: 0,
      deletions: 0,
      changed_files: 0,
      html_url: html,
      diff_url: `${html}.diff`,
      patch_url: `${html}.patch`,
      mergeable: true,
      merged: false,
      merged_at: null,
      merge_commit_sha: null,
      merged_by: null,
      allow_maintainer_edit: false,
      base: {
        label: i.base.ref,
        ref: i.base.ref,
        sha: i.base.sha,
        repo_id: r.id,
        repo: repoJson(r, viewer),
      },
      head: {
        label: headRepo === r ? i.head.ref : `${headRepo.owner}:${i.head.ref}`,
        ref: i.head.ref,
        sha: i.head.sha,
        repo_id: headRepo.id,
        repo: repoJson(headRepo, viewer),
      },
      merge_base: i.base.sha,
      due_date: null,
      created_at: rfc3339(i.created),
      updated_at: rfc3339(i.updated),
      closed_at: null,
      pin_order: 0,
      content_version: 0,
    };
  }

  /** Sorted like Gitea: created time, then id. */
  function sortComments(list: CommentRec[]): CommentRec[] {
    return list.sort((a, b) => unixSec(a.created) - unixSec(b.created) || a.id - b.id);
  }

  // ---------------------------------------------------------------------------------------------
  // HTTP

  function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
    if (res.headersSent || res.destroyed) return;
    const text = body === undefined ? '' : JSON.stringify(body);
    res.writeHead(status, {
      ...(body === undefined ? {} : { 'Content-Type': 'application/json;charset=utf-8' }),
      'Content-Length': String(Buffer.byteLength(text)),
      ...headers,
    });
    res.end(text);
  }
  const apiError = (message: string) => ({ message, url: `${base()}/api/swagger` });
  // As real Gitea 1.26.3 answers a missing repository, issue or user: `errors` is null, not a list.
  const notFound = () => ({ errors: null, message: 'not found', url: `${base()}/api/swagger` });
  const commentNotFound = (id: number) => ({ errors: [`comment does not exist [id: ${id}, issue_id: 0]`], message: 'not found', url: `${base()}/api/swagger` });

  function parseTimeParam(v: string | null): Date | undefined | 'invalid' {
    if (v === null || v === '') return undefined;
    const d = new Date(v);
    return Number.isNaN(d.getTime()) ? 'invalid' : d;
  }

  function readBody(req: IncomingMessage): Promise<string> {
    return new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
      req.on('error', reject);
    });
  }

  interface Ctx {
    method: string;
    path: string; // after /api/v1
    query: URLSearchParams;
    viewer: UserRec;
    body: () => Promise<Json>;
  }
  type Answer = { status: number; body?: unknown; headers?: Record<string, string> };

  async function route(ctx: Ctx): Promise<Answer> {
    const { method, path, query, viewer } = ctx;
    const seg = path.split('/').filter(Boolean).map(decodeURIComponent);

    if (seg.length === 1 && seg[0] === 'user' && method === 'GET') return { status: 200, body: userJson(viewer) };
    if (seg.length === 1 && seg[0] === 'version' && method === 'GET') return { status: 200, body: { version: '1.26.3' } };
    // GET /repositories/{id}
    if (seg.length === 2 && seg[0] === 'repositories' && method === 'GET') {
      const byId = [...repos.values()].find((r) => String(r.id) === seg[1]);
      if (!byId || permissionOf(byId, viewer.login) === 'none') return { status: 404, body: notFound() };
      return { status: 200, body: repoJson(byId, viewer.login) };
    }

    if (seg[0] !== 'repos' || seg.length < 3) return { status: 404, body: notFound() };
    const [, owner, name] = seg as [string, string, string];
    const rk = repoKey(owner, name);
    const repo = repos.get(rk);
    if (!repo) return { status: 404, body: notFound() };
    const viewerPerm = permissionOf(repo, viewer.login);
    if (viewerPerm === 'none') return { status: 404, body: notFound() };
    const rest = seg.slice(3);

    // GET /repos/{o}/{r}
    if (rest.length === 0 && method === 'GET') return { status: 200, body: repoJson(repo, viewer.login) };

    // /repos/{o}/{r}/collaborators/{user}/permission
    if (rest.length === 3 && rest[0] === 'collaborators' && rest[2] === 'permission' && method === 'GET') {
      // Real Gitea checks who asks before it looks the user up: a write collaborator asking about an
      // unknown login gets 403, not 404.
      const asked = rest[1]!.toLowerCase();
      const allowed = viewer.isAdmin || viewerPerm === 'admin' || viewerPerm === 'owner' || viewer.login.toLowerCase() === asked;
      if (!allowed) return { status: 403, body: apiError('Only admins can query all permissions, repo admins can query all repo permissions, collaborators can query only their own') };
      const target = users.get(asked);
      if (!target) return { status: 404, body: apiError(`user does not exist [uid: 0, name: ${asked}]`) };
      const level = permissionOf(repo, target.login);
      return { status: 200, body: { permission: level, role_name: level, user: userJson(target) } };
    }

    if (rest[0] === 'issues' && rest[1] === 'comments') {
      // GET /repos/{o}/{r}/issues/comments (paged)
      if (rest.length === 2 && method === 'GET') {
        const since = parseTimeParam(query.get('since'));
        const before = parseTimeParam(query.get('before'));
        if (since === 'invalid' || before === 'invalid') return { status: 422, body: apiError('invalid time') };
        const page = Math.max(1, Number.parseInt(query.get('page') ?? '1', 10) || 1);
        let limit = Number.parseInt(query.get('limit') ?? '30', 10) || 30;
        limit = Math.min(Math.max(limit, 1), 50);
        const all = sortComments(
          [...comments.values()].filter((c) => c.repoKey === rk && inWindow(c, since, before)),
        );
        const pageItems = all.slice((page - 1) * limit, page * limit);
        return {
          status: 200,
          body: pageItems.map(commentJson),
          headers: { 'X-Total-Count': String(all.length), 'Access-Control-Expose-Headers': 'X-Total-Count' },
        };
      }
      // /repos/{o}/{r}/issues/comments/{id}
      if (rest.length === 3) {
        const id = Number(rest[2]);
        const c = Number.isInteger(id) ? comments.get(id) : undefined;
        if (!c || c.repoKey !== rk) return { status: 404, body: commentNotFound(id) };
        if (method === 'GET') return { status: 200, body: commentJson(c) };
        const canModify = c.user.toLowerCase() === viewer.login.toLowerCase() || viewer.isAdmin || viewerPerm === 'admin' || viewerPerm === 'owner';
        if (method === 'PATCH') {
          if (repo.archived) return { status: 423, body: apiError('repo is archived') };
          if (!canModify) return { status: 403, body: apiError('user is not the comment poster') };
          const b = await ctx.body();
          if (typeof b.body !== 'string') return { status: 422, body: apiError('body is required') };
          if (b.body !== c.body) {
            c.body = b.body;
            c.updated = now();
          }
          return { status: 200, body: commentJson(c) };
        }
        if (method === 'DELETE') {
          if (!canModify) return { status: 403, body: apiError('user is not the comment poster') };
          comments.delete(c.id);
          return { status: 204 };
        }
      }
      return { status: 405, body: apiError('method not allowed') };
    }

    // GET /repos/{o}/{r}/branches/{name} (the name may hold slashes, sent encoded)
    if (rest[0] === 'branches' && rest.length >= 2 && method === 'GET') {
      const name = rest.slice(1).join('/');
      const sha = options.branchHead ? await options.branchHead(repo.owner, repo.name, name) : null;
      if (!sha) return { status: 404, body: apiError(`branch does not exist [repo_id: ${repo.id} name: ${name}]`) };
      return { status: 200, body: { name, commit: { id: sha, message: '', url: `${base()}/${repo.owner}/${repo.name}/commit/${sha}` }, protected: false } };
    }

    // GET /repos/{o}/{r}/pulls (state, page, limit) and POST /repos/{o}/{r}/pulls
    if (rest[0] === 'pulls' && rest.length === 1) {
      if (method === 'GET') {
        const state = query.get('state') ?? 'open';
        const page = Math.max(1, Number.parseInt(query.get('page') ?? '1', 10) || 1);
        const limit = Math.min(Math.max(Number.parseInt(query.get('limit') ?? '30', 10) || 30, 1), 50);
        const all = [...issues.values()]
          .filter((i) => i.repoKey === rk && i.isPull && (state === 'all' || i.state === state))
          .sort((a, b) => b.number - a.number);
        const pageItems = all.slice((page - 1) * limit, page * limit);
        await Promise.all(pageItems.map(refreshHead));
        return { status: 200, body: pageItems.map((i) => pullJson(i, viewer.login)), headers: { 'X-Total-Count': String(all.length) } };
      }
      if (method === 'POST') {
        if (viewerPerm === 'read') return { status: 403, body: apiError('user should have permission to write to the repository') };
        const b = await ctx.body();
        const head = typeof b.head === 'string' ? b.head : '';
        const baseRef = typeof b.base === 'string' ? b.base : '';
        const title = typeof b.title === 'string' ? b.title : '';
        if (!head || !baseRef || !title) return { status: 422, body: apiError('[Head] [Base] [Title]: Required') };
        const headSha = options.branchHead ? await options.branchHead(repo.owner, repo.name, head) : null;
        const baseSha = options.branchHead ? await options.branchHead(repo.owner, repo.name, baseRef) : null;
        if (!headSha || !baseSha) return { status: 404, body: notFound() };
        const existing = [...issues.values()].find((i) => i.repoKey === rk && i.isPull && i.state === 'open' && i.head.ref === head && i.base.ref === baseRef);
        if (existing) return { status: 409, body: apiError(`pull request already exists for these targets [id: ${existing.id}, issue_id: ${existing.id}, head_repo_id: ${repo.id}, base_repo_id: ${repo.id}, head_branch: ${head}, base_branch: ${baseRef}]`) };
        const number = Math.max(0, ...[...issues.values()].filter((i) => i.repoKey === rk).map((i) => i.number)) + 1;
        const t = now();
        const rec: IssueRec = {
          id: nextIssueId++, repoKey: rk, number, title, body: typeof b.body === 'string' ? b.body : '', isPull: true, locked: false,
          user: viewer.login, state: 'open', created: t, updated: t,
          head: { ref: head, sha: headSha, owner: repo.owner, repo: repo.name }, base: { ref: baseRef, sha: baseSha }, followsBranch: true,
        };
        issues.set(issueKey(rk, number), rec);
        return { status: 201, body: pullJson(rec, viewer.login) };
      }
      return { status: 405, body: apiError('method not allowed') };
    }

    // /repos/{o}/{r}/issues/{index}[/comments] and /pulls/{index}
    if ((rest[0] === 'issues' || rest[0] === 'pulls') && rest.length >= 2) {
      const index = Number(rest[1]);
      const issue = Number.isInteger(index) ? issues.get(issueKey(rk, index)) : undefined;
      if (!issue) {
        // Real Gitea 1.26.3 answers 500 with an empty message (not 404) to reading or posting comments
        // of an issue that does not exist: its handler treats the failed lookup as an internal error.
        if (rest[0] === 'issues' && rest.length === 3 && rest[2] === 'comments') return { status: 500, body: apiError('') };
        return { status: 404, body: notFound() };
      }

      if (rest.length === 2 && method === 'GET') {
        if (rest[0] === 'pulls') {
          if (!issue.isPull) return { status: 404, body: notFound() };
          await refreshHead(issue);
          return { status: 200, body: pullJson(issue, viewer.login) };
        }
        return { status: 200, body: issueJson(issue) };
      }

      if (rest[0] === 'issues' && rest.length === 3 && rest[2] === 'comments') {
        if (method === 'GET') {
          const since = parseTimeParam(query.get('since'));
          const before = parseTimeParam(query.get('before'));
          if (since === 'invalid' || before === 'invalid') return { status: 422, body: apiError('invalid time') };
          const list = sortComments(
            [...comments.values()].filter((c) => c.repoKey === rk && c.issueNumber === index && inWindow(c, since, before)),
          );
          return { status: 200, body: list.map(commentJson) };
        }
        if (method === 'POST') {
          const b = await ctx.body();
          if (typeof b.body !== 'string' || b.body.length === 0) return { status: 422, body: apiError('[Body]: Required') };
          if (repo.archived) return { status: 423, body: apiError(`repo is archived`) };
          // Real Gitea lets writers/admins comment on a locked issue; the double refuses everyone,
          // which is the case the service must handle (a bot without write access).
          if (issue.locked) return { status: 403, body: apiError('CreateIssueComment: issue is locked') };
          const t = now();
          const rec: CommentRec = { id: nextCommentId++, repoKey: rk, issueNumber: index, user: viewer.login, body: b.body, created: t, updated: t };
          const lose = loseComments || loseNextComments > 0;
          if (loseNextComments > 0) loseNextComments -= 1;
          if (!lose) {
            comments.set(rec.id, rec);
            issue.updated = t;
            options.onCommentCreated?.({
              owner: repo.owner,
              repo: repo.name,
              index,
              isPull: issue.isPull,
              issue: issueJson(issue),
              comment: commentJson(rec),
              repository: repoJson(repo, viewer.login),
              sender: userJson(viewer),
              pullRequest: issue.isPull ? pullJson(issue, viewer.login) : null,
            });
          }
          return { status: 201, body: commentJson(rec) };
        }
        return { status: 405, body: apiError('method not allowed') };
      }
    }
    // POST /repos/{o}/{r}/statuses/{sha} (writers only) and GET /repos/{o}/{r}/commits/{sha}/statuses
    if (rest[0] === 'statuses' && rest.length === 2 && method === 'POST') {
      if (viewerPerm === 'read') return { status: 403, body: apiError('write access required') };
      const b = ((await ctx.body()) ?? {}) as { state?: string; context?: string; description?: string; target_url?: string };
      const status = { id: commitStatuses.length + 1, sha: rest[1]!, status: b.state ?? 'pending', context: b.context ?? 'default', description: b.description ?? '', target_url: b.target_url ?? base(), creator: userJson(viewer) };
      commitStatuses.push({ repo: rk, ...status });
      return { status: 201, body: status };
    }
    if (rest[0] === 'commits' && rest[2] === 'statuses' && rest.length === 3 && method === 'GET') {
      return { status: 200, body: commitStatuses.filter((c) => c.repo === rk && c.sha === rest[1]).reverse() };
    }
    return { status: 404, body: notFound() };
  }

  /** A pull request opened through the API shows its branch's current head, as Gitea does after a push. */
  async function refreshHead(i: IssueRec): Promise<void> {
    if (!i.followsBranch || !options.branchHead) return;
    const r = repos.get(i.repoKey)!;
    const sha = await options.branchHead(r.owner, r.name, i.head.ref);
    if (sha && sha !== i.head.sha) {
      i.head.sha = sha;
      i.updated = now();
    }
  }

  function inWindow(c: CommentRec, since: Date | undefined, before: Date | undefined): boolean {
    const u = unixSec(c.updated);
    if (since && u < unixSec(since)) return false;
    if (before && u > unixSec(before)) return false;
    return true;
  }

  async function handle(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    const method = (req.method ?? 'GET').toUpperCase();
    const fullPath = url.pathname;
    const apiPath = fullPath.slice(API_PREFIX.length - 1); // keeps the leading '/'
    if (!publicUrl && req.headers.host) requestBase = `http://${req.headers.host}`;

    const record = (status: number) => requests.push({ method, path: fullPath, status, at: Date.now() });

    for (const d of delayRules) {
      if ((!d.method || d.method === method) && matches(d.pattern, fullPath)) await new Promise((r) => setTimeout(r, d.ms));
    }
    if (res.destroyed) return;

    const drop = dropRules.find((r) => r.remaining > 0 && (!r.method || r.method === method) && matches(r.pattern, fullPath));
    if (drop) {
      drop.remaining -= 1;
      record(0);
      req.socket.destroy();
      return;
    }

    const auth = req.headers.authorization ?? '';
    const m = /^(?:token|bearer)\s+(\S+)$/i.exec(auth.trim());
    const login = m ? tokens.get(m[1]!) : undefined;
    const viewer = login ? users.get(login.toLowerCase()) : undefined;
    if (!viewer && !m && method === 'GET' && apiPath.startsWith('/repos/')) {
      // Real Gitea lets anonymous readers in (REQUIRE_SIGNIN_VIEW=false) and hides a private
      // repository behind 404, not 401. The double's repositories are all treated as hidden.
      record(404);
      send(res, 404, notFound());
      return;
    }
    if (!viewer) {
      record(401);
      send(res, 401, apiError(m ? 'invalid username, password or token' : 'token is required'));
      return;
    }

    const fail = failRules.find((r) => r.remaining > 0 && (!r.method || r.method === method) && matches(r.pattern, fullPath));
    if (fail) fail.remaining -= 1;
    if (fail && !fail.afterEffect) {
      record(fail.status);
      send(res, fail.status, apiError('injected fault'));
      return;
    }

    let bodyCache: Promise<Json> | undefined;
    const ctx: Ctx = {
      method,
      path: apiPath,
      query: url.searchParams,
      viewer,
      body: () =>
        (bodyCache ??= readBody(req).then((t) => {
          try {
            const v: unknown = t ? JSON.parse(t) : {};
            return v && typeof v === 'object' ? (v as Json) : {};
          } catch {
            return {};
          }
        })),
    };
    let answer: Answer;
    try {
      answer = await route(ctx);
    } catch (e) {
      answer = { status: 500, body: apiError(`double error: ${(e as Error).message}`) };
    }
    if (fail) answer = { status: fail.status, body: apiError('injected fault (after effect)') };
    record(answer.status);
    send(res, answer.status, answer.body, answer.headers);
  }

  const faults: GiteaRestFaults = {
    failNext(pattern, status = 500, count = 1, opts = {}) {
      failRules.push({ pattern, status, remaining: count, method: opts.method?.toUpperCase(), afterEffect: opts.afterEffect ?? false });
    },
    delay(pattern, ms, opts = {}) {
      delayRules = delayRules.filter((d) => String(d.pattern) !== String(pattern) || d.method !== opts.method?.toUpperCase());
      if (ms > 0) delayRules.push({ pattern, ms, method: opts.method?.toUpperCase() });
    },
    dropConnection(pattern, count = 1, opts = {}) {
      dropRules.push({ pattern, remaining: count, method: opts.method?.toUpperCase() });
    },
    loseCreatedComments(on) {
      if (typeof on === 'number') loseNextComments = Math.max(0, on);
      else loseComments = on;
    },
    reset() {
      failRules = [];
      delayRules = [];
      dropRules = [];
      loseComments = false;
      loseNextComments = 0;
    },
  };

  function mustRepo(owner: string, repo: string): RepoRec {
    const r = repos.get(repoKey(owner, repo));
    if (!r) throw new Error(`gitea double: no repo ${owner}/${repo}`);
    return r;
  }
  function mustIssue(owner: string, repo: string, index: number): IssueRec {
    const i = issues.get(issueKey(repoKey(owner, repo), index));
    if (!i) throw new Error(`gitea double: no issue ${owner}/${repo}#${index}`);
    return i;
  }

  return {
    handler(req, res) {
      const url = new URL(req.url ?? '/', 'http://double.invalid');
      if (!url.pathname.startsWith(API_PREFIX)) return false;
      handle(req, res, url).catch((e: unknown) => {
        send(res, 500, apiError(`double error: ${(e as Error).message}`));
      });
      return true;
    },
    faults,
    requests,
    setPublicUrl(url) {
      publicUrl = url.replace(/\/+$/, '');
    },
    addUser(u) {
      return userJson(addUserRec(u));
    },
    addRepo(owner, repo, opts = {}) {
      userByLogin(owner);
      const rk = repoKey(owner, repo);
      let r = repos.get(rk);
      if (!r) {
        r = {
          id: nextRepoId++,
          owner,
          name: repo,
          defaultBranch: opts.defaultBranch ?? 'main',
          archived: opts.archived ?? false,
          private: opts.private ?? false,
          created: now(),
          perms: new Map(),
        };
        repos.set(rk, r);
      }
      return repoJson(r, options.botLogin);
    },
    setArchived(owner, repo, archived) {
      mustRepo(owner, repo).archived = archived;
    },
    addIssue(owner, repo, init) {
      const r = mustRepo(owner, repo);
      const rk = repoKey(owner, repo);
      if (issues.has(issueKey(rk, init.number))) throw new Error(`gitea double: ${owner}/${repo}#${init.number} exists`);
      const t = now();
      const author = init.user ?? owner;
      userByLogin(author);
      const headRef = init.head?.ref ?? `pr-${init.number}`;
      const rec: IssueRec = {
        id: nextIssueId++,
        repoKey: rk,
        number: init.number,
        title: init.title ?? `Issue ${init.number}`,
        body: init.body ?? '',
        isPull: init.isPull ?? false,
        locked: init.locked ?? false,
        user: author,
        state: init.state ?? 'open',
        created: t,
        updated: t,
        head: {
          ref: headRef,
          sha: init.head?.sha ?? fakeSha(`${rk}:${headRef}`),
          owner: init.head?.owner ?? r.owner,
          repo: init.head?.repo ?? r.name,
        },
        base: { ref: init.base?.ref ?? r.defaultBranch, sha: init.base?.sha ?? fakeSha(`${rk}:${r.defaultBranch}`) },
      };
      issues.set(issueKey(rk, init.number), rec);
      return issueJson(rec);
    },
    setLocked(owner, repo, index, locked) {
      mustIssue(owner, repo, index).locked = locked;
    },
    addComment(owner, repo, index, init) {
      const issue = mustIssue(owner, repo, index);
      userByLogin(init.user);
      const created = init.createdAt ?? now();
      const rec: CommentRec = {
        id: nextCommentId++,
        repoKey: issue.repoKey,
        issueNumber: index,
        user: init.user,
        body: init.body,
        created,
        updated: init.updatedAt ?? created,
      };
      comments.set(rec.id, rec);
      return commentJson(rec);
    },
    comments(owner, repo, index) {
      const rk = repoKey(owner, repo);
      return sortComments([...comments.values()].filter((c) => c.repoKey === rk && c.issueNumber === index)).map(commentJson);
    },
    setPermission(owner, repo, user, level) {
      userByLogin(user);
      mustRepo(owner, repo).perms.set(user.toLowerCase(), level);
    },
  };
}

export interface StartedGiteaRestServer {
  server: Server;
  /** Root URL, e.g. http://127.0.0.1:41234 (the API is under /api/v1). */
  url: string;
  close(): Promise<void>;
}

/** Serves the double alone on 127.0.0.1 with an ephemeral port. */
export async function startGiteaRestServer(double: GiteaRestDouble): Promise<StartedGiteaRestServer> {
  const server = createServer((req, res) => {
    if (!double.handler(req, res)) {
      res.writeHead(404, { 'Content-Type': 'text/plain' });
      res.end('not found');
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://127.0.0.1:${port}`;
  double.setPublicUrl(url);
  return {
    server,
    url,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
