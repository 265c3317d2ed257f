// The pull-request side of publishing, against Gitea's API: reuse or create the issue's pull request
// (exactly once). A fork's pull request needs nothing here: its change goes to its own head branch.
import type { TaskRecord } from '../domain/records.js';
import { pullRequestMarker } from './branch-names.js';
import { pullRequestBody, pullRequestTitle } from './commit-message.js';
import { GiteaPullsError, type GiteaPullsClient } from './gitea-pulls.js';
import { nextSettleDelay, pullCreateRetryDelay } from './publish-decisions.js';
import { PublishError } from './publish-types.js';

export type AuditStep = (taskId: string, action: string, metadata: Record<string, unknown>) => Promise<unknown>;

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Waits (bounded) until Gitea shows what was just written; Gitea applies pushes asynchronously. */
export async function settle(what: string, check: () => Promise<boolean>, settleMs: number): Promise<void> {
  const deadline = Date.now() + settleMs;
  for (let delay = 100; ; delay = nextSettleDelay(delay)) {
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) throw new PublishError('publish_unverified', `Gitea did not show ${what} within ${settleMs} ms`);
    await sleep(delay);
  }
}

/** The open pull request of `head` into `base`, else a new one; a retry never opens a second one. */
export async function ensurePull(
  deps: { gitea: GiteaPullsClient; audit: AuditStep },
  task: TaskRecord,
  head: string,
  base: string,
  summary: string | null,
): Promise<{ number: number; url: string }> {
  const { gitea, audit } = deps;
  const existing = async () => (await gitea.openPullsForHead(task.owner, task.repo, head)).find((p) => p.base.ref === base);
  const found = await existing();
  if (found) {
    await audit(task.taskId, 'publish.pull_request_reused', { number: found.number, head });
    return { number: found.number, url: found.html_url };
  }
  const body = pullRequestBody({ summary, issueNumber: task.resource.number, taskId: task.taskId, marker: pullRequestMarker(task.taskId, task.resourceKey) });
  const title = pullRequestTitle(summary, task.resource.number);
  for (let attempt = 1; ; attempt++) {
    try {
      const created = await gitea.createPull(task.owner, task.repo, { head, base, title, body });
      await audit(task.taskId, 'publish.pull_request_created', { number: created.number, head, base });
      return { number: created.number, url: created.html_url };
    } catch (error) {
      // A lost answer, a conflict (it exists after all) or a branch Gitea has not registered yet:
      // look again before any new attempt, so a retry never opens a second pull request.
      const again = await existing().catch(() => undefined);
      if (again) {
        await audit(task.taskId, 'publish.pull_request_reused', { number: again.number, head });
        return { number: again.number, url: again.html_url };
      }
      const delay = pullCreateRetryDelay(error instanceof GiteaPullsError ? error.status : undefined, attempt);
      if (delay === null) {
        throw new PublishError('pull_request_refused', `Gitea refused the pull request from ${head} into ${base}: ${(error as Error).message}`);
      }
      await sleep(delay);
    }
  }
}
