// The gate process (src/mcp-gate/) with the REAL gitea-mcp as its child against a REAL Gitea 1.26,
// spoken to over stdio as Codex speaks to it: what it offers, what it forwards, what it refuses, what
// lands on Gitea, and the calls file the service audits. A child that never answers `initialize` is
// `sleep` (the real binary answers at once, so it cannot produce that fault).
// The last test speaks to the gate over its raw stdio (no MCP SDK client), to send what a client
// library never would: unparsable lines, a batch, a line over the gate's 8 MB bound.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gateStateDir, writeGateTask } from '../../src/mcp-gate/gate-files.js';
import { gateLaunch } from '../../src/mcp-gate/gate-launch.js';
import { ingestGateCalls } from '../../src/sessions/gate-calls.js';
import type { Store } from '../../src/store/types.js';
import { REAL_GITEA_MCP_PATH } from '../support/gitea-mcp-standin/index.js';
import { startSeededGitea, type SeededGitea } from '../support/real-gitea/index.js';
import { createTestRuntime } from '../support/test-runtime.js';

let g: SeededGitea;
let root: string;
let store: Store;
let closeStore: (() => Promise<void>) | undefined;
const clients: Client[] = [];

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'ccweb-gate-'));
  g = await startSeededGitea({ root: join(root, 'gitea'), botPermission: 'admin' });
  // A private repository the bot can read (it is a site-wide admin's): the gate must keep it out of reach.
  await g.api(g.users.owner.login, 'POST', '/user/repos', { name: 'secret', private: true, auto_init: true, default_branch: 'main' }, 201);
  await g.api(g.users.owner.login, 'PUT', `/repos/${g.users.owner.login}/secret/collaborators/${g.users.bot.login}`, { permission: 'read' }, 204);
  const rt = await createTestRuntime([], join(root, 'store'));
  store = rt.store;
  closeStore = () => rt.close();
}, 600_000);

afterAll(async () => {
  for (const c of clients) await c.close().catch(() => undefined);
  await closeStore?.();
  await g?.close();
  if (root) rmSync(root, { recursive: true, force: true });
});

function stateDirFor(name: string) {
  return gateStateDir(join(root, 'data'), `default:acme/widget:issue:${name}`);
}

async function connectGate(opts: { stateDir: string; number: number; child?: { command: string; args: string[]; env?: Record<string, string> }; timeoutMs?: number }) {
  const launch = gateLaunch({
    childCommand: opts.child?.command ?? REAL_GITEA_MCP_PATH,
    childArgs: opts.child?.args ?? ['-t', 'stdio', '-host', g.url],
    giteaUrl: g.url,
    token: g.users.bot.token,
    scope: { owner: g.owner, repo: g.repo, number: opts.number },
    stateDir: opts.stateDir,
  });
  const transport = new StdioClientTransport({
    command: launch.command,
    args: launch.args,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...launch.env, ...(opts.timeoutMs ? { CCWEB_GATE_CHILD_TIMEOUT_MS: String(opts.timeoutMs) } : {}) },
    stderr: 'pipe',
  });
  const client = new Client({ name: 'codex-like', version: '1' });
  clients.push(client);
  await client.connect(transport);
  return client;
}

const text = (r: any) => (r.content ?? []).map((c: any) => c.text ?? '').join('');

describe('the gate in front of the real gitea-mcp [real gitea-mcp]', () => {
  it('the real binary still lists what the recorded tool list holds (the unit tests read the recording)', async () => {
    const recorded = JSON.parse(readFileSync(new URL('../fixtures/gitea-mcp/tools-list-a5dd03c7f0d8.json', import.meta.url), 'utf8'));
    const transport = new StdioClientTransport({ command: REAL_GITEA_MCP_PATH, args: ['-t', 'stdio', '-host', g.url], env: { GITEA_ACCESS_TOKEN: 'unused' }, stderr: 'pipe' });
    const direct = new Client({ name: 'x', version: '1' });
    clients.push(direct);
    await direct.connect(transport);
    const { tools } = await direct.listTools();
    expect(tools).toEqual(recorded.tools);
    expect(direct.getServerVersion()).toEqual(recorded.initialize.serverInfo);
    await direct.close();
  });

  it('answers on its own issue through the real binary, edits only that answer, and refuses the rest; Gitea shows exactly that', async () => {
    const dir = stateDirFor('gate-1');
    writeGateTask(dir, { taskId: 'gitea-task-gate-1', extra: [] });
    const other = await g.createIssue(g.users.writer.login, 'another issue', 'not the task');
    const theirs = await g.comment(g.users.writer.login, g.issueNumber, 'a comment by someone else');
    const gate = await connectGate({ stateDir: dir, number: g.issueNumber });
    expect(gate.getServerVersion()).toMatchObject({ name: 'ccweb-gitea-gate', version: '0.0.0-a5dd03c7f0d8' });
    const names = (await gate.listTools()).tools.map((t) => t.name);
    expect(names).toContain('issue_write');
    expect(names).not.toContain('delete_branch');

    const answer = await gate.callTool({ name: 'issue_write', arguments: { method: 'add_comment', owner: 'acme', repo: 'widget', index: g.issueNumber, body: 'the answer' } });
    expect(answer.isError).toBeFalsy();
    const answerId = JSON.parse(text(answer)).id as number;
    const edited = await gate.callTool({ name: 'issue_write', arguments: { method: 'edit_comment', owner: 'acme', repo: 'widget', commentID: answerId, body: 'the answer, edited' } });
    expect(edited.isError).toBeFalsy();

    const refused = [
      await gate.callTool({ name: 'issue_write', arguments: { method: 'edit_comment', owner: 'acme', repo: 'widget', commentID: theirs.id, body: 'rewritten' } }),
      await gate.callTool({ name: 'issue_write', arguments: { method: 'add_comment', owner: 'acme', repo: 'widget', index: other, body: 'elsewhere' } }),
      await gate.callTool({ name: 'get_file_contents', arguments: { owner: g.users.owner.login, repo: 'secret', filePath: 'README.md', ref: 'main' } }),
      await gate.callTool({ name: 'delete_branch', arguments: { owner: 'acme', repo: 'widget', branch: g.prHeadRef } }),
    ];
    for (const r of refused) {
      expect(r.isError).toBe(true);
      expect(text(r)).toMatch(/^ccweb-gitea refused/);
      expect(text(r)).toContain(`issue_write add_comment on #${g.issueNumber}`);
    }
    const file = await gate.callTool({ name: 'get_file_contents', arguments: { owner: 'acme', repo: 'widget', filePath: 'src/login.js', ref: 'main' } });
    expect(file.isError).toBeFalsy();
    expect(text(file)).toContain('login');

    const comments = await g.comments(g.issueNumber);
    expect(comments.find((c) => c.id === answerId)).toMatchObject({ body: 'the answer, edited', user: { login: g.users.bot.login } });
    expect(comments.find((c) => c.id === theirs.id)?.body).toBe('a comment by someone else');
    expect(await g.comments(other)).toEqual([]);
    const branches = await g.api<Array<{ name: string }>>(g.users.owner.login, 'GET', `/repos/acme/widget/branches`);
    expect(branches.body.map((b) => b.name)).toContain(g.prHeadRef);

    // What the service audits: one line per call, attributed to the task.
    const n = await ingestGateCalls(store, dir, { onCall: () => undefined });
    expect(n).toBe(7);
    const audit = (await store.audit({})).filter((e) => e.taskId === 'gitea-task-gate-1');
    expect(audit.filter((e) => e.action === 'agent.gitea_refused').map((e) => [e.metadata?.['tool'], e.level])).toEqual([
      ['issue_write', 'security'],
      ['issue_write', 'security'],
      ['get_file_contents', 'security'],
      ['delete_branch', 'security'],
    ]);
    expect(audit.find((e) => e.action === 'agent.gitea_call' && e.metadata?.['method'] === 'add_comment')?.metadata).toMatchObject({ outcome: 'forwarded', createdCommentId: answerId, index: g.issueNumber });
    expect(await ingestGateCalls(store, dir)).toBe(0); // nothing is audited twice
  });

  it("past the task file's write deadline (the node's lease not renewed in time) no write is forwarded, reads are; a renewal's later deadline forwards again", async () => {
    const dir = stateDirFor('gate-deadline');
    writeGateTask(dir, { taskId: 'gitea-task-gate-deadline', extra: [], writesUntil: Date.now() - 1 });
    const gate = await connectGate({ stateDir: dir, number: g.issueNumber });
    const before = (await g.comments(g.issueNumber)).length;
    const late = await gate.callTool({ name: 'issue_write', arguments: { method: 'add_comment', owner: 'acme', repo: 'widget', index: g.issueNumber, body: 'an answer from a node that lost the task' } });
    expect(late.isError).toBe(true);
    expect(text(late)).toMatch(/^ccweb-gitea refused issue_write add_comment: the task is no longer held by this node/);
    const file = await gate.callTool({ name: 'get_file_contents', arguments: { owner: 'acme', repo: 'widget', filePath: 'src/login.js', ref: 'main' } });
    expect(file.isError).toBeFalsy();
    expect(await g.comments(g.issueNumber)).toHaveLength(before);
    // The lease renewed: the service writes a later deadline, and the same gate forwards the answer.
    writeGateTask(dir, { taskId: 'gitea-task-gate-deadline', extra: [], writesUntil: Date.now() + 60_000 });
    const answer = await gate.callTool({ name: 'issue_write', arguments: { method: 'add_comment', owner: 'acme', repo: 'widget', index: g.issueNumber, body: 'the answer in time' } });
    expect(answer.isError).toBeFalsy();
    expect(await g.comments(g.issueNumber)).toHaveLength(before + 1);
    await gate.close();
  });

  it('a later task on the same thread cannot edit the earlier task\'s answer', async () => {
    const dir = stateDirFor('gate-2');
    writeGateTask(dir, { taskId: 'task-a', extra: [] });
    const gate = await connectGate({ stateDir: dir, number: g.issueNumber });
    const first = await gate.callTool({ name: 'issue_write', arguments: { method: 'add_comment', owner: 'acme', repo: 'widget', index: g.issueNumber, body: 'task a answer' } });
    const id = JSON.parse(text(first)).id as number;
    writeGateTask(dir, { taskId: 'task-b', extra: [] });
    const edit = await gate.callTool({ name: 'issue_write', arguments: { method: 'edit_comment', owner: 'acme', repo: 'widget', commentID: id, body: 'rewritten by b' } });
    expect(edit.isError).toBe(true);
    expect(text(edit)).toMatch(/not posted by you in this task/);
  });

  it('forwards nothing it cannot record: with the calls file unwritable an answer is refused and nothing lands on Gitea', async () => {
    const dir = stateDirFor('gate-5');
    writeGateTask(dir, { taskId: 'task-full-disk', extra: [] });
    mkdirSync(join(dir, 'calls.jsonl')); // appending to a directory fails, as a full disk would
    const gate = await connectGate({ stateDir: dir, number: g.issueNumber });
    const before = (await g.comments(g.issueNumber)).length;
    const r = await gate.callTool({ name: 'issue_write', arguments: { method: 'add_comment', owner: 'acme', repo: 'widget', index: g.issueNumber, body: 'unrecorded' } });
    expect(r.isError).toBe(true);
    expect(text(r)).toMatch(/cannot record calls/);
    expect((await g.comments(g.issueNumber)).length).toBe(before);
  });

  it('a gitea-mcp that cannot start, or never answers initialize, fails the gate\'s own initialize', async () => {
    await expect(connectGate({ stateDir: stateDirFor('gate-3'), number: 1, child: { command: join(root, 'no-such-gitea-mcp'), args: [] } })).rejects.toThrow();
    // A child that reads stdin and never answers: the gate gives up after its child timeout.
    const started = Date.now();
    await expect(connectGate({ stateDir: stateDirFor('gate-4'), number: 1, timeoutMs: 1_500, child: { command: '/bin/sh', args: ['-c', 'exec sleep 30'] } })).rejects.toThrow();
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_400);
    expect(Date.now() - started).toBeLessThan(15_000);
  });

  it('over its real stdio, malformed lines are answered with errors, ids kept, a line over 8 MB skipped, and the gate goes on serving', async () => {
    const stateDir = stateDirFor('gate-raw');
    mkdirSync(stateDir, { recursive: true });
    writeGateTask(stateDir, { taskId: 'gitea-task-gate-raw', extra: [] });
    const launch = gateLaunch({ childCommand: REAL_GITEA_MCP_PATH, childArgs: ['-t', 'stdio', '-host', g.url], giteaUrl: g.url, token: g.users.bot.token, scope: { owner: g.owner, repo: g.repo, number: g.issueNumber }, stateDir });
    const gate = spawn(launch.command, launch.args, { env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...launch.env }, stdio: ['pipe', 'pipe', 'ignore'] });
    const answers: any[] = [];
    let buf = '';
    const waiters: (() => void)[] = [];
    gate.stdout.on('data', (d: Buffer) => {
      buf += d.toString('utf8');
      let nl: number;
      while ((nl = buf.indexOf('\n')) !== -1) {
        answers.push(JSON.parse(buf.slice(0, nl)));
        buf = buf.slice(nl + 1);
        waiters.splice(0).forEach((w) => w());
      }
    });
    const until = async (n: number) => {
      while (answers.length < n) await new Promise<void>((r) => waiters.push(r));
    };
    try {
      const w = (s: string) => gate.stdin.write(`${s}\n`);
      w(JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } }));
      w('{"jsonrpc":"2.0","id":1,"method":');
      w(JSON.stringify([{ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'issue_write', arguments: { method: 'add_comment', owner: g.owner, repo: g.repo, index: g.issueNumber, body: 'batched' } } }]));
      w(JSON.stringify({ jsonrpc: '2.0', id: 'big', method: 'tools/call', params: { name: 'issue_write', arguments: { method: 'add_comment', owner: g.owner, repo: g.repo, index: g.issueNumber, body: 'x'.repeat(9 * 1024 * 1024) } } }));
      w(JSON.stringify({ jsonrpc: '2.0', id: 'r', method: 'resources/list' }));
      w(JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/list' }));
      await until(6);
      expect(answers.map((a) => [a.id, a.error?.code ?? 'result'])).toEqual([
        [0, 'result'],
        [null, -32700],
        [null, -32600],
        ['big', -32600],
        ['r', -32601],
        [3, 'result'],
      ]);
      expect(answers[5].result.tools.map((t: any) => t.name)).toContain('issue_write');
      // Neither the batched nor the oversized answer reached Gitea, and nothing was recorded.
      expect((await g.comments(g.issueNumber)).some((c: any) => /batched|xxxx/.test(c.body))).toBe(false);
      expect(() => readFileSync(join(stateDir, 'calls.jsonl'), 'utf8')).toThrow();
    } finally {
      gate.stdin.end();
      await new Promise((r) => gate.once('exit', r));
    }
  });
});
