// Change delivery (issue 14): what a turn left in the resource's worktree reaches Gitea as commits on
// the resource's branch and (for an issue) one pull request — exactly once across crashes.
//
// The service commits, never the agent (author: the bot, trailer `Ccweb-Task: <taskId>`), and pushes
// with its own token through the scoped GIT_CONFIG_* environment (src/workspace/git-credentials.ts)
// to the explicit clone URL: never to a remote the agent could have rewritten, never with the token in
// a URL, an argument or .git/config. Never to the default branch, never forced.
//
// Exactly once. Every step is check-then-act against Gitea and idempotent: a commit is only made for
// uncommitted changes (after a crash the commit is already there); before a push the remote branch is
// read (`ls-remote`) and the push skipped when it already holds our head; before a pull request is
// created the open pull requests of that head are listed. The intent (branch, head) is stored before
// the push, so a restart in `publishing` knows a pull request is owed even when the push itself
// already happened. Gitea registers a pushed branch asynchronously: the pull request is created only
// once `GET branches/{b}` shows the pushed head.
//
// Refusals lose nothing: the change stays as a local branch `ccweb-kept/<taskId>` in the shared clone
// and a patch file `<patchDir>/<taskId>.patch`, both named in the task record and the failure receipt.
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';

import type { RepositoryRecord, TaskRecord, TurnRecord } from '../domain/records.js';
import type { Store } from '../store/types.js';
import { pendingReceiptRecord, receiptCommentKey } from '../receipts/receipt-record.js';
import { NOT_PUBLISHED_NOTICE_STATE } from '../receipts/receipt-text.js';
import { classifyGitFailure } from '../workspace/classify-git-failure.js';
import { redactSecrets } from '../workspace/git-credentials.js';
import { describeFailure, runGit, type GitLogger, type GitResult } from '../workspace/run-git.js';
import { isSafeBranchName } from '../workspace/workspace-manager.js';
import { resourceWorktreePath } from '../workspace/resource-worktree.js';
import { cloneUrlFor } from '../webhook/repository-origin.js';
import { forkLinkMarker, forkPullBranchName, issueBranchName, keptBranchName, pullRequestMarker } from './branch-names.js';
import { commitMessage, pullRequestBody, pullRequestTitle } from './commit-message.js';
import { GiteaPullsError, type GiteaPull, type GiteaPullsClient } from './gitea-pulls.js';

export type DeliveryMode = 'pull_request' | 'branch' | 'off';

/** What the task record carries about its delivery (`task.publish`), shown in the task detail. */
export interface PublishRecord {
  status: 'pushing' | 'published' | 'nothing_to_publish' | 'not_published' | 'kept';
  mode: DeliveryMode;
  /** The remote branch the change goes to. */
  branch: string | null;
  /** The head this task pushed (or is about to push). */
  headSha: string | null;
  /** Commits this task brought onto the branch, oldest first. */
  commits: string[];
  pullRequest: { number: number; url: string } | null;
  /** Where an unpublished change is kept. */
  kept: { branch: string; patchFile: string } | null;
  errorCode: string | null;
  message: string | null;
  updatedAt: string;
}

export type PublishOutcome =
  | { ok: true; record: PublishRecord }
  | { ok: false; errorCode: string; message: string; record: PublishRecord | null };

export interface PublisherOptions {
  store: Store;
  gitea: GiteaPullsClient;
  token: string;
  botLogin: string;
  giteaUrl: string;
  workspaceRoot: string;
  /** Where patches of unpublished changes go (`<dataDir>/patches`). */
  patchDir: string;
  mode?: DeliveryMode;
  branchPrefix?: string;
  instanceId?: string;
  gitTimeoutMs?: number;
  /** How long to wait for Gitea to show a pushed branch / a pull request's new head. */
  settleTimeoutMs?: number;
  logger?: GitLogger;
  log?: (msg: string, fields: Record<string, unknown>) => void;
  now?: () => Date;
  /** Counts outcomes for /metrics. */
  onOutcome?: (outcome: string) => void;
}

export interface Publisher {
  /** Publishes what the task's worktree holds; idempotent; safe to call again after any crash. */
  publish(taskId: string, options?: { summary?: string | null; signal?: AbortSignal }): Promise<PublishOutcome>;
  /** The worktree a task's agent works in. */
  worktreePathFor(task: TaskRecord): string;
}

class PublishError extends Error {
  constructor(
    readonly errorCode: string,
    message: string,
  ) {
    super(message);
  }
}

const REJECTED_PUSH = [/protected branch/i, /pre-receive hook declined/i, /not allowed to push/i, /permission/i, /denied/i, /returned error: 403/i, /forbidden/i];
const NON_FAST_FORWARD = [/non-fast-forward/i, /\(fetch first\)/i, /rejected.*stale info/i, /Updates were rejected/i];

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export function createPublisher(options: PublisherOptions): Publisher {
  const { store, gitea } = options;
  const mode = options.mode ?? 'pull_request';
  const prefix = options.branchPrefix ?? 'ccweb/';
  const now = options.now ?? (() => new Date());
  const timeoutMs = options.gitTimeoutMs ?? 120_000;
  const settleMs = options.settleTimeoutMs ?? 30_000;
  const log = options.log ?? (() => undefined);
  const secrets = [options.token];
  const host = (() => {
    try {
      return new URL(options.giteaUrl).hostname || 'localhost';
    } catch {
      return 'localhost';
    }
  })();
  const identity = ['-c', `user.name=${options.botLogin}`, '-c', `user.email=${options.botLogin}@noreply.${host}`];
  // One publish per task at a time in this process (the agent's tool and the safety net never overlap).
  const inFlight = new Map<string, Promise<PublishOutcome>>();

  function worktreePathFor(task: TaskRecord): string {
    const repo = store.get<RepositoryRecord>('repositories', task.repoKey);
    return resourceWorktreePath(options.workspaceRoot, repo?.instanceId ?? options.instanceId ?? 'default', task.owner, task.repo, task.resource);
  }

  async function record(
    taskId: string,
    patch: Partial<PublishRecord>,
    audit?: { action: string; metadata: Record<string, unknown>; level?: 'alert' },
    notice?: string,
  ) {
    return store.transact((tx) => {
      const t = tx.get<TaskRecord>('tasks', taskId);
      if (!t) return null;
      const prev = (t.publish as PublishRecord | undefined) ?? {
        status: 'pushing',
        mode,
        branch: null,
        headSha: null,
        commits: [],
        pullRequest: null,
        kept: null,
        errorCode: null,
        message: null,
        updatedAt: now().toISOString(),
      };
      const next: PublishRecord = { ...prev, ...patch, updatedAt: now().toISOString() };
      tx.put('tasks', taskId, { ...t, publish: next });
      if (audit) tx.appendAudit({ action: audit.action, actor: 'system:publisher', taskId, ...(audit.level ? { level: audit.level } : {}), metadata: audit.metadata });
      // A status comment for the receipt outbox (exactly once by its key), in the same transaction.
      if (notice && !tx.get('comments', receiptCommentKey(taskId, notice))) tx.insert('comments', receiptCommentKey(taskId, notice), pendingReceiptRecord(t, notice, now()));
      return next;
    });
  }

  async function publish(taskId: string, opts: { summary?: string | null; signal?: AbortSignal } = {}): Promise<PublishOutcome> {
    const running = inFlight.get(taskId);
    if (running) await running.catch(() => undefined);
    const p = publishOnce(taskId, opts);
    inFlight.set(taskId, p);
    try {
      return await p;
    } finally {
      if (inFlight.get(taskId) === p) inFlight.delete(taskId);
    }
  }

  async function publishOnce(taskId: string, opts: { summary?: string | null; signal?: AbortSignal }): Promise<PublishOutcome> {
    const task = store.get<TaskRecord>('tasks', taskId);
    if (!task) return { ok: false, errorCode: 'publish_failed', message: `task ${taskId} not found`, record: null };
    const repo = store.get<RepositoryRecord>('repositories', task.repoKey);
    if (!repo) return { ok: false, errorCode: 'publish_failed', message: `repository ${task.repoKey} not found`, record: null };
    // The push goes to the configured Gitea, never to a URL a payload wrote (issue 15).
    const remoteUrl = cloneUrlFor(options.giteaUrl, repo.owner, repo.name);
    const wt = worktreePathFor(task);
    const summary =
      opts.summary ??
      store
        .byIndex<TurnRecord>('turns', 'taskId', taskId)
        .filter((t) => t.kind === 'normal')
        .at(-1)?.finalMessage ??
      null;

    const git = (args: string[], extra: { token?: boolean } = {}): Promise<GitResult> =>
      runGit(args, {
        cwd: wt,
        timeoutMs,
        logger: options.logger,
        secrets,
        ...(opts.signal ? { signal: opts.signal } : {}),
        ...(extra.token ? { token: options.token, scopeUrl: remoteUrl } : {}),
      });
    const must = async (args: string[], extra: { token?: boolean } = {}): Promise<GitResult> => {
      const r = await git(args, extra);
      if (!r.ok) throw new PublishError(classifyGitFailure(r).code === 'auth_failed' ? 'push_rejected' : 'publish_git_failed', describeFailure(args, r));
      return r;
    };
    const resolve = async (ref: string): Promise<string | null> => {
      const r = await git(['rev-parse', '--verify', '--quiet', `${ref}^{commit}`]);
      return r.ok ? r.stdout.trim() : null;
    };
    const isAncestor = async (a: string, b: string) => (await git(['merge-base', '--is-ancestor', a, b])).ok;
    const lsRemote = async (branch: string): Promise<string | null> => {
      const r = await must(['ls-remote', '--heads', '--', remoteUrl, `refs/heads/${branch}`], { token: true });
      const line = r.stdout.split('\n').find((l) => l.endsWith(`\trefs/heads/${branch}`));
      return line ? line.split('\t')[0]! : null;
    };
    const fetchBranch = async (branch: string) =>
      must(['fetch', '--quiet', '--no-tags', '--', remoteUrl, `+refs/heads/${branch}:refs/remotes/origin/${branch}`], { token: true });

    if (!existsSync(wt)) {
      // A task that never had a worktree (or an older task from before change delivery): nothing to publish.
      const rec = await record(taskId, { status: 'nothing_to_publish', mode }, { action: 'publish.nothing', metadata: { reason: 'no_worktree' } });
      options.onOutcome?.('nothing_to_publish');
      return { ok: true, record: rec! };
    }

    let upstream: string | null = null;
    const previous = task.publish as PublishRecord | undefined;
    const owedBefore = previous?.status === 'pushing' || (previous?.commits.length ?? 0) > 0;
    // Fast path without the network: a clean tree whose HEAD some remote-tracking ref already contains
    // has nothing new (the common "answer only" turn).
    if (!owedBefore) {
      const status = await git(['--no-optional-locks', 'status', '--porcelain=v1', '-z', '--untracked-files=all']);
      const contained = await git(['for-each-ref', '--count=1', '--contains', 'HEAD', '--format=%(refname)', 'refs/remotes/']);
      if (status.ok && status.stdout.length === 0 && contained.ok && contained.stdout.trim() !== '') {
        const rec = await record(taskId, { status: 'nothing_to_publish', mode }, { action: 'publish.nothing', metadata: { reason: 'no_changes' } });
        options.onOutcome?.('nothing_to_publish');
        return { ok: true, record: rec! };
      }
    }
    try {
      // The target branch and the pull request it belongs to.
      let target: string;
      let pull: GiteaPull | null = null;
      let kind: 'issue' | 'same_repo_pull' | 'fork_pull';
      if (task.resource.kind === 'issue') {
        kind = 'issue';
        target = issueBranchName(prefix, task.resource.number);
      } else {
        pull = await gitea.getPull(task.owner, task.repo, task.resource.number);
        const sameRepo = pull.head.repo?.id !== undefined && pull.base.repo?.id !== undefined ? pull.head.repo.id === pull.base.repo.id : pull.head.repo_id === pull.base.repo_id;
        kind = sameRepo ? 'same_repo_pull' : 'fork_pull';
        target = sameRepo ? pull.head.ref : forkPullBranchName(prefix, task.resource.number);
      }
      if (!isSafeBranchName(target)) throw new PublishError('publish_target_invalid', `branch name ${JSON.stringify(target)} is not acceptable`);
      if (target === repo.defaultBranch) throw new PublishError('publish_target_default', `the change would go to the default branch ${repo.defaultBranch}; the bot never pushes there`);

      // 1. Commit what is uncommitted (the agent's edits, new and deleted files). After a crash the
      //    commit already exists and the tree is clean: nothing is committed twice.
      const status = await must(['--no-optional-locks', 'status', '--porcelain=v1', '-z', '--untracked-files=all']);
      if (status.stdout.length > 0) {
        await must(['add', '--all', '--', '.']);
        const staged = await git(['diff', '--cached', '--quiet']);
        if (!staged.ok) {
          const message = commitMessage({ summary, taskId, resourceLabel: `#${task.resource.number}` });
          await must([...identity, 'commit', '--quiet', '--no-verify', '--no-gpg-sign', '-m', message]);
          const sha = await resolve('HEAD');
          await record(taskId, {}, { action: 'publish.commit', metadata: { sha, worktree: path.basename(wt) } });
        }
      }
      const head = (await resolve('HEAD'))!;

      // 2. Where the branch stands on Gitea now.
      const remoteHead = await lsRemote(target);
      if (remoteHead) await fetchBranch(target);
      if (kind === 'same_repo_pull' && !remoteHead) throw new PublishError('publish_target_missing', `the head branch ${target} of pull request #${task.resource.number} is gone`);
      if (!remoteHead) await fetchBranch(repo.defaultBranch);
      upstream = remoteHead ?? (await resolve(`refs/remotes/origin/${repo.defaultBranch}`));
      if (!upstream) throw new PublishError('publish_git_failed', `origin has no ${repo.defaultBranch}`);

      const ahead = Number((await must(['rev-list', '--count', `${upstream}..HEAD`])).stdout.trim()) || 0;
      if (ahead === 0 && !(owedBefore && previous?.branch === target)) {
        const rec = await record(taskId, { status: 'nothing_to_publish', mode, branch: previous?.branch ?? null }, { action: 'publish.nothing', metadata: { branch: target, remoteHead } });
        options.onOutcome?.('nothing_to_publish');
        return { ok: true, record: rec! };
      }

      if (mode === 'off') {
        const kept = await keep(taskId, upstream, git, must, resolve);
        const rec = await record(taskId, { status: 'not_published', mode, branch: null, kept, errorCode: null }, { action: 'publish.off', metadata: { kept } }, NOT_PUBLISHED_NOTICE_STATE);
        options.onOutcome?.('not_published');
        return { ok: true, record: rec! };
      }

      let pushedHead = head;
      if (ahead > 0) {
        // 3. The remote branch moved under us (a human pushed to the PR's branch): carry our commits over.
        if (remoteHead && !(await isAncestor(remoteHead, head))) {
          const base = (await must(['merge-base', head, remoteHead])).stdout.trim();
          const rebase = await git([...identity, 'rebase', '--quiet', '--no-autosquash', '--onto', remoteHead, base]);
          if (!rebase.ok) {
            await git(['rebase', '--abort']);
            throw new PublishError('push_conflict', `the branch ${target} moved on Gitea and this change does not apply on top of it`);
          }
          pushedHead = (await resolve('HEAD'))!;
          await record(taskId, {}, { action: 'publish.rebased', metadata: { branch: target, onto: remoteHead, head: pushedHead } });
        }
        // Unredacted on purpose (no `secrets`): this output is only searched, never logged or stored.
        const diff = await runGit(['log', '-p', '--no-color', `${upstream}..HEAD`], { cwd: wt, timeoutMs, ...(opts.signal ? { signal: opts.signal } : {}) });
        if (!diff.ok || containsSecret(diff.stdout, secrets)) {
          throw new PublishError('publish_secret_in_change', 'the change contains the service token; it was not pushed');
        }
        const commits = (await must(['rev-list', '--reverse', `${upstream}..HEAD`])).stdout.split('\n').filter(Boolean);
        // Intent before the push: a restart from here on knows this task owes a push and a pull request.
        await record(taskId, { status: 'pushing', mode, branch: target, headSha: pushedHead, commits, errorCode: null, message: null });

        // 4. Push (never forced). Skipped when Gitea already has it (a crash after the push).
        const now1 = await lsRemote(target);
        if (now1 && (now1 === pushedHead || (await isAncestor(pushedHead, now1).catch(() => false)))) {
          await record(taskId, {}, { action: 'publish.push_skipped', metadata: { branch: target, head: pushedHead, reason: 'already_on_gitea' } });
        } else {
          const args = ['push', '--quiet', '--porcelain', '--no-verify', '--', remoteUrl, `${pushedHead}:refs/heads/${target}`];
          const r = await git(args, { token: true });
          if (!r.ok) {
            const text = `${r.stderr}\n${r.stdout}`;
            if (NON_FAST_FORWARD.some((re) => re.test(text))) throw new PublishError('push_conflict', `the push to ${target} was refused as not fast-forward: ${describeFailure(args, r)}`);
            if (REJECTED_PUSH.some((re) => re.test(text)) || classifyGitFailure(r).code === 'auth_failed')
              throw new PublishError('push_rejected', `Gitea refused the push to ${target}: ${describeFailure(args, r)}`);
            throw new PublishError('push_failed', describeFailure(args, r));
          }
          await record(taskId, {}, { action: 'publish.push', metadata: { branch: target, head: pushedHead, commits: commits.length } });
        }
      } else {
        // Owed from before a restart: the push happened (Gitea has it) but was never confirmed here.
        pushedHead = previous?.headSha ?? head;
        await record(taskId, {}, { action: 'publish.push_skipped', metadata: { branch: target, head: pushedHead, reason: 'already_on_gitea' } });
      }

      // 5. Read back: the remote branch holds what we pushed, and Gitea's API knows the branch.
      const after = await lsRemote(target);
      if (!after || !(after === pushedHead || (await isAncestor(pushedHead, after).catch(() => false)))) {
        throw new PublishError('publish_unverified', `the branch ${target} on Gitea does not hold ${pushedHead}`);
      }
      await settle(`branch ${target}`, async () => {
        const b = await gitea.getBranch(task.owner, task.repo, target);
        return b !== null && b.commit.id === after;
      });

      // 6. The pull request: reuse the open one of this head, else create it (once).
      let pr: { number: number; url: string } | null = null;
      if (mode === 'pull_request') {
        if (kind === 'same_repo_pull') {
          pr = { number: pull!.number, url: pull!.html_url };
        } else if (kind === 'issue') {
          pr = await ensurePull(task, target, repo.defaultBranch, summary);
        } else {
          await linkForkBranch(task, target, repo);
        }
        if (pr) {
          const expectHead = after;
          await settle(`pull request #${pr.number}`, async () => {
            const p = await gitea.getPull(task.owner, task.repo, pr!.number);
            return p.state === 'open' && p.head.sha === expectHead;
          });
        }
      }
      const rec = await record(
        taskId,
        { status: 'published', mode, branch: target, headSha: after, pullRequest: pr, errorCode: null, message: null },
        { action: 'publish.verified', metadata: { branch: target, head: after, pullRequest: pr?.number ?? null } },
      );
      options.onOutcome?.('published');
      return { ok: true, record: rec! };
    } catch (error) {
      const errorCode = error instanceof PublishError ? error.errorCode : error instanceof GiteaPullsError ? 'publish_gitea_failed' : 'publish_failed';
      const message = redactSecrets(error instanceof Error ? error.message : String(error), secrets).slice(0, 500);
      let kept: PublishRecord['kept'] = null;
      try {
        kept = await keep(taskId, upstream, git, must, resolve);
      } catch (keepError) {
        log('keeping the unpublished change failed', { taskId, error: (keepError as Error).message });
      }
      const rec = await record(
        taskId,
        { status: 'kept', kept, errorCode, message },
        { action: 'publish.failed', level: 'alert', metadata: { errorCode, message, kept } },
      );
      log('publishing failed', { taskId, errorCode, message });
      options.onOutcome?.(errorCode);
      return { ok: false, errorCode, message, record: rec };
    }
  }

  /** Waits (bounded) until Gitea shows what was just written; Gitea applies pushes asynchronously. */
  async function settle(what: string, check: () => Promise<boolean>): Promise<void> {
    const deadline = Date.now() + settleMs;
    for (let delay = 100; ; delay = Math.min(delay * 2, 1_000)) {
      if (await check().catch(() => false)) return;
      if (Date.now() > deadline) throw new PublishError('publish_unverified', `Gitea did not show ${what} within ${settleMs} ms`);
      await sleep(delay);
    }
  }

  async function ensurePull(task: TaskRecord, head: string, base: string, summary: string | null): Promise<{ number: number; url: string }> {
    const existing = async () => (await gitea.openPullsForHead(task.owner, task.repo, head)).find((p) => p.base.ref === base);
    const found = await existing();
    if (found) {
      await record(task.taskId, {}, { action: 'publish.pull_request_reused', metadata: { number: found.number, head } });
      return { number: found.number, url: found.html_url };
    }
    const body = pullRequestBody({ summary, issueNumber: task.resource.number, taskId: task.taskId, marker: pullRequestMarker(task.taskId, task.resourceKey) });
    const title = pullRequestTitle(summary, task.resource.number);
    for (let attempt = 1; ; attempt++) {
      try {
        const created = await gitea.createPull(task.owner, task.repo, { head, base, title, body });
        await record(task.taskId, {}, { action: 'publish.pull_request_created', metadata: { number: created.number, head, base } });
        return { number: created.number, url: created.html_url };
      } catch (error) {
        // A lost answer, a conflict (it exists after all) or a branch Gitea has not registered yet:
        // look again before any new attempt, so a retry never opens a second pull request.
        const again = await existing().catch(() => undefined);
        if (again) {
          await record(task.taskId, {}, { action: 'publish.pull_request_reused', metadata: { number: again.number, head } });
          return { number: again.number, url: again.html_url };
        }
        const status = error instanceof GiteaPullsError ? error.status : undefined;
        const transient = status === undefined || status === 404 || status === 409 || status >= 500;
        if (!transient || attempt >= 5) {
          throw new PublishError('pull_request_refused', `Gitea refused the pull request from ${head} into ${base}: ${(error as Error).message}`);
        }
        await sleep(300 * attempt);
      }
    }
  }

  async function linkForkBranch(task: TaskRecord, branch: string, repo: RepositoryRecord): Promise<void> {
    const marker = forkLinkMarker(branch);
    const comments = await gitea.listComments(task.owner, task.repo, task.resource.number);
    if (comments.some((c) => c.user.login.toLowerCase() === options.botLogin.toLowerCase() && c.body.includes(marker))) return;
    const web = repo.cloneUrl.replace(/\.git$/, '');
    await gitea.createComment(
      task.owner,
      task.repo,
      task.resource.number,
      `giteabot: this pull request comes from a fork, so the changes of task ${task.taskId} are on the branch \`${branch}\` of this repository: ${web}/src/branch/${branch}\n\n${marker}`,
    );
    await record(task.taskId, {}, { action: 'publish.fork_branch_linked', metadata: { branch } });
  }

  /** Keeps the change as a local branch and a patch file, and leaves the worktree clean at `upstream`. */
  async function keep(
    taskId: string,
    upstream: string | null,
    git: (args: string[]) => Promise<GitResult>,
    must: (args: string[]) => Promise<GitResult>,
    resolve: (ref: string) => Promise<string | null>,
  ): Promise<PublishRecord['kept']> {
    // Anything still uncommitted is committed first, so the kept branch has all of it.
    const status = await git(['--no-optional-locks', 'status', '--porcelain=v1', '-z', '--untracked-files=all']);
    if (status.ok && status.stdout.length > 0) {
      await must(['add', '--all', '--', '.']);
      await git([...identity, 'commit', '--quiet', '--no-verify', '--no-gpg-sign', '-m', commitMessage({ summary: null, taskId, resourceLabel: 'kept change' })]);
    }
    const head = await resolve('HEAD');
    const base = upstream ?? (await resolve('@{upstream}')) ?? null;
    if (!head || (base && head === base)) return null;
    const branch = keptBranchName(taskId);
    await must(['branch', '--force', branch, head]);
    const patch = base ? await git(['format-patch', '--stdout', '--no-color', `${base}..${head}`]) : await git(['show', '--no-color', head]);
    await mkdir(options.patchDir, { recursive: true });
    const patchFile = path.join(options.patchDir, `${taskId.replace(/[^A-Za-z0-9._-]/g, '_')}.patch`);
    await writeFile(patchFile, redactSecrets(patch.stdout, secrets), { mode: 0o600 });
    // The change is safe in two places: the resource's next task starts from the remote state again.
    if (base) await must(['reset', '--quiet', '--hard', base]);
    return { branch, patchFile };
  }

  return { publish, worktreePathFor };
}

function containsSecret(text: string, secrets: readonly string[]): boolean {
  return secrets.some((secret) => {
    if (secret.length < 4) return false;
    const b64 = Buffer.from(secret).toString('base64').replace(/=+$/, '');
    return text.includes(secret) || (b64.length >= 8 && text.includes(b64));
  });
}
