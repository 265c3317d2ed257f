// The Gitea test double's git endpoint on its own: Gitea-shaped paths and token checks.
// (Checks the git-http stand-in itself.)
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startGitHttpServer, type GitHttpServer } from '../../src/demo/gitea-double/git-http.js';

const TOKEN = `tok_${randomBytes(16).toString('hex')}`;
let tmp: string;
let server: GitHttpServer;
let head: string;

/** `git ls-remote` with one extra header (given through the environment, never argv). */
async function lsRemote(url: string, header?: string): Promise<{ exitCode: number | undefined; stdout: string; stderr: string }> {
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: tmp,
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_TERMINAL_PROMPT: '0',
    GIT_CONFIG_COUNT: header ? '2' : '1',
    GIT_CONFIG_KEY_0: 'credential.helper',
    GIT_CONFIG_VALUE_0: '',
  };
  if (header) {
    env.GIT_CONFIG_KEY_1 = 'http.extraHeader';
    env.GIT_CONFIG_VALUE_1 = header;
  }
  const r = await execa('git', ['ls-remote', url], { env, extendEnv: false, reject: false, stdin: 'ignore' });
  return { exitCode: r.exitCode, stdout: r.stdout, stderr: r.stderr };
}

beforeAll(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), 'ccweb-gitdouble-'));
  server = await startGitHttpServer({ root: path.join(tmp, 'gitea'), token: TOKEN });
  head = (await server.createRepo('acme', 'widget', { files: { 'a.txt': 'a\n' }, defaultBranch: 'trunk' })).head;
});

afterAll(async () => {
  await server?.close();
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

describe('git smart HTTP test double', () => {
  it('listens on 127.0.0.1 only', () => {
    expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const address = server.server.address();
    expect(typeof address === 'object' && address?.address).toBe('127.0.0.1');
  });

  it('answers 401 with WWW-Authenticate: Basic without a valid token', async () => {
    const url = `${server.cloneUrl('acme', 'widget')}/info/refs?service=git-upload-pack`;
    const none = await fetch(url);
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toMatch(/^Basic/);
    const wrong = await fetch(url, { headers: { Authorization: 'token nope' } });
    expect(wrong.status).toBe(401);
  });

  it('accepts token, Bearer and Basic (token as password) and serves the advertisement', async () => {
    const url = `${server.cloneUrl('acme', 'widget')}/info/refs?service=git-upload-pack`;
    for (const auth of [
      `token ${TOKEN}`,
      `Bearer ${TOKEN}`,
      `Basic ${Buffer.from(`bot:${TOKEN}`).toString('base64')}`,
      `Basic ${Buffer.from(`${TOKEN}:x-oauth-basic`).toString('base64')}`,
    ]) {
      const r = await fetch(url, { headers: { Authorization: auth } });
      expect(r.status, auth.split(' ')[0]).toBe(200);
      expect(r.headers.get('content-type')).toBe('application/x-git-upload-pack-advertisement');
      await r.arrayBuffer();
    }
  });

  it('404s an unknown repository and leaves non-git paths to the fallback', async () => {
    const missing = await fetch(`${server.url}/acme/nope.git/info/refs?service=git-upload-pack`, {
      headers: { Authorization: `token ${TOKEN}` },
    });
    expect(missing.status).toBe(404);
    const api = await fetch(`${server.url}/api/v1/version`);
    expect(api.status).toBe(404);
    expect(server.requests.some((q) => q.path === '/api/v1/version')).toBe(false);
  });

  it('serves branches and refs/pull/N/head to real git, with or without the .git suffix', async () => {
    const prSha = await server.createPullRequestRef('acme', 'widget', 3, { files: { 'b.txt': 'b\n' } });
    for (const url of [server.cloneUrl('acme', 'widget'), `${server.url}/acme/widget`]) {
      const r = await lsRemote(url, `Authorization: token ${TOKEN}`);
      expect(r.exitCode, r.stderr).toBe(0);
      expect(r.stdout).toContain(`${head}\trefs/heads/trunk`);
      expect(r.stdout).toContain(`${prSha}\trefs/pull/3/head`);
      expect(r.stdout).toContain(`${head}\tHEAD`);
    }
    const basic = await lsRemote(
      server.cloneUrl('acme', 'widget'),
      `Authorization: Basic ${Buffer.from(`x:${TOKEN}`).toString('base64')}`,
    );
    expect(basic.exitCode, basic.stderr).toBe(0);
    const denied = await lsRemote(server.cloneUrl('acme', 'widget'));
    expect(denied.exitCode).not.toBe(0);
    expect(JSON.stringify(server.requests)).not.toContain(TOKEN);
  });
});
