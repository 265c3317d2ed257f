// The gitea-mcp stand-in (the real one cannot be built here) against the Gitea REST stand-in, which can
// refuse a comment on a locked issue (a real Gitea lets a bot with write access comment there). The
// stand-in MCP server talks to a real Gitea in test/e2e/real-gitea.e2e.test.ts.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGiteaRestDouble, startGiteaRestServer, type GiteaRestDouble, type StartedGiteaRestServer } from '../../src/demo/gitea-double/rest-api.js';
import { giteaMcpLaunch, GITEA_MCP_STANDIN_PATH } from '../support/gitea-mcp-standin/index.js';

const TOKEN = 'mcp-bot-token-42';
let double: GiteaRestDouble;
let srv: StartedGiteaRestServer;
let dir: string;

beforeAll(async () => {
  double = createGiteaRestDouble({ token: TOKEN, botLogin: 'giteabot', users: ['alice'] });
  srv = await startGiteaRestServer(double);
  double.addRepo('acme', 'app');
  double.addIssue('acme', 'app', { number: 1, title: 'question', user: 'alice' });
  double.addIssue('acme', 'app', { number: 2, title: 'locked', locked: true });
  dir = mkdtempSync(join(tmpdir(), 'gitea-mcp-standin-'));
});
afterAll(async () => {
  await srv.close();
  rmSync(dir, { recursive: true, force: true });
});

async function connect(extra: Parameters<typeof giteaMcpLaunch>[0] extends infer O ? Partial<O> : never = {}) {
  const launch = giteaMcpLaunch({ host: srv.url, token: TOKEN, ...extra });
  const transport = new StdioClientTransport({
    command: launch.command,
    args: launch.args,
    env: { PATH: process.env.PATH ?? '', ...launch.env },
    stderr: 'pipe',
  });
  const client = new Client({ name: 'test', version: '0.0.0' });
  await client.connect(transport);
  return client;
}

function textOf(r: unknown): string {
  const content = (r as { content: { type: string; text: string }[] }).content;
  return content.map((c) => c.text).join('');
}

describe('gitea-mcp stand-in', () => {
  it('lists both generations of comment tools with gitea-mcp input schemas', async () => {
    const client = await connect();
    try {
      const { tools } = await client.listTools();
      const byName = new Map(tools.map((t) => [t.name, t]));
      for (const n of ['create_issue_comment', 'get_issue_comments_by_index', 'edit_issue_comment', 'issue_write', 'issue_read']) {
        expect(byName.has(n), n).toBe(true);
      }
      expect(byName.get('create_issue_comment')!.inputSchema).toMatchObject({
        type: 'object',
        properties: { owner: { type: 'string' }, repo: { type: 'string' }, index: { type: 'number' }, body: { type: 'string' } },
        required: ['owner', 'repo', 'index', 'body'],
      });
      const iw = byName.get('issue_write')!.inputSchema as { properties: Record<string, any>; required: string[] };
      expect(iw.properties.method.enum).toEqual(expect.arrayContaining(['add_comment', 'edit_comment']));
      expect(iw.properties.commentID.type).toBe('number');
      expect(iw.required).toEqual(['method', 'owner', 'repo']);
      const ir = byName.get('issue_read')!.inputSchema as { properties: Record<string, any> };
      expect(ir.properties.method.enum).toContain('get_comments');
    } finally {
      await client.close();
    }
  });

  it('create_issue_comment (old) and issue_write add_comment (new) post to Gitea', async () => {
    const callLog = join(dir, 'calls.jsonl');
    const client = await connect({ callLog });
    try {
      const before = double.comments('acme', 'app', 1).length;

      const oldRes = await client.callTool({ name: 'create_issue_comment', arguments: { owner: 'acme', repo: 'app', index: 1, body: 'old-style reply' } });
      expect(oldRes.isError).toBeFalsy();
      const oldJson = JSON.parse(textOf(oldRes));
      expect(oldJson.Result).toMatchObject({ body: 'old-style reply', user: { login: 'giteabot' } });
      expect(typeof oldJson.Result.id).toBe('number');

      const newRes = await client.callTool({ name: 'issue_write', arguments: { method: 'add_comment', owner: 'acme', repo: 'app', index: 1, body: 'new-style reply' } });
      expect(newRes.isError).toBeFalsy();
      const newJson = JSON.parse(textOf(newRes));
      expect(Object.keys(newJson).sort()).toEqual(['body', 'created_at', 'html_url', 'id', 'updated_at', 'user']);
      expect(newJson).toMatchObject({ body: 'new-style reply', user: 'giteabot' });

      const stored = double.comments('acme', 'app', 1);
      expect(stored.length).toBe(before + 2);
      expect(stored.map((c) => c.id)).toEqual(expect.arrayContaining([oldJson.Result.id, newJson.id]));
      expect(stored.every((c) => (c.user as { login: string }).login === 'giteabot')).toBe(true);

      const edited = await client.callTool({ name: 'issue_write', arguments: { method: 'edit_comment', owner: 'acme', repo: 'app', commentID: newJson.id, body: 'edited' } });
      expect(JSON.parse(textOf(edited)).body).toBe('edited');

      const listOld = JSON.parse(textOf(await client.callTool({ name: 'get_issue_comments_by_index', arguments: { owner: 'acme', repo: 'app', index: 1 } })));
      expect(listOld.Result.map((c: { id: number }) => c.id)).toEqual(expect.arrayContaining([oldJson.Result.id, newJson.id]));
      const listNew = JSON.parse(textOf(await client.callTool({ name: 'issue_read', arguments: { method: 'get_comments', owner: 'acme', repo: 'app', index: 1 } })));
      expect(listNew.find((c: { id: number }) => c.id === newJson.id)).toMatchObject({ body: 'edited', user: 'giteabot' });

      const calls = readFileSync(callLog, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
      expect(calls.map((c) => c.tool)).toEqual(['create_issue_comment', 'issue_write', 'issue_write', 'get_issue_comments_by_index', 'issue_read']);
    } finally {
      await client.close();
    }
  });

  it('a Gitea refusal (locked issue) is a tool error, not a comment', async () => {
    const client = await connect();
    try {
      const r = await client.callTool({ name: 'create_issue_comment', arguments: { owner: 'acme', repo: 'app', index: 2, body: 'x' } });
      expect(r.isError).toBe(true);
      expect(textOf(r)).toContain('403');
      expect(textOf(r)).not.toContain(TOKEN);
      expect(double.comments('acme', 'app', 2)).toHaveLength(0);
    } finally {
      await client.close();
    }
  });

  it('toolset=new exposes only issue_read/issue_write', async () => {
    const client = await connect({ toolset: 'new' });
    try {
      const names = (await client.listTools()).tools.map((t) => t.name).sort();
      expect(names).toEqual(['issue_read', 'issue_write']);
    } finally {
      await client.close();
    }
  });

  it('STANDIN_MODE=exit-immediately: the process exits non-zero before any handshake', async () => {
    const launch = giteaMcpLaunch({ host: srv.url, token: TOKEN, mode: 'exit-immediately' });
    const code = await new Promise<number | null>((resolve) => {
      const p = spawn(launch.command, launch.args, { env: { ...process.env, ...launch.env }, stdio: ['pipe', 'pipe', 'pipe'] });
      p.on('exit', (c) => resolve(c));
    });
    expect(code).toBe(1);
    await expect(connect({ mode: 'exit-immediately' })).rejects.toThrow();
  });

  it('STANDIN_MODE=hang-initialize: initialize never answers (client times out)', async () => {
    const launch = giteaMcpLaunch({ host: srv.url, token: TOKEN, mode: 'hang-initialize' });
    const transport = new StdioClientTransport({ command: launch.command, args: launch.args, env: { PATH: process.env.PATH ?? '', ...launch.env }, stderr: 'pipe' });
    const client = new Client({ name: 'test', version: '0.0.0' });
    const t0 = Date.now();
    await expect(client.connect(transport, { timeout: 500 })).rejects.toThrow(/timed out|timeout/i);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(450);
    await transport.close();
  });

  it('starts fast as a plain node child process', async () => {
    const t0 = Date.now();
    const client = await connect();
    const elapsed = Date.now() - t0;
    await client.close();
    expect(GITEA_MCP_STANDIN_PATH.endsWith('server.mjs')).toBe(true);
    expect(elapsed).toBeLessThan(5_000);
  });
});

describe('the stand-in never outlives the process that started it', () => {
  const alive = (pid: number) => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  const waitGone = async (pid: number, ms: number) => {
    const until = Date.now() + ms;
    while (alive(pid) && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
    return !alive(pid);
  };

  it.each(['', 'hang-initialize'])('exits when its parent is SIGKILLed (STANDIN_MODE=%s)', async (mode) => {
    // A parent that starts the stand-in and then sits there: SIGKILL it, as a crash of the app-server would.
    const parent = spawn(
      process.execPath,
      [
        '-e',
        `const c = require('node:child_process').spawn(process.execPath, [${JSON.stringify(GITEA_MCP_STANDIN_PATH)}, '-t', 'stdio'], { stdio: ['pipe', 'ignore', 'ignore'], detached: true, env: { ...process.env, STANDIN_MODE: ${JSON.stringify(mode)} } });
         console.log(c.pid); setInterval(() => {}, 1000);`,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    const childPid = await new Promise<number>((resolve) => parent.stdout!.once('data', (b) => resolve(Number(String(b).trim()))));
    await new Promise((r) => setTimeout(r, 300));
    expect(alive(childPid)).toBe(true);
    parent.kill('SIGKILL');
    await new Promise((r) => parent.once('exit', r));
    expect(await waitGone(childPid, 5_000)).toBe(true);
  });
});
