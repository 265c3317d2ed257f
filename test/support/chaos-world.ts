/**
 * The chaos run's world: the sandbox environment plus more repositories (`acme/r1..rN`, each a real
 * git repository with issues), and a commenter that writes as any sandbox user on any of them.
 *
 * The sandbox's own `comment()` posts to `acme/widget` only, with user tokens it keeps to itself, so
 * comments are created here in the REST double directly and their webhook is sent as Gitea would
 * send it: the issue, comment, repository and sender objects as the double serves them over its API,
 * the commenter's permissions signed into `repository.permissions` (Gitea does that), same headers,
 * HMAC over the exact bytes, no retry. The bot's own comments keep going through the sandbox's hook.
 */
import type { TaskRecord } from '../../src/domain/records.js';
import type { Store } from '../../src/store/types.js';
import { judgeChaosRun, type ChaosVerdict, type SentDelivery } from './chaos-checks.js';
import { createWebhookSender, type Delivery, type WebhookSender } from '../../src/demo/gitea-double/webhook-sender.js';
import type { PermissionLevel } from '../../src/demo/gitea-double/rest-api.js';
import { startSandboxEnvironment, type SandboxEnvironment } from '../../src/demo/sandbox-environment.js';

export { seededRandom } from './seeded-random.js';

export interface ChaosIssue {
  owner: string;
  repo: string;
  index: number;
}

export interface SentComment extends ChaosIssue {
  commentId: number;
  delivery: Delivery;
}

export interface ChaosWorld {
  env: SandboxEnvironment;
  issues: ChaosIssue[];
  /** Where webhooks go from now on (the service's URL changes with every start). */
  connect(webhookUrl: string): void;
  /** `login` writes `body` on an issue; the webhook is sent to the connected URL. */
  comment(login: string, issue: ChaosIssue, body: string): Promise<SentComment>;
  /** Every comment on one issue (or pull request) of the world, as the chaos checks read them. */
  commentsOn(owner: string, repo: string, index: number): Array<{ user: string; body: string }>;
  /**
   * Waits until the service at `baseUrl` has no active task and every task's 已收到 receipt is on the
   * sandbox; false when `ms` passed first. `askAgainOnError`: an API error (a node taking over) is
   * asked again rather than thrown.
   */
  settle(baseUrl: string, ms: number, options?: { askAgainOnError?: boolean }): Promise<boolean>;
  /**
   * Opens `store` (what the next start, or a new node, reads), takes its tasks and audit, closes it,
   * and judges the run (judgeChaosRun) against them and the comments on this world's Gitea.
   */
  judge(store: Store, sent: readonly SentDelivery[]): Promise<ChaosVerdict>;
  close(): Promise<void>;
}

const PERMISSIONS: Record<PermissionLevel, { admin: boolean; push: boolean; pull: boolean }> = {
  none: { admin: false, push: false, pull: false },
  read: { admin: false, push: false, pull: true },
  write: { admin: false, push: true, pull: true },
  admin: { admin: true, push: true, pull: true },
  owner: { admin: true, push: true, pull: true },
};

export async function startChaosWorld(
  root: string,
  options: { extraRepos?: number; issuesPerRepo?: number; writers?: string[] } = {},
): Promise<ChaosWorld> {
  const env = await startSandboxEnvironment(root);
  const { gitea } = env;
  const writers = options.writers ?? ['alice'];
  const issues: ChaosIssue[] = [{ owner: gitea.owner, repo: gitea.repo, index: gitea.issueNumber }];
  for (let r = 1; r <= (options.extraRepos ?? 3); r++) {
    const repo = `r${r}`;
    gitea.double.addRepo('acme', repo, { defaultBranch: 'main' });
    await gitea.git.createRepo('acme', repo, {
      defaultBranch: 'main',
      files: { 'README.md': `# ${repo}\n\nA chaos-run repository.\n`, 'src/index.js': `export const name = '${repo}';\n` },
    });
    for (const w of writers) gitea.double.setPermission('acme', repo, w, 'write');
    for (let i = 1; i <= (options.issuesPerRepo ?? 2); i++) {
      gitea.double.addIssue('acme', repo, { number: i, title: `Issue ${i} of ${repo}`, body: 'Chaos.', user: writers[0]! });
      issues.push({ owner: 'acme', repo, index: i });
    }
  }

  let sender: WebhookSender | null = null;
  const commentsOn = (owner: string, repo: string, index: number) =>
    gitea.double.comments(owner, repo, index).map((c) => ({ user: (c['user'] as { login: string }).login, body: String(c['body']) }));
  const api = async (path: string): Promise<Record<string, unknown>> => {
    const res = await fetch(`${gitea.url}/api/v1${path}`, { headers: { Authorization: `token ${gitea.botToken}` } });
    if (!res.ok) throw new Error(`GET ${path}: ${res.status}`);
    return (await res.json()) as Record<string, unknown>;
  };
  const repoCache = new Map<string, Record<string, unknown>>();

  return {
    env,
    issues,
    connect(webhookUrl) {
      sender = createWebhookSender({ url: webhookUrl, secret: env.webhookSecret });
      gitea.connectWebhook(webhookUrl, env.webhookSecret);
    },
    async comment(login, issue, body) {
      if (!sender) throw new Error('connect() first');
      const comment = gitea.double.addComment(issue.owner, issue.repo, issue.index, { user: login, body });
      const issueJson = await api(`/repos/${issue.owner}/${issue.repo}/issues/${issue.index}`);
      const key = `${issue.owner}/${issue.repo}`;
      let repository = repoCache.get(key);
      if (!repository) {
        repository = await api(`/repos/${key}`);
        repoCache.set(key, repository);
      }
      const level = (await api(`/repos/${key}/collaborators/${login}/permission`))['permission'] as PermissionLevel;
      const delivery = await sender.send({
        issue: issueJson,
        comment,
        repository: { ...repository, permissions: PERMISSIONS[level] ?? PERMISSIONS.none },
        sender: gitea.double.addUser(login),
        isPull: false,
      });
      return { ...issue, commentId: Number(comment['id']), delivery };
    },
    commentsOn,
    async settle(baseUrl, ms, options = {}) {
      const ask = async <T>(path: string): Promise<T> => {
        const res = await fetch(`${baseUrl}/api/gitea-workflow${path}`, { headers: { Authorization: `Bearer ${env.adminToken}` } });
        if (!res.ok) throw new Error(`${path}: ${res.status}`);
        return (await res.json()) as T;
      };
      const start = Date.now();
      while (Date.now() - start < ms) {
        try {
          const overview = await ask<{ activeByState: Record<string, number> }>('/overview');
          const total = (await ask<{ total: number }>('/tasks?pageSize=1')).total;
          const receipts = issues
            .flatMap((i) => commentsOn(i.owner, i.repo, i.index))
            .filter((c) => c.user === gitea.botLogin && /<!-- ccweb receipt=\S+:status:received -->/.test(c.body)).length;
          if (Object.keys(overview.activeByState).length === 0 && receipts >= total) return true;
        } catch (error) {
          if (!options.askAgainOnError) throw error;
        }
        await new Promise((resolve) => setTimeout(resolve, 1_000));
      }
      return false;
    },
    async judge(store, sent) {
      await store.open();
      const tasks = (await store.list<TaskRecord>('tasks')).map((t) => ({ ...t }));
      const events = await store.audit();
      await store.close();
      return judgeChaosRun({ sent, tasks, events, commentsOn: (t) => commentsOn(t.owner, t.repo, t.resource.number), botLogin: gitea.botLogin });
    },
    close: () => env.close(),
  };
}
