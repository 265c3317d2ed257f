// Seeding bare repositories for the Gitea test double: a private non-bare "seed" clone per repo
// makes commits and pushes them into `root/<owner>/<repo>.git` over the local file transport.
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

import { execa } from 'execa';

export type FileTree = Record<string, string>;

export type PullRequestSource =
  | { fromBranch: string }
  | { commit: string }
  /** A commit made on top of `base` (default: the default branch) that is on no branch: a fork PR. */
  | { files: FileTree; base?: string; message?: string };

const NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]*$/;

export function assertRepoName(owner: string, repo: string): void {
  for (const part of [owner, repo]) {
    if (!NAME.test(part) || part.includes('..') || part.endsWith('.git')) {
      throw new Error(`invalid owner/repo name: ${JSON.stringify(part)}`);
    }
  }
}

export class FixtureRepos {
  private readonly seeds = new Map<string, { dir: string; defaultBranch: string }>();
  private seedRoot: string | undefined;
  private counter = 0;

  constructor(readonly root: string) {}

  barePath(owner: string, repo: string): string {
    assertRepoName(owner, repo);
    return path.join(this.root, owner, `${repo}.git`);
  }

  /** Runs git with a fixed identity and no user/system configuration. */
  async git(args: string[], cwd: string): Promise<string> {
    const home = await this.home();
    const stamp = `${1_700_000_000 + this.counter++} +0000`;
    const result = await execa('git', args, {
      cwd,
      extendEnv: false,
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        HOME: home,
        GIT_CONFIG_NOSYSTEM: '1',
        GIT_AUTHOR_NAME: 'Fixture Author',
        GIT_AUTHOR_EMAIL: 'fixture@example.invalid',
        GIT_COMMITTER_NAME: 'Fixture Author',
        GIT_COMMITTER_EMAIL: 'fixture@example.invalid',
        GIT_AUTHOR_DATE: stamp,
        GIT_COMMITTER_DATE: stamp,
        GIT_TERMINAL_PROMPT: '0',
      },
      stdin: 'ignore',
    });
    return result.stdout.trim();
  }

  private async home(): Promise<string> {
    if (!this.seedRoot) {
      this.seedRoot = await mkdtemp(path.join(os.tmpdir(), 'gitea-double-seeds-'));
      await mkdir(path.join(this.seedRoot, 'home'), { recursive: true });
    }
    return path.join(this.seedRoot, 'home');
  }

  async createRepo(
    owner: string,
    repo: string,
    options: { files?: FileTree; defaultBranch?: string; message?: string } = {},
  ): Promise<{ bare: string; head: string; defaultBranch: string }> {
    const defaultBranch = options.defaultBranch ?? 'main';
    const bare = this.barePath(owner, repo);
    await mkdir(path.dirname(bare), { recursive: true });
    await this.git(['init', '--quiet', '--bare', `--initial-branch=${defaultBranch}`, bare], this.root);
    await this.home();
    const seed = path.join(this.seedRoot as string, 'seeds', owner, repo);
    await mkdir(seed, { recursive: true });
    await this.git(['init', '--quiet', `--initial-branch=${defaultBranch}`], seed);
    await this.git(['remote', 'add', 'origin', bare], seed);
    this.seeds.set(`${owner}/${repo}`, { dir: seed, defaultBranch });
    await writeTree(seed, options.files ?? { 'README.md': `# ${repo}\n` });
    await this.git(['add', '-A'], seed);
    await this.git(['commit', '--quiet', '--allow-empty', '-m', options.message ?? 'initial commit'], seed);
    await this.git(['push', '--quiet', 'origin', `HEAD:refs/heads/${defaultBranch}`], seed);
    return { bare, head: await this.git(['rev-parse', 'HEAD'], seed), defaultBranch };
  }

  private seed(owner: string, repo: string): { dir: string; defaultBranch: string } {
    const seed = this.seeds.get(`${owner}/${repo}`);
    if (!seed) throw new Error(`no such fixture repo ${owner}/${repo}`);
    return seed;
  }

  /** Commits `files` on `branch` (created from the default branch if new) and pushes; returns the sha. */
  async pushCommit(owner: string, repo: string, branch: string, files: FileTree, message = `update ${branch}`): Promise<string> {
    const { dir, defaultBranch } = this.seed(owner, repo);
    await this.git(['fetch', '--quiet', '--prune', 'origin', '+refs/heads/*:refs/remotes/origin/*'], dir);
    const exists = await this.git(['branch', '-r', '--list', `origin/${branch}`], dir);
    const start = exists ? `origin/${branch}` : `origin/${defaultBranch}`;
    await this.git(['checkout', '--quiet', '--force', '-B', branch, start, '--'], dir);
    await writeTree(dir, files);
    await this.git(['add', '-A'], dir);
    await this.git(['commit', '--quiet', '--allow-empty', '-m', message], dir);
    await this.git(['push', '--quiet', 'origin', `HEAD:refs/heads/${branch}`], dir);
    return this.git(['rev-parse', 'HEAD'], dir);
  }

  /** Points `refs/pull/<number>/head` of the bare repo at a commit; returns the sha. */
  async createPullRequestRef(owner: string, repo: string, number: number, source: PullRequestSource): Promise<string> {
    if (!Number.isSafeInteger(number) || number <= 0) throw new Error('bad PR number');
    const bare = this.barePath(owner, repo);
    const ref = `refs/pull/${number}/head`;
    if ('fromBranch' in source) {
      const sha = await this.git(['rev-parse', '--verify', `refs/heads/${source.fromBranch}^{commit}`], bare);
      await this.git(['update-ref', ref, sha], bare);
      return sha;
    }
    if ('commit' in source) {
      const sha = await this.git(['rev-parse', '--verify', `${source.commit}^{commit}`], bare);
      await this.git(['update-ref', ref, sha], bare);
      return sha;
    }
    const { dir, defaultBranch } = this.seed(owner, repo);
    await this.git(['fetch', '--quiet', '--prune', 'origin', '+refs/heads/*:refs/remotes/origin/*'], dir);
    await this.git(['checkout', '--quiet', '--force', '--detach', `origin/${source.base ?? defaultBranch}`, '--'], dir);
    await writeTree(dir, source.files);
    await this.git(['add', '-A'], dir);
    await this.git(['commit', '--quiet', '--allow-empty', '-m', source.message ?? `fork change for #${number}`], dir);
    await this.git(['push', '--quiet', '--force', 'origin', `HEAD:${ref}`], dir);
    return this.git(['rev-parse', 'HEAD'], dir);
  }

  /** The sha a ref of the bare repository points to. */
  async resolve(owner: string, repo: string, ref: string): Promise<string> {
    return this.git(['rev-parse', '--verify', `${ref}^{commit}`], this.barePath(owner, repo));
  }

  async dispose(): Promise<void> {
    if (this.seedRoot) await rm(this.seedRoot, { recursive: true, force: true });
    this.seedRoot = undefined;
  }
}

async function writeTree(dir: string, files: FileTree): Promise<void> {
  for (const [name, content] of Object.entries(files)) {
    const target = path.resolve(dir, name);
    if (!target.startsWith(dir + path.sep) || target.includes(`${path.sep}.git${path.sep}`)) {
      throw new Error(`fixture file outside the tree: ${name}`);
    }
    await mkdir(path.dirname(target), { recursive: true });
    await writeFile(target, content);
  }
}
