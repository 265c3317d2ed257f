/**
 * A local stand-in for a Gitea instance: git smart HTTP (real `git http-backend`), the REST API
 * double, and comment webhooks sent the way Gitea sends them — for every comment created through
 * the API, the bot's own included. Seeded with `acme/widget`, issue #1 and pull request #2.
 * Everything listens on 127.0.0.1.
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { startGitHttpServer, type GitHttpServer } from './git-http.js';
import { createGiteaRestDouble, type GiteaRestDouble } from './rest-api.js';
import { createWebhookSender, type Delivery, type WebhookSender } from './webhook-sender.js';

export interface GiteaSandbox {
  url: string;
  botLogin: string;
  botToken: string;
  double: GiteaRestDouble;
  git: GitHttpServer;
  owner: string;
  repo: string;
  issueNumber: number;
  prNumber: number;
  prHeadSha: string;
  /** The API tokens of the sandbox's users (alice may write, bob may only read), for curl. */
  userTokens: Readonly<Record<string, string>>;
  /** Point the instance's webhook at the service (like adding a webhook in repo settings). */
  connectWebhook(url: string, secret: string): void;
  /** A user writes a comment through the API; Gitea fires the webhook. Resolves with that delivery. */
  comment(login: string, index: number, body: string): Promise<{ commentId: number; delivery: Delivery }>;
  /** Gitea's manual Replay of a delivery: new UUID, same bytes. */
  replay(deliveryId: string): Promise<Delivery>;
  comments(index: number): Array<Record<string, unknown>>;
  deliveries(): Delivery[];
  close(): Promise<void>;
}

export async function startGiteaSandbox(options: { root: string; botLogin?: string; port?: number }): Promise<GiteaSandbox> {
  const botLogin = options.botLogin ?? 'ccweb-bot';
  const botToken = randomBytes(20).toString('hex');
  const userTokens: Record<string, string> = {
    alice: randomBytes(20).toString('hex'),
    bob: randomBytes(20).toString('hex'),
  };
  let hook: { url: string; secret: string } | null = null;
  let sender: WebhookSender | null = null;
  const pending = new Map<number, Promise<Delivery>>();

  const double = createGiteaRestDouble({
    token: botToken,
    botLogin,
    users: [
      { login: 'alice', fullName: 'Alice Writer', token: userTokens.alice },
      { login: 'bob', fullName: 'Bob Reader', token: userTokens.bob },
    ],
    onCommentCreated: (e) => {
      if (!sender) return;
      const delivery = sender.send({
        issue: e.issue,
        comment: e.comment,
        repository: e.repository,
        sender: e.sender,
        isPull: e.isPull,
        pullRequest: e.pullRequest,
      });
      pending.set(Number(e.comment.id), delivery);
    },
    // Branches and pull requests come from the real bare repositories the git server holds, so the
    // service's pushes (change delivery) show up in the REST API as on Gitea.
    branchHead: async (o, r, branch) => {
      try {
        return await git.repos.git(['rev-parse', '--verify', '--quiet', `refs/heads/${branch}^{commit}`], git.repos.barePath(o, r));
      } catch {
        return null;
      }
    },
  });
  const git = await startGitHttpServer({
    root: join(options.root, 'git'),
    ...(options.port !== undefined ? { port: options.port } : {}),
    token: botToken,
    fallback: (req, res) => {
      if (!double.handler(req, res)) res.writeHead(404, { 'Content-Type': 'text/plain' }).end('Not found\n');
    },
  });
  double.setPublicUrl(git.url);

  const owner = 'acme';
  const repo = 'widget';
  double.addRepo(owner, repo, { defaultBranch: 'main' });
  await git.createRepo(owner, repo, {
    defaultBranch: 'main',
    files: {
      'README.md': '# widget\n\nA tiny project for the ccweb-gitea sandbox.\n',
      'src/login.js': 'export function login(user, password) {\n  return user === "demo" && password === "demo";\n}\n',
      'test/login.test.js': 'import { login } from "../../../test/support/src/login.js";\nif (!login("demo", "demo")) throw new Error("login failed");\n',
    },
  });
  double.setPermission(owner, repo, 'alice', 'write');
  double.setPermission(owner, repo, 'bob', 'read');
  double.addIssue(owner, repo, { number: 1, title: 'The login test is flaky', body: 'It fails about one run in ten.', user: 'alice' });
  await git.pushCommit(owner, repo, 'feature/login-retry', { 'src/login.js': 'export function login(user, password) {\n  return user === "demo" && password === "demo"; // retried by the caller\n}\n' }, 'Retry login');
  const prHeadSha = await git.createPullRequestRef(owner, repo, 2, { fromBranch: 'feature/login-retry' });
  double.addIssue(owner, repo, {
    number: 2,
    title: 'Retry the login once',
    body: 'Makes the flaky test pass.',
    user: 'alice',
    isPull: true,
    head: { ref: 'feature/login-retry', sha: prHeadSha },
    base: { ref: 'main' },
  });

  return {
    url: git.url,
    botLogin,
    botToken,
    double,
    git,
    owner,
    repo,
    issueNumber: 1,
    prNumber: 2,
    prHeadSha,
    userTokens,
    connectWebhook(url, secret) {
      hook = { url, secret };
      sender ??= createWebhookSender({ url: () => hook!.url, secret: () => hook!.secret });
    },
    async comment(login, index, body) {
      const token = userTokens[login];
      if (!token) throw new Error(`unknown sandbox user ${login}`);
      const res = await fetch(`${git.url}/api/v1/repos/${owner}/${repo}/issues/${index}/comments`, {
        method: 'POST',
        headers: { Authorization: `token ${token}`, 'Content-Type': 'application/json' },
        body: JSON.stringify({ body }),
      });
      if (res.status !== 201) throw new Error(`comment failed: ${res.status}`);
      const created = (await res.json()) as { id: number };
      const delivery = pending.get(created.id);
      if (!delivery) throw new Error('no webhook was sent: call connectWebhook first');
      return { commentId: created.id, delivery: await delivery };
    },
    replay(deliveryId) {
      if (!sender) throw new Error('webhook not connected');
      return sender.replay(deliveryId);
    },
    comments(index) {
      return double.comments(owner, repo, index);
    },
    deliveries() {
      return sender?.deliveries ?? [];
    },
    close: () => git.close(),
  };
}
