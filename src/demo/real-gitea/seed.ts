/**
 * A real Gitea seeded for the demo and the service's tests, through its own CLI and REST API:
 *
 * | login        | what                                                          |
 * |--------------|---------------------------------------------------------------|
 * | `gitea-admin`| site administrator (created with `gitea admin user create`)   |
 * | `acme`       | owns the private repository `acme/widget`                     |
 * | `alice`      | collaborator with write access (may summon the bot)           |
 * | `bob`        | collaborator with read access (refused); forks the repository |
 * | `ccweb-bot`  | the bot: collaborator with write, token scopes as docs/getting-started.md makes them |
 *
 * `acme/widget` (private, default branch `main`) has `README.md`, `src/login.js`,
 * `test/login.test.js`; issue #1 by alice; #2 a pull request by alice from the branch
 * `feature/login-retry` of the same repository; #3 a pull request by bob from his fork
 * `bob/widget` (branch `fix-typo`). Issues and pull requests share one number sequence.
 *
 * Comments are made by these users through the API (`comment(login, …)`), so Gitea itself sends the
 * webhooks; `addWebhook` points a repository webhook at any URL on 127.0.0.1. Every user signs in to
 * the web UI with `password` (what the demo prints for alice and bob).
 */
import { startRealGitea, type RealGitea, type RealGiteaOptions } from './gitea-process.js';
import { eventually, giteaApi, type ApiResult } from './api.js';

export const SEED_FILES: Record<string, string> = {
  'README.md': '# widget\n\nA tiny project for the ccweb-gitea tests.\n',
  'src/login.js': 'export function login(user, password) {\n  return user === "demo" && password === "demo";\n}\n',
  'test/login.test.js': 'import { login } from "../src/login.js";\nif (!login("demo", "demo")) throw new Error("login failed");\n',
};

export type Role = 'admin' | 'owner' | 'writer' | 'reader' | 'bot';

export interface SeededUser {
  login: string;
  password: string;
  email: string;
  /** A personal access token (the bot's has the documented scopes; the others `all`). */
  token: string;
}

export interface GiteaComment {
  id: number;
  body: string;
  user: { id: number; login: string };
  html_url: string;
  created_at: string;
  updated_at: string;
  [k: string]: unknown;
}

export interface SeededGitea {
  gitea: RealGitea;
  url: string;
  version: string;
  owner: string;
  repo: string;
  users: Record<Role, SeededUser>;
  /** Token scopes the bot's token was created with. */
  botScopes: string[];
  issueNumber: number;
  prNumber: number;
  prHeadRef: string;
  prHeadSha: string;
  /** Bob's pull request from his fork (null with `forkPullRequest: false`). */
  forkPrNumber: number | null;
  forkPrHeadSha: string | null;
  /** A REST call as one of the seeded users (by login), e.g. `api('alice', 'GET', '/user')`. */
  api<T = unknown>(login: string, method: string, path: string, body?: unknown, expect?: number | number[]): Promise<ApiResult<T>>;
  userByLogin(login: string): SeededUser;
  /** Opens an issue as `login`; resolves with its number. */
  createIssue(login: string, title: string, body?: string): Promise<number>;
  /** `login` comments on issue/PR `index` through the API (Gitea then fires the webhook). */
  comment(login: string, index: number, body: string): Promise<GiteaComment>;
  /** All comments of issue/PR `index`, oldest first (read as the owner). */
  comments(index: number): Promise<GiteaComment[]>;
  /** Adds a repository webhook (as the owner) for comment events; resolves with its id. */
  addWebhook(url: string, secret: string, options?: { contentType?: 'json' | 'form'; events?: string[] }): Promise<number>;
  setWebhookUrl(hookId: number, url: string): Promise<void>;
  close(): Promise<void>;
}

export interface SeedOptions extends RealGiteaOptions {
  botLogin?: string;
  /** The bot's collaborator permission on acme/widget. Default BOT_PERMISSION. */
  botPermission?: 'write' | 'admin';
  /** The bot's token scopes. Default BOT_SCOPES (no `write:repository`: no change delivery). */
  botScopes?: string[];
  /** Bob's fork and his pull request #3 from it. Default true; the demo does without (a faster start). */
  forkPullRequest?: boolean;
}

export const BOT_SCOPES = ['write:issue', 'read:repository', 'read:user'];
/**
 * The bot's access to acme/widget in the harness's own tests. Note: real Gitea answers
 * `GET /repos/{o}/{r}/collaborators/{other user}/permission` only to a repository or site admin (403 to a
 * write collaborator), so a service that always confirms the commenter's access through that API (it
 * does for every mention) needs SERVICE_BOT_PERMISSION, as docs/operations.md asks operators for.
 */
export const BOT_PERMISSION: 'write' | 'admin' = 'write';
/** The bot's access when the service runs against the seeded Gitea (service-environment.ts). */
export const SERVICE_BOT_PERMISSION: 'write' | 'admin' = 'admin';

export async function startSeededGitea(options: SeedOptions = {}): Promise<SeededGitea> {
  const gitea = await startRealGitea(options);
  try {
    return await seed(gitea, options);
  } catch (e) {
    const out = gitea.output();
    await gitea.close();
    throw new Error(`seeding the real Gitea failed: ${(e as Error).message}\n--- gitea output ---\n${out.slice(-3000)}`);
  }
}

async function seed(gitea: RealGitea, options: SeedOptions): Promise<SeededGitea> {
  const url = gitea.url;
  const owner = 'acme';
  const repo = 'widget';
  const mk = (login: string): SeededUser => ({ login, password: `pw-${login}-0123456789`, email: `${login}@example.invalid`, token: '' });
  const users: Record<Role, SeededUser> = {
    admin: mk('gitea-admin'),
    owner: mk(owner),
    writer: mk('alice'),
    reader: mk('bob'),
    bot: mk(options.botLogin ?? 'ccweb-bot'),
  };
  const basic = (u: SeededUser) => ({ basic: { login: u.login, password: u.password } });

  // The site admin through the real CLI; everybody else through the admin API.
  await gitea.cli(['admin', 'user', 'create', '--username', users.admin.login, '--password', users.admin.password, '--email', users.admin.email, '--admin', '--must-change-password=false']);
  for (const role of ['owner', 'writer', 'reader', 'bot'] as const) {
    const u = users[role];
    await giteaApi(url, basic(users.admin), 'POST', '/admin/users', {
      username: u.login,
      password: u.password,
      email: u.email,
      must_change_password: false,
      full_name: { owner: 'Acme Owner', writer: 'Alice Writer', reader: 'Bob Reader', bot: 'ccweb bot' }[role],
    }, 201);
  }
  for (const role of ['admin', 'owner', 'writer', 'reader', 'bot'] as const) {
    const u = users[role];
    const scopes = role === 'bot' ? (options.botScopes ?? BOT_SCOPES) : ['all'];
    const r = await giteaApi<{ sha1: string }>(url, basic(u), 'POST', `/users/${u.login}/tokens`, { name: `ccweb-tests-${role}`, scopes }, 201);
    u.token = r.body.sha1;
  }
  const byLogin = new Map(Object.values(users).map((u) => [u.login, u]));
  const userByLogin = (login: string): SeededUser => {
    const u = byLogin.get(login);
    if (!u) throw new Error(`no seeded Gitea user ${login}`);
    return u;
  };
  const api = <T>(login: string, method: string, path: string, body?: unknown, expect?: number | number[]) =>
    giteaApi<T>(url, { token: userByLogin(login).token }, method, path, body, expect);
  const b64 = (s: string) => Buffer.from(s).toString('base64');

  await api(owner, 'POST', '/user/repos', { name: repo, private: true, auto_init: false, default_branch: 'main', description: 'ccweb-gitea test repository' }, 201);
  await api(owner, 'POST', `/repos/${owner}/${repo}/contents`, {
    branch: 'main',
    message: 'Initial files',
    files: Object.entries(SEED_FILES).map(([path, content]) => ({ operation: 'create', path, content: b64(content) })),
  }, 201);
  for (const [role, permission] of [['writer', 'write'], ['reader', 'read'], ['bot', options.botPermission ?? BOT_PERMISSION]] as const) {
    await api(owner, 'PUT', `/repos/${owner}/${repo}/collaborators/${users[role].login}`, { permission }, 204);
  }

  const createIssue = async (login: string, title: string, body = ''): Promise<number> => {
    const r = await api<{ number: number }>(login, 'POST', `/repos/${owner}/${repo}/issues`, { title, body }, 201);
    return r.body.number;
  };
  const issueNumber = await createIssue(users.writer.login, 'The login test is flaky', 'It fails about one run in ten.');

  const fileSha = async (login: string, o: string, r: string, path: string, ref: string) =>
    (await api<{ sha: string }>(login, 'GET', `/repos/${o}/${r}/contents/${path}?ref=${encodeURIComponent(ref)}`)).body.sha;
  /** A branch with one changed file, then a pull request into acme/widget:main. */
  const pullRequest = async (login: string, headOwner: string, branch: string, content: string, title: string) => {
    await api(login, 'POST', `/repos/${headOwner}/${repo}/contents`, {
      branch: 'main',
      new_branch: branch,
      message: title,
      files: [{ operation: 'update', path: 'src/login.js', content: b64(content), sha: await fileSha(login, headOwner, repo, 'src/login.js', 'main') }],
    }, 201);
    // Gitea registers a new branch asynchronously: wait until it is known before opening the PR.
    await eventually(`branch ${headOwner}/${repo}:${branch}`, () => api(login, 'GET', `/repos/${headOwner}/${repo}/branches/${encodeURIComponent(branch)}`, undefined, 200));
    const head = headOwner === owner ? branch : `${headOwner}:${branch}`;
    const pr = await api<{ number: number; head: { sha: string; ref: string } }>(login, 'POST', `/repos/${owner}/${repo}/pulls`, { head, base: 'main', title, body: 'Makes the flaky test pass.' }, 201);
    return { number: pr.body.number, sha: pr.body.head.sha, ref: pr.body.head.ref };
  };
  const prHeadRef = 'feature/login-retry';
  const pr = await pullRequest(
    users.writer.login,
    owner,
    prHeadRef,
    'export function login(user, password) {\n  return user === "demo" && password === "demo"; // retried by the caller\n}\n',
    'Retry the login once',
  );
  let forkPr: { number: number; sha: string } | null = null;
  if (options.forkPullRequest ?? true) {
    await api(users.reader.login, 'POST', `/repos/${owner}/${repo}/forks`, {}, 202);
    await eventually('fork bob/widget', () => api(users.reader.login, 'GET', `/repos/${users.reader.login}/${repo}/branches/main`, undefined, 200));
    forkPr = await pullRequest(
      users.reader.login,
      users.reader.login,
      'fix-typo',
      'export function login(user, password) {\n  // compares both fields\n  return user === "demo" && password === "demo";\n}\n',
      'Explain the comparison',
    );
  }

  return {
    gitea,
    url,
    version: gitea.version,
    owner,
    repo,
    users,
    botScopes: options.botScopes ?? BOT_SCOPES,
    issueNumber,
    prNumber: pr.number,
    prHeadRef,
    prHeadSha: pr.sha,
    forkPrNumber: forkPr?.number ?? null,
    forkPrHeadSha: forkPr?.sha ?? null,
    api,
    userByLogin,
    createIssue,
    async comment(login, index, body) {
      return (await api<GiteaComment>(login, 'POST', `/repos/${owner}/${repo}/issues/${index}/comments`, { body }, 201)).body;
    },
    async comments(index) {
      return (await api<GiteaComment[]>(users.owner.login, 'GET', `/repos/${owner}/${repo}/issues/${index}/comments`)).body;
    },
    async addWebhook(target, secret, opts = {}) {
      const r = await api<{ id: number }>(users.owner.login, 'POST', `/repos/${owner}/${repo}/hooks`, {
        type: 'gitea',
        active: true,
        branch_filter: '*',
        // Issue Comment and Pull Request Comment (docs/getting-started.md adds Pull Request Reviewed, which these tests do not need).
        events: opts.events ?? ['issue_comment', 'pull_request_comment'],
        config: { url: target, content_type: opts.contentType ?? 'json', secret, http_method: 'post' },
      }, 201);
      return r.body.id;
    },
    async setWebhookUrl(hookId, target) {
      const cur = await api<{ config: Record<string, string>; events: string[]; branch_filter: string; active: boolean }>(
        users.owner.login,
        'GET',
        `/repos/${owner}/${repo}/hooks/${hookId}`,
      );
      // Gitea's PATCH replaces the hook's events and branch filter with the form's (none when absent:
      // the hook would then fire for nothing), so the current ones are sent back with the new URL.
      const { events, branch_filter, active } = cur.body;
      await api(users.owner.login, 'PATCH', `/repos/${owner}/${repo}/hooks/${hookId}`, { config: { ...cur.body.config, url: target }, events, branch_filter, active }, 200);
    },
    close: () => gitea.close(),
  };
}
