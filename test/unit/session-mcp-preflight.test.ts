import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CodexRpcError } from '../../src/codex/jsonrpc-connection.js';
import { classifyMcpStartError, preflightMcpCommand, resolveExecutable } from '../../src/sessions/mcp-preflight.js';

const dir = mkdtempSync(join(tmpdir(), 'ccweb-preflight-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const exe = join(dir, 'gitea-mcp');
writeFileSync(exe, '#!/bin/sh\n');
chmodSync(exe, 0o755);
const notExe = join(dir, 'not-exe');
writeFileSync(notExe, '');

describe('MCP preflight', () => {
  it('resolves a path as is and a bare name through PATH', () => {
    expect(resolveExecutable(exe)).toBe(exe);
    expect(resolveExecutable('gitea-mcp', `/nonexistent:${dir}`)).toBe(exe);
    expect(resolveExecutable('gitea-mcp', '/nonexistent')).toBeNull();
    expect(resolveExecutable(notExe)).toBeNull();
    expect(resolveExecutable(dir)).toBeNull();
    expect(resolveExecutable('')).toBeNull();
  });
  it('reports mcp_command_missing', () => {
    expect(preflightMcpCommand('gitea-mcp', { pathEnv: dir })).toEqual({ ok: true, path: exe });
    expect(preflightMcpCommand(join(dir, 'nope'))).toMatchObject({ ok: false, errorCode: 'mcp_command_missing' });
  });
  it("maps Codex's thread/start -32603 messages (as measured on codex 0.171)", () => {
    const e = (m: string, code: number | string = -32603) => new CodexRpcError('thread/start', code, m);
    const pre = 'error creating thread: Fatal error: Failed to initialize session: required MCP servers failed to initialize: gitea: ';
    expect(classifyMcpStartError(e(`${pre}handshaking with MCP server failed: connection closed: initialize response`))).toBe('mcp_start_failed');
    expect(classifyMcpStartError(e(`${pre}timed out handshaking with MCP server after 999.99ms: deadline has elapsed`))).toBe('mcp_initialize_failed');
    expect(classifyMcpStartError(e(`${pre}No such file or directory (os error 2)`))).toBe('mcp_command_missing');
    expect(classifyMcpStartError(e('thread not found'))).toBeNull();
    expect(classifyMcpStartError(e(`${pre}x`, 'app_server_exited'))).toBeNull();
    expect(classifyMcpStartError(new Error('MCP server'))).toBeNull();
  });
});
