// Workspace manager against the Gitea test double: real git, real `git http-backend`, loopback only.
// The git-http stand-in (not a real Gitea) for what a real one cannot be made to do on cue: a hanging git
// (timeouts, aborts), commits pushed behind Gitea's back (a fork commit on no branch), a request log to
// count 401s, many repositories created instantly. Against a real Gitea: workspace-real-gitea.test.ts.
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, symlink, unlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { prepareResourceWorktree, type ResourceWorktreeInput } from '../../src/workspace/resource-worktree.js';
import type { GitLogEntry } from '../../src/workspace/run-git.js';
import {
  prepareWorkspace,
  type PrepareWorkspaceInput,
  type PrepareWorkspaceResult,
} from '../../src/workspace/workspace-manager.js';
import { startGitHttpServer, type GitHttpServer } from '../../src/demo/gitea-double/git-http.js';

const TOKEN = `tok_${randomBytes(20).toString('hex')}`;

let tmp: string;
let root: string;
let server: GitHttpServer;
const logs: GitLogEntry[] = [];
const messages: string[] = [];
let mainHead: string;

async function git(cwd: string, ...args: string[]): Promise<string> {
  const r = await execa('git', args, { cwd, env: { GIT_CONFIG_NOSYSTEM: '1' } });
  return r.stdout.trim();
}

async function prepare(overrides: Partial<PrepareWorkspaceInput> = {}): Promise<PrepareWorkspaceResult> {
  const result = await prepareWorkspace({
    root,
    owner: 'acme',
    repo: 'widget',
    cloneUrl: server.cloneUrl('acme', 'widget'),
    token: TOKEN,
    context: { kind: 'issue' },
    timeoutMs: 30_000,
    logger: (entry) => logs.push(entry),
    ...overrides,
  });
  if (!result.ok) messages.push(result.message);
  return result;
}

function ok(result: PrepareWorkspaceResult): Extract<PrepareWorkspaceResult, { ok: true }> {
  if (!result.ok) throw new Error(`expected success, got ${result.code}: ${result.message}`);
  return result;
}

/** Every file under `dir` (including `.git/`), read as bytes. */
async function* walk(dir: string): AsyncGenerator<string> {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) yield* walk(full);
    else if (entry.isFile()) yield full;
  }
}

beforeAll(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), 'ccweb-ws-'));
  root = path.join(tmp, 'workspaces');
  server = await startGitHttpServer({ root: path.join(tmp, 'gitea'), token: TOKEN });
  const created = await server.createRepo('acme', 'widget', {
    files: { 'README.md': '# widget\n', 'src/index.js': 'export const x = 1;\n' },
    defaultBranch: 'main',
  });
  mainHead = created.head;
});

afterAll(async () => {
  await server?.close();
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

describe('workspace manager over smart HTTP', () => {
  const workspace = (): string => path.join(root, 'default', 'acme', 'widget');

  it('clones on first use and checks out the default branch', async () => {
    const r = ok(await prepare());
    expect(r.action).toBe('cloned');
    expect(r.path).toBe(workspace());
    expect(r.branch).toBe('main');
    expect(r.defaultBranch).toBe('main');
    expect(r.head).toBe(mainHead);
    expect(Date.parse(r.lastFetchAt)).not.toBeNaN();
    expect(await git(workspace(), 'rev-parse', 'HEAD')).toBe(mainHead);
    expect(await readFile(path.join(workspace(), 'src/index.js'), 'utf8')).toContain('x = 1');
    // No temporary clone directory left beside it.
    expect((await readdir(path.dirname(workspace()))).filter((n) => n.startsWith('.ccweb-clone-'))).toEqual([]);
    // The server saw the token only in the Authorization header (never as a URL credential).
    expect(server.requests.length).toBeGreaterThan(0);
    expect(server.requests.every((q) => q.authScheme === 'token' && q.authorized)).toBe(true);
  });

  it('fetches on later use and sees a new commit', async () => {
    const newHead = await server.pushCommit('acme', 'widget', 'main', { 'CHANGELOG.md': 'v2\n' });
    const r = ok(await prepare({ defaultBranch: 'main' }));
    expect(r.action).toBe('fetched');
    expect(r.head).toBe(newHead);
    expect(await git(workspace(), 'rev-parse', 'HEAD')).toBe(newHead);
    expect(existsSync(path.join(workspace(), 'CHANGELOG.md'))).toBe(true);
    mainHead = newHead;
  });

  it('checks out a pull request head from refs/pull/N/head', async () => {
    const featureHead = await server.pushCommit('acme', 'widget', 'feature', { 'feature.txt': 'feature\n' });
    const prSha = await server.createPullRequestRef('acme', 'widget', 7, { fromBranch: 'feature' });
    expect(prSha).toBe(featureHead);
    const r = ok(await prepare({ context: { kind: 'pull_request', number: 7 } }));
    expect(r.branch).toBe('pr-7');
    expect(r.head).toBe(prSha);
    expect(await git(workspace(), 'rev-parse', 'HEAD')).toBe(prSha);
    expect(await git(workspace(), 'symbolic-ref', '--short', 'HEAD')).toBe('pr-7');
  });

  it('checks out a fork pull request whose commit is on no branch', async () => {
    const forkSha = await server.createPullRequestRef('acme', 'widget', 8, { files: { 'fork.txt': 'from a fork\n' } });
    const bare = server.repos.barePath('acme', 'widget');
    expect(await git(bare, 'for-each-ref', '--contains', forkSha, 'refs/heads')).toBe('');
    const r = ok(await prepare({ context: { kind: 'pull_request', number: 8 } }));
    expect(r.head).toBe(forkSha);
    expect(await git(workspace(), 'rev-parse', 'HEAD')).toBe(forkSha);
    expect(await readFile(path.join(workspace(), 'fork.txt'), 'utf8')).toBe('from a fork\n');
    // A PR that does not exist is a non-retryable git failure.
    const missing = await prepare({ context: { kind: 'pull_request', number: 999 } });
    expect(missing).toMatchObject({ ok: false, code: 'git_failed', retryable: false, message: 'pull request #999 has no refs/pull/999/head on origin' });
  });

  it('returns to the default branch fresh from origin for an issue', async () => {
    const r = ok(await prepare());
    expect(r.branch).toBe('main');
    expect(r.head).toBe(mainHead);
    expect(existsSync(path.join(workspace(), 'fork.txt'))).toBe(false);
  });

  it('refuses a dirty tree (untracked file) and leaves it untouched', async () => {
    const before = await git(workspace(), 'rev-parse', 'HEAD');
    const notes = path.join(workspace(), 'notes.txt');
    await writeFile(notes, 'user work in progress\n');
    const r = await prepare({ context: { kind: 'pull_request', number: 7 } });
    expect(r).toMatchObject({ ok: false, code: 'workspace_dirty', retryable: false });
    expect(await readFile(notes, 'utf8')).toBe('user work in progress\n');
    expect(await git(workspace(), 'rev-parse', 'HEAD')).toBe(before);
    await unlink(notes);
  });

  it('refuses a dirty tree (modified tracked file) and leaves it untouched', async () => {
    const readme = path.join(workspace(), 'README.md');
    await writeFile(readme, '# edited by someone\n');
    const r = await prepare();
    expect(r).toMatchObject({ ok: false, code: 'workspace_dirty' });
    expect(await readFile(readme, 'utf8')).toBe('# edited by someone\n');
    expect(await git(workspace(), 'status', '--porcelain')).toBe('M README.md');
    await git(workspace(), 'checkout', '--', 'README.md');
  });

  it('refuses a leftover .git/index.lock and does not remove it', async () => {
    const lock = path.join(workspace(), '.git', 'index.lock');
    await writeFile(lock, '');
    const r = await prepare();
    expect(r).toMatchObject({ ok: false, code: 'workspace_dirty', retryable: false });
    if (!r.ok) expect(r.message).toContain('index.lock');
    expect(existsSync(lock)).toBe(true);
    await unlink(lock);
    ok(await prepare());
  });

  it('serialises concurrent first uses of one workspace: one clone, then a fetch', async () => {
    await server.createRepo('acme', 'twin');
    const input = { repo: 'twin', cloneUrl: server.cloneUrl('acme', 'twin') };
    const [a, b] = await Promise.all([prepare(input), prepare(input)]);
    expect([ok(a).action, ok(b).action].sort()).toEqual(['cloned', 'fetched']);
    expect(ok(a).head).toBe(ok(b).head);
  });

  it('refuses a non-git, non-empty directory at the workspace path', async () => {
    const other = path.join(root, 'default', 'acme', 'other');
    await mkdir(other, { recursive: true });
    await writeFile(path.join(other, 'keep.txt'), 'mine\n');
    const r = await prepare({ repo: 'other', cloneUrl: server.cloneUrl('acme', 'widget') });
    expect(r).toMatchObject({ ok: false, code: 'workspace_dirty' });
    expect(await readFile(path.join(other, 'keep.txt'), 'utf8')).toBe('mine\n');
  });

  it('reports auth_failed (retryable) for a wrong token, on clone and on fetch', async () => {
    const wrong = `wrong_${randomBytes(12).toString('hex')}`;
    const fresh = await prepare({ root: path.join(tmp, 'ws-auth'), token: wrong });
    expect(fresh).toMatchObject({ ok: false, code: 'auth_failed', retryable: true });
    expect(JSON.stringify(fresh)).not.toContain(wrong);
    expect(existsSync(path.join(tmp, 'ws-auth', 'default', 'acme', 'widget'))).toBe(false);
    const fetch = await prepare({ token: wrong });
    expect(fetch).toMatchObject({ ok: false, code: 'auth_failed', retryable: true });
    expect(JSON.stringify(fetch)).not.toContain(wrong);
    expect(JSON.stringify(logs)).not.toContain(wrong);
    expect(server.requests.some((q) => q.status === 401)).toBe(true);
  });

  it('rejects path traversal and option-injection names', async () => {
    const attempts: Array<Partial<PrepareWorkspaceInput>> = [
      { owner: '..' },
      { owner: '../../etc' },
      { repo: '..' },
      { repo: 'a/../../b' },
      { owner: 'a\\b' },
      { repo: '-uexploit' },
      { owner: '--upload-pack=touch' },
      { repo: '' },
      { owner: 'a\u0000b' },
      { repo: 'a\nb' },
      { instanceId: '../..' },
      { instanceId: '.' },
    ];
    for (const attempt of attempts) {
      const r = await prepare(attempt);
      expect(r, JSON.stringify(attempt)).toMatchObject({ ok: false, code: 'path_invalid', retryable: false });
    }
    // A symlink inside the root that points outside it.
    const outside = path.join(tmp, 'outside');
    await mkdir(outside, { recursive: true });
    await symlink(outside, path.join(root, 'default', 'evil'));
    const viaLink = await prepare({ owner: 'evil' });
    expect(viaLink).toMatchObject({ ok: false, code: 'path_invalid' });
    expect(await readdir(outside)).toEqual([]);
    // Credentials in the clone URL are refused outright.
    const withCreds = await prepare({
      root: path.join(tmp, 'ws-creds'),
      cloneUrl: server.cloneUrl('acme', 'widget').replace('http://', `http://bot:${TOKEN}@`),
    });
    expect(withCreds).toMatchObject({ ok: false, code: 'git_failed', retryable: false });
    expect(JSON.stringify(withCreds)).not.toContain(TOKEN);
  });

  it('times out a hanging git, kills its process group and leaves nothing behind', async () => {
    const name = `hang${randomBytes(4).toString('hex')}`;
    await server.createRepo('acme', name);
    server.hang.add(`acme/${name}`);
    const started = Date.now();
    const pending = prepare({
      root: path.join(tmp, 'ws-hang'),
      repo: name,
      cloneUrl: server.cloneUrl('acme', name),
      timeoutMs: 3000,
    });
    // While it hangs: git and git-remote-http are alive, in one process group; their argv has no
    // token; their environment holds it only as the scoped extraHeader, and nothing of ours leaks in.
    let alive: Array<{ pid: number; pgid: number }> = [];
    for (let i = 0; i < 100 && alive.length < 2; i++) {
      await new Promise((resolve) => setTimeout(resolve, 25));
      const list = await execa('ps', ['-eo', 'pid=,pgid=,args=']);
      alive = list.stdout
        .split('\n')
        .filter((line) => line.includes(name))
        .map((line) => line.trim().split(/\s+/))
        .map(([pid, pgid]) => ({ pid: Number(pid), pgid: Number(pgid) }));
    }
    expect(alive.length).toBeGreaterThanOrEqual(2);
    expect(new Set(alive.map((p) => p.pgid)).size).toBe(1);
    expect(alive.some((p) => p.pid === p.pgid)).toBe(true);
    for (const { pid } of alive) {
      const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
      expect(cmdline).not.toContain(TOKEN);
      const environ = (await readFile(`/proc/${pid}/environ`, 'utf8').catch(() => '')).split('\0');
      const withToken = environ.filter((kv) => kv.includes(TOKEN));
      expect(withToken.every((kv) => /^GIT_CONFIG_VALUE_\d+=Authorization: token /.test(kv))).toBe(true);
      expect(environ.some((kv) => kv.startsWith('VITEST'))).toBe(false);
    }
    const r = await pending;
    const elapsed = Date.now() - started;
    expect(r).toMatchObject({ ok: false, code: 'timeout', retryable: true });
    expect(elapsed).toBeLessThan(10_000);
    expect(server.requests.some((q) => q.repo === name && q.status === -1)).toBe(true);
    // Neither git nor git-remote-http survives.
    await new Promise((resolve) => setTimeout(resolve, 200));
    const ps = await execa('ps', ['-eo', 'pid,args']);
    expect(ps.stdout.split('\n').filter((line) => line.includes(name))).toEqual([]);
    const parent = path.join(tmp, 'ws-hang', 'default', 'acme');
    expect(existsSync(path.join(parent, name))).toBe(false);
    expect((await readdir(parent)).filter((n) => n.startsWith('.ccweb-clone-'))).toEqual([]);
    server.hang.delete(`acme/${name}`);
  });

  it('an abort signal (lost lease, shutdown) stops a hanging git at once and leaves nothing behind', async () => {
    const name = `abort${randomBytes(4).toString('hex')}`;
    await server.createRepo('acme', name);
    server.hang.add(`acme/${name}`);
    const controller = new AbortController();
    const pending = prepare({
      root: path.join(tmp, 'ws-abort'),
      repo: name,
      cloneUrl: server.cloneUrl('acme', name),
      timeoutMs: 60_000,
      signal: controller.signal,
    });
    // Wait until git is talking to the hanging server, then abort.
    for (let i = 0; i < 200 && !server.requests.some((q) => q.repo === name); i++) await new Promise((r) => setTimeout(r, 25));
    controller.abort();
    const r = await pending;
    expect(r).toMatchObject({ ok: false, code: 'timeout', retryable: true });
    await new Promise((resolve) => setTimeout(resolve, 200));
    const ps = await execa('ps', ['-eo', 'pid,args']);
    expect(ps.stdout.split('\n').filter((line) => line.includes(name))).toEqual([]);
    server.hang.delete(`acme/${name}`);
  });

  it('leak scan: the token is nowhere in the workspace, config, errors or logs', async () => {
    // One more clone and fetch of a second repository, so both paths are covered here too.
    await server.createRepo('acme', 'gadget', { files: { 'a.txt': 'a\n' } });
    const input = { repo: 'gadget', cloneUrl: server.cloneUrl('acme', 'gadget') };
    ok(await prepare(input));
    await server.pushCommit('acme', 'gadget', 'main', { 'b.txt': 'b\n' });
    await server.createPullRequestRef('acme', 'gadget', 1, { files: { 'c.txt': 'c\n' } });
    ok(await prepare({ ...input, context: { kind: 'pull_request', number: 1 } }));

    const needle = Buffer.from(TOKEN);
    const hits: string[] = [];
    let scanned = 0;
    for (const dir of [root, path.join(tmp, 'ws-auth'), path.join(tmp, 'ws-hang')]) {
      if (!existsSync(dir)) continue;
      for await (const file of walk(dir)) {
        scanned += 1;
        if ((await readFile(file)).includes(needle)) hits.push(file);
      }
    }
    expect(scanned).toBeGreaterThan(20);
    expect(hits).toEqual([]);
    expect(messages.length).toBeGreaterThan(0);
    expect(messages.join('\n')).not.toContain(TOKEN);
    expect(logs.length).toBeGreaterThan(10);
    expect(JSON.stringify(logs)).not.toContain(TOKEN);
    expect(JSON.stringify(server.requests)).not.toContain(TOKEN);
    // Arguments never carry it: every logged argv is token-free (checked above) and no argv
    // mentions an extraHeader or credential.
    expect(logs.some((e) => e.args.join(' ').match(/extraheader|authorization/i))).toBe(false);

    for (const repo of ['widget', 'gadget']) {
      const ws = path.join(root, 'default', 'acme', repo);
      const config = await git(ws, 'config', '--list', '--show-origin');
      expect(config).not.toContain(TOKEN);
      expect(config.toLowerCase()).not.toContain('extraheader');
      const remoteUrl = await git(ws, 'remote', 'get-url', 'origin');
      expect(remoteUrl).toBe(server.cloneUrl('acme', repo));
      expect(new URL(remoteUrl).username).toBe('');
      expect(new URL(remoteUrl).password).toBe('');
    }
  });
});

// One worktree per resource over the shared clone (resource-worktree.ts), in a root of its own so the
// cases above keep theirs.
describe('resource worktree over smart HTTP', () => {
  const wtRoot = (): string => path.join(tmp, 'ws-worktrees');
  const worktree = (input: Partial<ResourceWorktreeInput> = {}) =>
    prepareResourceWorktree({
      root: wtRoot(),
      owner: 'acme',
      repo: 'widget',
      cloneUrl: server.cloneUrl('acme', 'widget'),
      token: TOKEN,
      resource: { kind: 'issue', number: 4 },
      issueBranch: 'ccweb/issue-4',
      timeoutMs: 30_000,
      logger: (entry) => logs.push(entry),
      ...input,
    });

  it("an issue's worktree: its own branch from the default branch, beside the shared clone", async () => {
    const r = await worktree();
    if (!r.ok) throw new Error(`expected success, got ${r.code}: ${r.message}`);
    expect(r.path).toBe(path.join(wtRoot(), 'default', '.worktrees', 'acme', 'widget', 'issue-4'));
    expect(r.repoPath).toBe(path.join(wtRoot(), 'default', 'acme', 'widget'));
    expect(r.branch).toBe('ccweb/issue-4');
    expect(r.upstream).toBe('refs/remotes/origin/main');
    expect(r.head).toBe(mainHead);
    expect(await git(r.path, 'symbolic-ref', '--short', 'HEAD')).toBe('ccweb/issue-4');
  });

  it('the shared clone has no working tree: the files are written once, in the worktree', async () => {
    const repoPath = path.join(wtRoot(), 'default', 'acme', 'widget');
    expect((await readdir(repoPath)).sort()).toEqual(['.git']);
    expect(existsSync(path.join(wtRoot(), 'default', '.worktrees', 'acme', 'widget', 'issue-4', 'src', 'index.js'))).toBe(true);
    // A later task fetches into it without asking `git status` about a tree nobody checked out
    // (which would list every file as deleted) and without checking anything out there.
    const newHead = await server.pushCommit('acme', 'widget', 'main', { 'NEWS.md': 'news\n' });
    const r = await worktree({ resource: { kind: 'issue', number: 5 }, issueBranch: 'ccweb/issue-5' });
    if (!r.ok) throw new Error(`expected success, got ${r.code}: ${r.message}`);
    expect(r.head).toBe(newHead);
    expect(await readFile(path.join(r.path, 'NEWS.md'), 'utf8')).toBe('news\n');
    expect((await readdir(repoPath)).sort()).toEqual(['.git']);
  });

  it('a shared clone made with a checkout keeps working, and its tree is no longer inspected', async () => {
    const oldRoot = path.join(tmp, 'ws-worktrees-old');
    const full = ok(await prepare({ root: oldRoot }));
    await writeFile(path.join(full.path, 'left-behind.txt'), 'nobody works here\n');
    const r = await worktree({ root: oldRoot });
    if (!r.ok) throw new Error(`expected success, got ${r.code}: ${r.message}`);
    expect(r.repoPath).toBe(full.path);
    expect(await readFile(path.join(full.path, 'left-behind.txt'), 'utf8')).toBe('nobody works here\n');
  });

  it("a resource's worktree already at its branch's commit is not checked out again; one behind is moved", async () => {
    const wt = path.join(wtRoot(), 'default', '.worktrees', 'acme', 'widget', 'issue-5');
    const from = logs.length;
    const again = await worktree({ resource: { kind: 'issue', number: 5 }, issueBranch: 'ccweb/issue-5' });
    expect(again).toMatchObject({ ok: true, path: wt });
    const checkouts = () => logs.slice(from).filter((e) => e.args.includes('checkout') && e.cwd === wt);
    expect(checkouts()).toEqual([]);
    const newer = await server.pushCommit('acme', 'widget', 'main', { 'NEWS.md': 'more news\n' });
    const moved = await worktree({ resource: { kind: 'issue', number: 5 }, issueBranch: 'ccweb/issue-5' });
    expect(moved).toMatchObject({ ok: true, path: wt, head: newer });
    expect(checkouts()).toHaveLength(1);
  });

  it('a shared clone with a half-done git operation still blocks the repository', async () => {
    const repoPath = path.join(wtRoot(), 'default', 'acme', 'widget');
    await writeFile(path.join(repoPath, '.git', 'index.lock'), '');
    try {
      const r = await worktree({ resource: { kind: 'issue', number: 6 }, issueBranch: 'ccweb/issue-6' });
      expect(r).toMatchObject({ ok: false, code: 'workspace_dirty' });
    } finally {
      await unlink(path.join(repoPath, '.git', 'index.lock'));
    }
  });

  it('a pull request without refs/pull/N/head: git_failed, not retryable, said so', async () => {
    const r = await worktree({ resource: { kind: 'pull_request', number: 998 } });
    expect(r).toEqual({
      ok: false,
      code: 'git_failed',
      retryable: false,
      message: 'pull request #998 has no refs/pull/998/head on origin',
      path: path.join(wtRoot(), 'default', '.worktrees', 'acme', 'widget', 'pr-998'),
    });
  });

  it("uncommitted changes are the resource's own problem (ownResource), kept, and a returning task continues on them", async () => {
    const wt = path.join(wtRoot(), 'default', '.worktrees', 'acme', 'widget', 'issue-4');
    await writeFile(path.join(wt, 'notes.txt'), 'half done\n');
    const refused = await worktree();
    expect(refused).toMatchObject({ ok: false, code: 'workspace_dirty', retryable: false, ownResource: true, path: wt });
    expect(await readFile(path.join(wt, 'notes.txt'), 'utf8')).toBe('half done\n');
    const resumed = await worktree({ continueDirty: true });
    expect(resumed).toMatchObject({ ok: true, path: wt });
    expect(await readFile(path.join(wt, 'notes.txt'), 'utf8')).toBe('half done\n');
  });
});
