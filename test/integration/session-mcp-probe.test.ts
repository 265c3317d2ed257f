// The doctor's explicit MCP probe (MCP SDK stdio client) against the gitea-mcp stand-in.
// The probe's failure modes come from the gitea-mcp stand-in (exit, hang); the Gitea REST stand-in is only
// its target. The probe against a real Gitea: doctor in ops-doctor.test.ts and real-gitea.e2e.test.ts.
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { probeMcp } from '../../src/sessions/mcp-preflight.js';
import { nodeScript, repoRoot } from '../support/codex-harness.js';
import { createGiteaRestDouble, startGiteaRestServer, type StartedGiteaRestServer } from '../support/gitea-double/rest-api.js';
import { GITEA_MCP_STANDIN_PATH } from '../support/gitea-mcp-standin/index.js';

const TOKEN = 'tok_probe_9f1e2d3c4b5a';
let srv: StartedGiteaRestServer;
let dir: string;
const wrap = (name: string, command: string, args: string[], env = '') => {
  const file = join(dir, name);
  writeFileSync(file, `#!/bin/sh\n${env}exec ${[command, ...args].map((a) => `'${a}'`).join(' ')} "$@"\n`);
  chmodSync(file, 0o755);
  return file;
};

beforeAll(async () => {
  srv = await startGiteaRestServer(createGiteaRestDouble({ token: TOKEN, botLogin: 'giteabot' }));
  dir = mkdtempSync(join(tmpdir(), 'ccweb-probe-'));
});
afterAll(async () => {
  await srv.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('probeMcp', () => {
  it('lists the tools of a working server, and maps missing / exiting / hanging servers', async () => {
    const env = { GITEA_ACCESS_TOKEN: TOKEN, GITEA_HOST: srv.url };
    const args = ['-t', 'stdio', '-host', srv.url];
    const ok = await probeMcp(wrap('gitea-mcp', process.execPath, [GITEA_MCP_STANDIN_PATH]), args, env);
    expect(ok).toMatchObject({ ok: true, hasCommentTool: true });
    expect((ok as { tools: string[] }).tools).toEqual(expect.arrayContaining(['create_issue_comment', 'issue_write']));

    expect(await probeMcp(join(dir, 'missing'), args, env)).toMatchObject({ ok: false, errorCode: 'mcp_command_missing' });
    const stub = nodeScript(join(repoRoot, 'test', 'support', 'codex-gitea-mcp-stub.ts'));
    const exiting = await probeMcp(wrap('exit', stub.command, stub.args, 'export STUB_MCP_MODE=exit\n'), args, env);
    expect(exiting).toMatchObject({ ok: false, errorCode: 'mcp_start_failed' });
    const hanging = await probeMcp(wrap('hang', stub.command, stub.args, 'export STUB_MCP_MODE=hang\n'), args, env, { timeoutMs: 500 });
    expect(hanging).toMatchObject({ ok: false, errorCode: 'mcp_initialize_failed' });
    expect(JSON.stringify([ok, exiting, hanging])).not.toContain(TOKEN);
  }, 30_000);
});
