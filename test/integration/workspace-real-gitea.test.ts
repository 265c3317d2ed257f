// Workspaces against a REAL Gitea 1.26 (git smart HTTP as Gitea serves it, private repository, the
// bot's token with the documented scopes): clone, fetch, a same-repo and a fork pull request head,
// and how real Gitea's refusals map to our codes. test/integration/workspace.test.ts keeps the
// git-http stand-in for what a real Gitea cannot be made to do on cue: hanging git, a commit on no
// branch pushed behind Gitea's back, request logs to count 401s.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { prepareWorkspace, type PrepareWorkspaceInput } from '../../src/workspace/index.js';
import { startSeededGitea, type SeededGitea } from '../support/real-gitea/index.js';

const execFileP = promisify(execFile);
let g: SeededGitea;
const tmp = mkdtempSync(join(tmpdir(), 'ccweb-ws-real-'));
const logs: unknown[] = [];

beforeAll(async () => {
  g = await startSeededGitea();
}, 600_000);

afterAll(async () => {
  await g?.close();
  rmSync(tmp, { recursive: true, force: true });
});

function input(over: Partial<PrepareWorkspaceInput> = {}): PrepareWorkspaceInput {
  return {
    root: join(tmp, 'ws'),
    owner: 'acme',
    repo: 'widget',
    cloneUrl: `${g.url}/acme/widget.git`,
    token: g.users.bot.token,
    context: { kind: 'issue' },
    defaultBranch: 'main',
    logger: (entry) => logs.push(entry),
    ...over,
  };
}

const head = async (cwd: string) => (await execFileP('git', ['rev-parse', 'HEAD'], { cwd })).stdout.trim();

function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...filesUnder(p));
    else out.push(p);
  }
  return out;
}

describe('workspaces against a real Gitea', () => {
  it('clones the private repository at main, then fetches', async () => {
    const first = await prepareWorkspace(input());
    expect(first).toMatchObject({ ok: true, action: 'cloned', branch: 'main' });
    const main = (await g.api<{ commit: { id: string } }>('acme', 'GET', '/repos/acme/widget/branches/main')).body.commit.id;
    expect(await head((first as { path: string }).path)).toBe(main);
    const again = await prepareWorkspace(input());
    expect(again).toMatchObject({ ok: true, action: 'fetched', head: main });
  });

  it('checks out a same-repository and a fork pull request head (refs/pull/N/head)', async () => {
    const pr = await prepareWorkspace(input({ context: { kind: 'pull_request', number: g.prNumber } }));
    expect(pr).toMatchObject({ ok: true, branch: `pr-${g.prNumber}`, head: g.prHeadSha });
    const fork = await prepareWorkspace(input({ context: { kind: 'pull_request', number: g.forkPrNumber } }));
    expect(fork).toMatchObject({ ok: true, branch: `pr-${g.forkPrNumber}`, head: g.forkPrHeadSha });
  });

  it('a pull request number that does not exist is a permanent git failure', async () => {
    const r = await prepareWorkspace(input({ context: { kind: 'pull_request', number: 999 } }));
    expect(r).toMatchObject({ ok: false, code: 'git_failed', retryable: false });
  });

  it('a wrong token is auth_failed (retryable) on clone and on fetch, and never shows up', async () => {
    const wrong = `${randomBytes(20).toString('hex')}`;
    const fresh = await prepareWorkspace(input({ root: join(tmp, 'ws-auth'), token: wrong }));
    expect(fresh).toMatchObject({ ok: false, code: 'auth_failed', retryable: true });
    const fetch = await prepareWorkspace(input({ token: wrong }));
    expect(fetch).toMatchObject({ ok: false, code: 'auth_failed', retryable: true });
    expect(JSON.stringify([fresh, fetch, logs])).not.toContain(wrong);
  });

  it('a private repository the bot cannot see: Gitea answers "Repository not found" → a permanent git failure', async () => {
    await g.api('bob', 'POST', '/user/repos', { name: 'secret', private: true, auto_init: true, default_branch: 'main' }, 201);
    const r = await prepareWorkspace(input({ root: join(tmp, 'ws-hidden'), owner: 'bob', repo: 'secret', cloneUrl: `${g.url}/bob/secret.git` }));
    expect(r).toMatchObject({ ok: false, code: 'git_failed', retryable: false });
    expect((r as { message: string }).message).toMatch(/Repository not found/);
  });

  it('leak scan: the token is in no file of the workspaces and not in their git config', async () => {
    const token = g.users.bot.token;
    for (const f of filesUnder(join(tmp, 'ws'))) expect(readFileSync(f).includes(token), f).toBe(false);
    const cfg = (await execFileP('git', ['config', '--list', '--show-origin'], { cwd: join(tmp, 'ws', 'default', 'acme', 'widget') })).stdout;
    expect(cfg).not.toContain(token);
    expect(JSON.stringify(logs)).not.toContain(token);
  });
});
