/**
 * The world `demo` runs the service in, the same to the demo whichever Gitea it is: a real Gitea (its
 * own pages, people who sign in) or the double (an API only, its webhooks sent and answered at once).
 * Both are seeded alike: `acme/widget`, issue #1, pull request #2, alice who may write, bob who may
 * only read, the bot `ccweb-bot`.
 */
import { mkdirSync } from 'node:fs';
import type { GiteaKind } from './choose-gitea.js';
import { startRealGiteaEnvironment, type RealGiteaEnvironment } from './real-environment.js';
import { startSandboxEnvironment, type SandboxEnvironment } from './sandbox-environment.js';

/** Every webhook event the service follows (Gitea's API names): comments on issues and pull requests, reviews. */
const HOOK_EVENTS = ['issue_comment', 'pull_request_comment', 'pull_request_review'];
/** The bot's token on the real Gitea: comments, and change delivery's branch and pull request. */
const BOT_SCOPES = ['write:repository', 'write:issue', 'read:user'];

export interface DemoPerson {
  login: string;
  /** The web UI's password (real Gitea only). */
  password: string | null;
  /** An API token with every scope, for curl. */
  token: string;
  access: 'write' | 'read';
}

export interface PostedComment {
  id: number;
  /** Where the comment is in Gitea's pages (the double has none). */
  url: string;
  /** The double answers its webhook at once: `<delivery id>… answered <status> <body>`; null on the real Gitea (sent in the background). */
  delivery: string | null;
}

interface WorldBase {
  /** `Gitea 1.26.3` or `Gitea double`. */
  label: string;
  url: string;
  owner: string;
  repo: string;
  issueNumber: number;
  prNumber: number;
  people: { alice: DemoPerson; bob: DemoPerson };
  /** CCWEB_* configuration plus CODEX_HOME. */
  env: Record<string, string>;
  codexHome: string;
  adminToken: string;
  /** Gitea's webhook points at the service listening at `serviceUrl`. */
  connectWebhook(serviceUrl: string, webhookPath: string): Promise<void>;
  comment(login: 'alice' | 'bob', index: number, body: string): Promise<PostedComment>;
  comments(index: number): Promise<Array<{ login: string; body: string }>>;
  close(): Promise<void>;
}

export type DemoWorld = (WorldBase & { kind: 'real'; real: RealGiteaEnvironment }) | (WorldBase & { kind: 'double'; sandbox: SandboxEnvironment });

export interface DemoWorldOptions {
  /** The service's, Gitea's and the scripted model's ports (0: a free one). */
  port: number;
  giteaPort: number;
  modelPort: number;
  giteaMcpCommand: string;
}

export async function startDemoWorld(kind: GiteaKind, root: string, options: DemoWorldOptions): Promise<DemoWorld> {
  mkdirSync(root, { recursive: true });
  return kind === 'real' ? startReal(root, options) : startDouble(root, options);
}

async function startReal(root: string, options: DemoWorldOptions): Promise<DemoWorld> {
  const real = await startRealGiteaEnvironment(root, {
    port: options.port,
    giteaPort: options.giteaPort,
    modelPort: options.modelPort,
    giteaMcpCommand: options.giteaMcpCommand,
    botScopes: BOT_SCOPES,
    forkPullRequest: false,
    hookEvents: HOOK_EVENTS,
  });
  const g = real.gitea;
  const person = (u: { login: string; password: string; token: string }, access: DemoPerson['access']): DemoPerson => ({ login: u.login, password: u.password, token: u.token, access });
  return {
    kind: 'real',
    real,
    label: `Gitea ${g.version}`,
    url: g.url,
    owner: g.owner,
    repo: g.repo,
    issueNumber: g.issueNumber,
    prNumber: g.prNumber,
    people: { alice: person(g.users.writer, 'write'), bob: person(g.users.reader, 'read') },
    env: real.env,
    codexHome: real.codexHome,
    adminToken: real.adminToken,
    async connectWebhook(serviceUrl, webhookPath) {
      const url = `${serviceUrl}${webhookPath}`;
      if (url !== real.webhookUrl) await g.setWebhookUrl(real.hookId, url);
    },
    async comment(login, index, body) {
      const c = await g.comment(login, index, body);
      return { id: c.id, url: c.html_url, delivery: null };
    },
    async comments(index) {
      return (await g.comments(index)).map((c) => ({ login: c.user.login, body: c.body }));
    },
    close: () => real.close(),
  };
}

async function startDouble(root: string, options: DemoWorldOptions): Promise<DemoWorld> {
  const sandbox = await startSandboxEnvironment(root, options);
  const g = sandbox.gitea;
  const person = (login: 'alice' | 'bob', access: DemoPerson['access']): DemoPerson => ({ login, password: null, token: g.userTokens[login]!, access });
  return {
    kind: 'double',
    sandbox,
    label: 'Gitea double',
    url: g.url,
    owner: g.owner,
    repo: g.repo,
    issueNumber: g.issueNumber,
    prNumber: g.prNumber,
    people: { alice: person('alice', 'write'), bob: person('bob', 'read') },
    env: sandbox.env,
    codexHome: sandbox.codexHome,
    adminToken: sandbox.adminToken,
    async connectWebhook(serviceUrl, webhookPath) {
      g.connectWebhook(`${serviceUrl}${webhookPath}`, sandbox.webhookSecret);
    },
    async comment(login, index, body) {
      const { commentId, delivery } = await g.comment(login, index, body);
      return { id: commentId, url: `${g.url}/${g.owner}/${g.repo}/issues/${index}#issuecomment-${commentId}`, delivery: `${delivery.deliveryId.slice(0, 8)}… answered ${delivery.status} ${delivery.responseBody}` };
    },
    async comments(index) {
      return g.comments(index).map((c) => ({ login: (c.user as { login: string }).login, body: String(c.body) }));
    },
    close: () => sandbox.close(),
  };
}
