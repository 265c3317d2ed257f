// The doctor's explicit MCP probe (MCP SDK stdio client) against the REAL gitea-mcp.
// Only the probe's two start-up failure modes come from the gitea-mcp stand-in (exiting at once, never
// answering initialize): the real binary starts without reaching Gitea and answers initialize in
// ~20 ms whatever its host or token, so it cannot show either. The Gitea REST double is only its target. The probe against a real Gitea: doctor in ops-doctor.test.ts and real-gitea.e2e.test.ts.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { probeGatedMcp, probeMcp } from '../../src/sessions/mcp-preflight.js';
import { createGiteaRestDouble, startGiteaRestServer, type StartedGiteaRestServer } from '../../src/demo/gitea-double/rest-api.js';
import { writeStandinFaultCommands } from '../support/gitea-mcp-standin/index.js';
import { writeRealGiteaMcpWrapper } from '../support/real-gitea-mcp.js';

const TOKEN = 'tok_probe_9f1e2d3c4b5a';
let srv: StartedGiteaRestServer;
let dir: string;

beforeAll(async () => {
  srv = await startGiteaRestServer(createGiteaRestDouble({ token: TOKEN, botLogin: 'giteabot' }));
  dir = mkdtempSync(join(tmpdir(), 'ccweb-probe-'));
});
afterAll(async () => {
  await srv.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('probeMcp [real gitea-mcp]', () => {
  it('lists the tools of a working server, and maps missing / exiting / hanging servers', async () => {
    const env = { GITEA_ACCESS_TOKEN: TOKEN, GITEA_HOST: srv.url };
    const args = ['-t', 'stdio', '-host', srv.url];
    const ok = await probeMcp(writeRealGiteaMcpWrapper(join(dir, 'gitea-mcp')), args, env);
    expect(ok).toMatchObject({ ok: true, hasCommentTool: true, serverName: 'Gitea MCP Server' });
    // a5dd03c7f0d8 has only the new names (49 tools); the old `create_issue_comment` is gone.
    expect((ok as { tools: string[] }).tools).toEqual(expect.arrayContaining(['issue_write', 'issue_read']));
    expect((ok as { tools: string[] }).tools).not.toContain('create_issue_comment');
    const faults = writeStandinFaultCommands(dir);

    expect(await probeMcp(join(dir, 'missing'), args, env)).toMatchObject({ ok: false, errorCode: 'mcp_command_missing' });
    const exiting = await probeMcp(faults.exit, args, env);
    expect(exiting).toMatchObject({ ok: false, errorCode: 'mcp_start_failed' });
    const hanging = await probeMcp(faults.hang, args, env, { timeoutMs: 500 });
    expect(hanging).toMatchObject({ ok: false, errorCode: 'mcp_initialize_failed' });
    expect(JSON.stringify([ok, exiting, hanging])).not.toContain(TOKEN);
  }, 30_000);

  it('through the gate (doctor and /readyz): gitea-mcp\'s version, only the allowed tools, the answer tool among them; a failing child named', async () => {
    const input = { command: writeRealGiteaMcpWrapper(join(dir, 'gitea-mcp')), args: ['-t', 'stdio', '-host', srv.url], giteaUrl: srv.url, token: TOKEN };
    const ok = await probeGatedMcp(input);
    expect(ok).toMatchObject({ ok: true, hasCommentTool: true, serverName: 'ccweb-gitea-gate', serverVersion: '0.0.0-a5dd03c7f0d8' });
    expect((ok as { tools: string[] }).tools).toHaveLength(12);
    expect((ok as { tools: string[] }).tools).not.toContain('delete_branch');
    const faults = writeStandinFaultCommands(dir);
    const exiting = await probeGatedMcp({ ...input, command: faults.exit });
    expect(exiting).toMatchObject({ ok: false, errorCode: 'mcp_start_failed' });
    expect((exiting as { reason: string }).reason).toMatch(/ccweb-gitea gate: /);
    expect(await probeGatedMcp({ ...input, command: join(dir, 'missing') })).toMatchObject({ ok: false, errorCode: 'mcp_command_missing' });
    expect(JSON.stringify([ok, exiting])).not.toContain(TOKEN);
  }, 30_000);
});
