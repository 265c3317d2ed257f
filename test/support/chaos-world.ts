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
import { createWebhookSender, type Delivery, type WebhookSender } from './gitea-double/webhook-sender.js';
import type { PermissionLevel } from './gitea-double/rest-api.js';
import { startSandboxEnvironment, type SandboxEnvironment } from './sandbox/sandbox-environment.js';

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
    close: () => env.close(),
  };
}
