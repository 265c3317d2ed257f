// What the several-nodes tests and the cluster benchmark share about their nodes and repositories:
// stopping every node process they spawned, and adding a repository whose webhook goes to the relay.
import type { ChildProcess } from 'node:child_process';
import type { PublishEnvironment } from './publish-environment.js';

/**
 * SIGTERM to every node still running, SIGKILL to its process group (`ownProcessGroup`) or itself
 * after 25 s; resolves when all have exited.
 */
export async function stopNodes(children: readonly ChildProcess[]): Promise<void> {
  await Promise.all(
    children.map(async (child) => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGTERM');
      const late = setTimeout(() => {
        if (!child.pid) return;
        try {
          process.kill(-child.pid, 'SIGKILL');
        } catch {
          child.kill('SIGKILL'); // not a group leader
        }
      }, 25_000);
      await exited;
      clearTimeout(late);
    }),
  );
}

/** A new repository of the environment's owner, alice a writer, the bot an admin, its webhook to `hookBase`. */
export async function addRepository(env: PublishEnvironment, name: string, hookBase: string): Promise<void> {
  const { gitea } = env;
  await gitea.api(gitea.owner, 'POST', '/user/repos', { name, private: true, auto_init: true, default_branch: 'main' }, 201);
  await gitea.api(gitea.owner, 'PUT', `/repos/${gitea.owner}/${name}/collaborators/alice`, { permission: 'write' }, 204);
  await gitea.api(gitea.owner, 'PUT', `/repos/${gitea.owner}/${name}/collaborators/ccweb-bot`, { permission: 'admin' }, 204);
  await gitea.api(gitea.owner, 'POST', `/repos/${gitea.owner}/${name}/hooks`, {
    type: 'gitea',
    active: true,
    branch_filter: '*',
    events: ['issue_comment', 'pull_request_comment'],
    config: { url: `${hookBase}/api/gitea/webhook`, content_type: 'json', secret: env.env['CCWEB_WEBHOOK_SECRET'], http_method: 'post' },
  }, 201);
}
