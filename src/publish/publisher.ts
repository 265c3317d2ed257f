// Change delivery: what a turn left in the resource's worktree reaches Gitea as commits on
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
//
// What never leaves: a fork's pull request is delivered to its head branch in the fork,
// only when its author allows edits by maintainers — never to a branch of the base repository, which
// would carry the fork's commits (workflow files among them) there; and CI definitions
// (protected-paths.ts) are not committed unless the operator allows it for the repository: they are
// withheld (kept apart, named in a notice once the rest is on Gitea) and the rest of the change is
// published; a change that was nothing but such paths is refused (`publish_paths_all_withheld`).
//
// A refusal stands: when the agent's tool published during the turn and was refused, the change was
// kept and the worktree reset, so the publish after the turn finds nothing new — it answers with that
// refusal again (standingRefusal), and the task fails with it instead of ending as a success.
import { existsSync } from 'node:fs';
import path from 'node:path';

import type { CommentRecord, RepositoryRecord, TaskRecord, TurnRecord } from '../domain/records.js';
import type { Tx } from '../store/types.js';
import { pendingReceiptRecord, receiptCommentKey } from '../receipts/receipt-record.js';
import { NOT_PUBLISHED_NOTICE_STATE, WITHHELD_PATHS_NOTICE_STATE } from '../receipts/receipt-text.js';
import { diffSize } from '../domain/usage-records.js';
import { cloneUrlFor } from '../gitea/clone-url.js';
import { countPublishedDiff } from '../usage/usage-accounting.js';
import { classifyGitFailure } from '../workspace/classify-git-failure.js';
import { redactSecrets } from '../workspace/git-credentials.js';
import { resourceWorktreePath } from '../workspace/resource-worktree.js';
import { describeFailure, runGit, type GitResult } from '../workspace/run-git.js';
import { commitMessage } from './commit-message.js';
import { type GiteaPull } from './gitea-pulls.js';
import { keepChange } from './keep-change.js';
import {
  commitIdentity,
  containsSecret,
  nothingNew,
  owedFromBefore,
  publishErrorCode,
  publishTarget,
  pullRequestStep,
  pushFailureCode,
  standingRefusal,
  summaryFor,
  trackingRefFor,
} from './publish-decisions.js';
import { nulList, publishPathSettings, refusedPaths } from './protected-paths.js';
import { PublishError, type PublishOutcome, type PublishRecord, type Publisher, type PublisherOptions } from './publish-types.js';
import { ensurePull, settle } from './pull-requests.js';
import { setAside, stagedRefusedPaths, unstage, type Withheld } from './withhold-paths.js';

export type { DeliveryMode, PublishOutcome, PublishRecord, Publisher, PublisherOptions } from './publish-types.js';

export function createPublisher(options: PublisherOptions): Publisher {
  const { store, gitea } = options;
  const mode = options.mode ?? 'pull_request';
  const prefix = options.branchPrefix ?? 'ccweb/';
  const now = options.now ?? (() => new Date());
  const timeoutMs = options.gitTimeoutMs ?? 120_000;
  const settleMs = options.settleTimeoutMs ?? 30_000;
  const log = options.log ?? (() => undefined);
  const secrets = [options.token];
  const identity = commitIdentity(options.botLogin, options.giteaUrl);
  // One publish per task at a time in this process (the agent's tool and the safety net never overlap).
  const inFlight = new Map<string, Promise<PublishOutcome>>();
  /** Each running publish's fence (src/leases/lease-fence.ts), checked in every record it writes. */
  const fences = new Map<string, (tx: Tx) => Promise<void>>();

  async function worktreePathFor(task: TaskRecord): Promise<string> {
    const repo = await store.get<RepositoryRecord>('repositories', task.repoKey);
    return resourceWorktreePath(options.workspaceRoot, repo?.instanceId ?? options.instanceId ?? 'default', task.owner, task.repo, task.resource);
  }

  async function record(
    taskId: string,
    patch: Partial<PublishRecord>,
    audit?: { action: string; metadata: Record<string, unknown>; level?: 'alert' },
    notice?: string,
  ) {
    return store.transact(async (tx) => {
      await fences.get(taskId)?.(tx);
      const t = await tx.get<TaskRecord>('tasks', taskId);
      if (!t) return null;
      const prev: PublishRecord = t.publish ?? {
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
      await tx.put<TaskRecord>('tasks', taskId, { ...t, publish: next });
      // Usage counts a change once: when its intent (`pushing`, with its measured size) is verified published.
      if (prev.status === 'pushing' && next.status === 'published' && prev.diff) await countPublishedDiff(tx, taskId, prev.diff, now());
      if (audit) await tx.appendAudit({ action: audit.action, actor: 'system:publisher', taskId, ...(audit.level ? { level: audit.level } : {}), metadata: audit.metadata });
      // A status comment for the receipt outbox (exactly once by its key), in the same transaction.
      if (notice) await tx.insertIfAbsent<CommentRecord>('comments', receiptCommentKey(taskId, notice), pendingReceiptRecord(t, notice, now()));
      return next;
    });
  }

  async function publish(taskId: string, opts: { summary?: string | null; signal?: AbortSignal; fence?: (tx: Tx) => Promise<void> } = {}): Promise<PublishOutcome> {
    const running = inFlight.get(taskId);
    if (running) await running.catch(() => undefined);
    if (opts.fence) fences.set(taskId, opts.fence);
    const p = publishOnce(taskId, opts);
    inFlight.set(taskId, p);
    try {
      return await p;
    } finally {
      if (inFlight.get(taskId) === p) inFlight.delete(taskId);
      if (fences.get(taskId) === opts.fence) fences.delete(taskId);
    }
  }

  async function publishOnce(taskId: string, opts: { summary?: string | null; signal?: AbortSignal }): Promise<PublishOutcome> {
    const task = await store.get<TaskRecord>('tasks', taskId);
    if (!task) return { ok: false, errorCode: 'publish_failed', message: `task ${taskId} not found`, record: null };
    const repo = await store.get<RepositoryRecord>('repositories', task.repoKey);
    if (!repo) return { ok: false, errorCode: 'publish_failed', message: `repository ${task.repoKey} not found`, record: null };
    // The push goes to the configured Gitea, never to a URL a payload wrote.
    const remoteUrl = cloneUrlFor(options.giteaUrl, repo.owner, repo.name);
    const wt = await worktreePathFor(task);
    const summary = summaryFor(opts.summary, await store.byIndex<TurnRecord>('turns', 'taskId', taskId));

    // `token: url`: the token goes with this one command, its header scoped to that URL only.
    const git = (args: string[], extra: { token?: string } = {}): Promise<GitResult> =>
      runGit(args, {
        cwd: wt,
        timeoutMs,
        logger: options.logger,
        secrets,
        ...(opts.signal ? { signal: opts.signal } : {}),
        ...(extra.token ? { token: options.token, scopeUrl: extra.token } : {}),
      });
    const must = async (args: string[], extra: { token?: string } = {}): Promise<GitResult> => {
      const r = await git(args, extra);
      if (!r.ok) throw new PublishError(classifyGitFailure(r).code === 'auth_failed' ? 'push_rejected' : 'publish_git_failed', describeFailure(args, r));
      return r;
    };
    const resolve = async (ref: string): Promise<string | null> => {
      const r = await git(['rev-parse', '--verify', '--quiet', `${ref}^{commit}`]);
      return r.ok ? r.stdout.trim() : null;
    };
    const isAncestor = async (a: string, b: string) => (await git(['merge-base', '--is-ancestor', a, b])).ok;
    const lsRemote = async (branch: string, url = remoteUrl): Promise<string | null> => {
      const r = await must(['ls-remote', '--heads', '--', url, `refs/heads/${branch}`], { token: url });
      const line = r.stdout.split('\n').find((l) => l.endsWith(`\trefs/heads/${branch}`));
      return line ? line.split('\t')[0]! : null;
    };
    const fetchBranch = async (branch: string, url = remoteUrl, into = `refs/remotes/origin/${branch}`) =>
      must(['fetch', '--quiet', '--no-tags', '--', url, `+refs/heads/${branch}:${into}`], { token: url });
    const keepDeps = { git, must, resolve, identity, patchDir: options.patchDir, secrets };
    const keep = (upstream: string | null) => keepChange(keepDeps, taskId, upstream);
    const audit = (id: string, action: string, metadata: Record<string, unknown>) => record(id, {}, { action, metadata });
    const holds = async (remote: string | null, pushed: string) => remote !== null && (remote === pushed || (await isAncestor(pushed, remote).catch(() => false)));

    if (!existsSync(wt)) {
      // A task that never had a worktree (or an older task from before change delivery): nothing to publish.
      const rec = await record(taskId, { status: 'nothing_to_publish', mode }, { action: 'publish.nothing', metadata: { reason: 'no_worktree' } });
      options.onOutcome?.('nothing_to_publish');
      return { ok: true, record: rec! };
    }

    let upstream: string | null = null;
    // A pull request's worktree starts from this ref (resource-worktree.ts): what a refusal before
    // the remote was read keeps its change on top of.
    const startRef = task.resource.kind === 'pull_request' ? `refs/remotes/origin/pr/${task.resource.number}` : null;
    const pathSettings = publishPathSettings(repo);
    const previous = task.publish;
    const owedBefore = owedFromBefore(previous);
    // Fast path without the network: a clean tree whose HEAD some remote-tracking ref already contains
    // has nothing new (the common "answer only" turn).
    const statusArgs = ['--no-optional-locks', 'status', '--porcelain=v1', '-z', '--untracked-files=all'];
    // The fast path's status is also step 1's: nothing touches the tree in between, and on a 10⁵-file
    // tree each status costs about as much as the commit itself.
    let firstStatus: GitResult | null = null;
    if (!owedBefore) {
      const status = (firstStatus = await git(statusArgs));
      const contained = await git(['for-each-ref', '--count=1', '--contains', 'HEAD', '--format=%(refname)', 'refs/remotes/']);
      if (status.ok && status.stdout.length === 0 && contained.ok && contained.stdout.trim() !== '') {
        const refusal = standingRefusal(previous);
        if (refusal) return { ok: false, ...refusal, record: previous! };
        const rec = await record(taskId, { status: 'nothing_to_publish', mode }, { action: 'publish.nothing', metadata: { reason: 'no_changes' } });
        options.onOutcome?.('nothing_to_publish');
        return { ok: true, record: rec! };
      }
    }
    // Paths this publish left out of the commit (withheld-paths.ts): named in a notice once the rest is on Gitea.
    let withheldNow: Withheld | null = null;
    try {
      // The target branch and the pull request it belongs to.
      const pull: GiteaPull | null = task.resource.kind === 'issue' ? null : await gitea.getPull(task.owner, task.repo, task.resource.number);
      const { kind, target, fork } = publishTarget({ resource: task.resource, pull, prefix, defaultBranch: repo.defaultBranch });
      // The repository the branch is in: the task's own, or (a fork's pull request) the fork.
      const where = fork ?? { owner: task.owner, name: task.repo };
      const targetUrl = fork ? cloneUrlFor(options.giteaUrl, fork.owner, fork.name) : remoteUrl;
      const targetLabel = fork ? `${fork.owner}/${fork.name}:${target}` : target;

      // 1. Commit what is uncommitted (the agent's edits, new and deleted files). After a crash the
      //    commit already exists and the tree is clean: nothing is committed twice. Refused paths
      //    (CI definitions) are left out, kept apart and named to the user.
      const status = firstStatus?.ok ? firstStatus : await must(statusArgs);
      if (status.stdout.length > 0) {
        await must(['add', '--all', '--', '.']);
        const refused = await stagedRefusedPaths({ must }, pathSettings);
        if (refused.length > 0) await unstage({ must }, refused);
        const staged = await git(['diff', '--cached', '--quiet']);
        if (!staged.ok) {
          const message = commitMessage({ summary, taskId, resourceLabel: `#${task.resource.number}` });
          await must([...identity, 'commit', '--quiet', '--no-verify', '--no-gpg-sign', '-m', message]);
          const sha = await resolve('HEAD');
          await record(taskId, {}, { action: 'publish.commit', metadata: { sha, worktree: path.basename(wt) } });
        }
        if (refused.length > 0) {
          withheldNow = await setAside(keepDeps, taskId, refused);
          await record(taskId, { withheld: withheldNow }, { action: 'publish.paths_withheld', metadata: { ...withheldNow }, level: 'alert' });
        }
      }
      const head = (await resolve('HEAD'))!;

      // 2. Where the branch stands on Gitea now (a fork's branch: read from the fork, into a ref of its own).
      let remoteHead: string | null;
      try {
        remoteHead = await lsRemote(target, targetUrl);
      } catch (error) {
        if (!fork) throw error;
        throw new PublishError('fork_unreachable', `the bot cannot reach the fork ${fork.owner}/${fork.name} of pull request #${task.resource.number} (a private fork needs the bot as a reader): ${(error as Error).message}`);
      }
      if (remoteHead) await fetchBranch(target, targetUrl, trackingRefFor(target, fork));
      if (kind !== 'issue' && !remoteHead) throw new PublishError('publish_target_missing', `the head branch ${targetLabel} of pull request #${task.resource.number} is gone`);
      if (!remoteHead) await fetchBranch(repo.defaultBranch);
      upstream = remoteHead ?? (await resolve(`refs/remotes/origin/${repo.defaultBranch}`));
      if (!upstream) throw new PublishError('publish_git_failed', `origin has no ${repo.defaultBranch}`);

      // Commits made in the worktree by anyone but step 1 (the agent can run git) are checked too:
      // refused paths in them refuse the whole publish, since they cannot be taken out of a commit
      // the service did not make without rewriting it. `...`: from the merge base, so what a human
      // pushed to the branch meanwhile is not counted as ours.
      const touched = refusedPaths(nulList((await must(['diff', '--name-only', '--no-renames', '-z', `${upstream}...HEAD`])).stdout), pathSettings);
      if (touched.length > 0) {
        throw new PublishError('publish_protected_paths', `commits in the workspace change ${touched.slice(0, 5).join(', ')}, which the bot does not publish in this repository`);
      }

      const ahead = Number((await must(['rev-list', '--count', `${upstream}..HEAD`])).stdout.trim()) || 0;
      if (nothingNew({ ahead, owedBefore, previousBranch: previous?.branch, target })) {
        // Everything the agent changed was withheld: nothing reaches Gitea, so the change was refused
        // (kept on the withheld branch), not "nothing to publish" and not "the rest was published".
        if (withheldNow) throw new PublishError('publish_paths_all_withheld', `every path the change touched is one the bot does not commit in this repository: ${withheldNow.paths.slice(0, 5).join(', ')}`);
        const refusal = standingRefusal(previous);
        if (refusal) return { ok: false, ...refusal, record: previous! };
        const rec = await record(taskId, { status: 'nothing_to_publish', mode, branch: previous?.branch ?? null }, { action: 'publish.nothing', metadata: { branch: target, remoteHead } });
        options.onOutcome?.('nothing_to_publish');
        return { ok: true, record: rec! };
      }

      if (mode === 'off') {
        const kept = await keep(upstream);
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
            throw new PublishError('push_conflict', `the branch ${targetLabel} moved on Gitea and this change does not apply on top of it`);
          }
          pushedHead = (await resolve('HEAD'))!;
          await record(taskId, {}, { action: 'publish.rebased', metadata: { branch: target, onto: remoteHead, head: pushedHead } });
        }
        // Unredacted on purpose (no `secrets`): this output is only searched, never logged or stored. The
        // committed bytes, never a program's rendering of them: no external diff or textconv driver runs.
        const diff = await runGit(['log', '-p', '--no-color', '--no-ext-diff', '--no-textconv', `${upstream}..HEAD`], { cwd: wt, timeoutMs, ...(opts.signal ? { signal: opts.signal } : {}) });
        if (!diff.ok || containsSecret(diff.stdout, secrets)) {
          throw new PublishError('publish_secret_in_change', 'the change contains the service token; it was not pushed');
        }
        const commits = (await must(['rev-list', '--reverse', `${upstream}..HEAD`])).stdout.split('\n').filter(Boolean);
        // The change's size for usage: from the merge base, so what others pushed to the branch is not
        // counted as ours; no external diff or textconv program (the worktree's config is the agent's).
        const measured = await git(['diff', '--no-color', '--no-ext-diff', '--no-textconv', `${upstream}...${pushedHead}`]);
        const size = measured.ok ? diffSize(measured.stdout) : null;
        // Intent before the push: a restart from here on knows this task owes a push and a pull request.
        await record(taskId, { status: 'pushing', mode, branch: target, repository: fork ? `${fork.owner}/${fork.name}` : null, headSha: pushedHead, commits, diff: size, errorCode: null, message: null });

        // 4. Push (never forced). Skipped when Gitea already has it (a crash after the push). The
        //    branch as step 2 read it moments ago: a crash after an earlier push shows there (ahead is
        //    then 0, below), and anyone else's push since would make ours a refused non-fast-forward.
        if (await holds(remoteHead, pushedHead)) {
          await record(taskId, {}, { action: 'publish.push_skipped', metadata: { branch: target, head: pushedHead, reason: 'already_on_gitea' } });
        } else {
          const args = ['push', '--quiet', '--porcelain', '--no-verify', '--', targetUrl, `${pushedHead}:refs/heads/${target}`];
          const r = await git(args, { token: targetUrl });
          if (!r.ok) {
            const code = pushFailureCode(r, classifyGitFailure(r).code === 'auth_failed');
            const why =
              code === 'push_conflict'
                ? `the push to ${targetLabel} was refused as not fast-forward: `
                : code === 'push_rejected'
                  ? `Gitea refused the push to ${targetLabel}: `
                  : '';
            throw new PublishError(code, `${why}${describeFailure(args, r)}`);
          }
          await record(taskId, {}, { action: 'publish.push', metadata: { branch: target, head: pushedHead, commits: commits.length } });
        }
      } else {
        // Owed from before a restart: the push happened (Gitea has it) but was never confirmed here.
        pushedHead = previous?.headSha ?? head;
        await record(taskId, {}, { action: 'publish.push_skipped', metadata: { branch: target, head: pushedHead, reason: 'already_on_gitea' } });
      }

      // 5. Read back: the remote branch holds what we pushed, and Gitea's API knows the branch.
      const after = await lsRemote(target, targetUrl);
      if (!after || !(await holds(after, pushedHead))) {
        throw new PublishError('publish_unverified', `the branch ${targetLabel} on Gitea does not hold ${pushedHead}`);
      }
      await settle(
        `branch ${targetLabel}`,
        async () => {
          const b = await gitea.getBranch(where.owner, where.name, target);
          return b !== null && b.commit.id === after;
        },
        settleMs,
      );

      // 6. The pull request: reuse the open one of this head, else create it (once).
      let pr: { number: number; url: string } | null = null;
      const step = pullRequestStep(mode, kind);
      if (step === 'use_resource_pull') pr = { number: pull!.number, url: pull!.html_url };
      else if (step === 'ensure_pull') pr = await ensurePull({ gitea, audit }, task, target, repo.defaultBranch, summary);
      if (pr) {
        const number = pr.number;
        await settle(
          `pull request #${number}`,
          async () => {
            const p = await gitea.getPull(task.owner, task.repo, number);
            return p.state === 'open' && p.head.sha === after;
          },
          settleMs,
        );
      }
      const rec = await record(
        taskId,
        { status: 'published', mode, branch: target, repository: fork ? `${fork.owner}/${fork.name}` : null, headSha: after, pullRequest: pr, errorCode: null, message: null },
        { action: 'publish.verified', metadata: { branch: target, ...(fork ? { repository: `${fork.owner}/${fork.name}` } : {}), head: after, pullRequest: pr?.number ?? null } },
        // Only now is "the rest was published" true: the withheld paths' notice is queued with the verified record.
        withheldNow || (await store.get<TaskRecord>('tasks', taskId))?.publish?.withheld?.paths.length ? WITHHELD_PATHS_NOTICE_STATE : undefined,
      );
      options.onOutcome?.('published');
      return { ok: true, record: rec! };
    } catch (error) {
      const errorCode = publishErrorCode(error);
      const message = redactSecrets(error instanceof Error ? error.message : String(error), secrets).slice(0, 500);
      let kept: PublishRecord['kept'] = null;
      try {
        kept = await keep(upstream ?? (startRef ? await resolve(startRef) : null));
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

  return { publish, worktreePathFor };
}
