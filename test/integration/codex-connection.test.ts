// The real `codex app-server` (bundled with @openai/codex), offline: CODEX_HOME in a temp dir points
// at the scripted model on 127.0.0.1; the gitea MCP server is the REAL gitea-mcp, talking to the Gitea
// REST double. The gitea-mcp stand-in only for the start-up faults the real binary cannot show (an
// MCP server that exits at once, one that never answers initialize; see gitea-mcp-standin/index.ts).
import { join } from 'node:path';
import { rmSync } from 'node:fs';
import { afterEach, describe, expect, it, onTestFinished } from 'vitest';
import { CodexAppServerConnection, CodexRpcError, isInputTooLarge, type CodexConnectionEvent } from '../../src/codex/jsonrpc-connection.js';
import { CODEX_TURN_INPUT_MAX_CHARS } from '../../src/domain/agent-input.js';
import { turnErrorCode } from '../../src/sessions/session-error.js';
import { runTurn } from '../../src/codex/run-turn.js';
import { plainTurnStartParams, threadResumeParams, threadStartParams, turnStartParams } from '../../src/codex/thread-params.js';
import { codexFixture, filesContaining, nodeScript, readJsonLines, repoRoot, timed, type CodexFixture } from '../support/codex-harness.js';

const TOKEN = 'tok_ccweb_secret_5e1f0c9a7b';
/** The bot's token on the fixture's Gitea REST double is TOKEN (the leak checks look for it). */
const fixture = (steps: Parameters<typeof codexFixture>[0] = []) => codexFixture(steps, { token: TOKEN });

let fx: CodexFixture | null = null;
afterEach(async () => {
  await fx?.cleanup();
  fx = null;
});

function giteaMcp(f: CodexFixture, command = f.mcpCommand) {
  return { command, giteaUrl: f.giteaUrl, token: f.token, startupTimeoutSec: 20 };
}

async function startThread(conn: CodexAppServerConnection, f: CodexFixture, command = f.mcpCommand) {
  const res: any = await conn.request('thread/start', threadStartParams({ cwd: f.workspace, giteaMcp: giteaMcp(f, command), sandbox: f.agentSandbox.forThread(f.workspace) }));
  return res.thread.id as string;
}

function turnParams(conn: CodexAppServerConnection, threadId: string, text: string) {
  return turnStartParams({ threadId, text, model: conn.model!, reasoningEffort: null, developerInstructions: 'You work for ccweb-gitea tests.' });
}

describe('codex app-server connection (real binary, offline) [real gitea-mcp]', () => {
  it('runs the start-up chain: initialize → initialized → probes → config/read', async () => {
    fx = await fixture();
    const conn = await timed('start-up chain (spawn → config/read)', () => fx!.connect());
    expect(conn.initializeResult?.codexHome).toBe(fx.codexHome);
    expect(conn.configModel).toBe('fake-model');
    expect(conn.model).toBe('fake-model');
    expect(conn.goalsEnabled).toBe(true);
    expect(conn.collaborationModes?.some((m) => m.mode === 'default')).toBe(true);
    expect(fx.events.filter((e) => e.type === 'capability_downgrade')).toEqual([]);
    // CCWEB_CODEX_MODEL overrides config/read.
    const conn2 = await fx.connect({ env: { ...process.env, CCWEB_CODEX_MODEL: 'other-model' } });
    expect(conn2.configModel).toBe('fake-model');
    expect(conn2.model).toBe('other-model');
  });

  it('a full turn: the scripted model answers → turn/completed completed with the final agentMessage', async () => {
    fx = await fixture([{ type: 'message', text: 'Hello from the scripted model', deltas: ['Hello ', 'from the scripted model'] }]);
    const conn = await fx.connect();
    const threadId = await timed('thread/start (required MCP)', () => startThread(conn, fx!));
    const seen: string[] = [];
    const out = await timed('turn: one message', () =>
      runTurn(conn, { threadId, params: turnParams(conn, threadId, 'hi'), onNotification: (n) => seen.push(n.method) }),
    );
    expect(out.status).toBe('completed');
    expect(out.finalMessage).toBe('Hello from the scripted model');
    expect(out.items.map((i) => i.type)).toEqual(['userMessage', 'agentMessage']);
    expect(seen).toContain('turn/started');
    expect(seen.at(-1)).toBe('turn/completed');
    // collaborationMode reached the model: settings.model is what Codex sent.
    const body = fx.model.responsesBodies()[0];
    expect(body.model).toBe('fake-model');
    expect(JSON.stringify(body.input)).toContain('You work for ccweb-gitea tests.');
    console.log('[codex tools offered]', fx.model.toolNames().join(' '), '| shell:', JSON.stringify(fx.model.shellTool()?.name));
  });

  it('input over Codex\'s limit: turn/start refuses it as input_too_large (no downgrade, no plain retry); the limit itself is taken', async () => {
    fx = await fixture([{ type: 'message', text: 'took the long one' }, { type: 'message', text: 'still fine' }]);
    const conn = await fx.connect();
    const threadId = await startThread(conn, fx);
    const turn = (text: string) => {
      const base = { threadId, text, model: conn.model!, reasoningEffort: null, developerInstructions: 'You work for ccweb-gitea tests.' };
      return runTurn(conn, { threadId, params: turnStartParams(base), plainParams: plainTurnStartParams(base) });
    };
    // Code points, as Codex counts them: an emoji is one character (two UTF-16 units).
    const over = await turn('😀'.repeat(CODEX_TURN_INPUT_MAX_CHARS + 1)).then(
      () => null,
      (e: unknown) => e,
    );
    expect(over).toBeInstanceOf(CodexRpcError);
    expect(over).toMatchObject({ code: -32602, data: { input_error_code: 'input_too_large', max_chars: CODEX_TURN_INPUT_MAX_CHARS, actual_chars: CODEX_TURN_INPUT_MAX_CHARS + 1 } });
    expect(isInputTooLarge(over)).toBe(true);
    expect(turnErrorCode(over)).toBe('input_too_large');
    // Not taken for a collaborationMode rejection: the connection keeps its collaboration mode.
    expect(fx.events.filter((e) => e.type === 'capability_downgrade')).toEqual([]);
    const atLimit = await turn('😀'.repeat(CODEX_TURN_INPUT_MAX_CHARS));
    expect(atLimit).toMatchObject({ status: 'completed', usedPlainFallback: false, finalMessage: 'took the long one' });
  });

  it('a turn with an MCP tool call: items include the mcpToolCall; the model receives the output', async () => {
    fx = await fixture([
      { type: 'tool_call', name: 'issue_write', namespace: 'mcp__gitea', arguments: { method: 'add_comment', owner: 'acme', repo: 'widget', index: 42, body: 'Done. <!-- ccweb taskId=t1 -->' }, callId: 'call_c1' },
      { type: 'message', text: 'Posted the comment.' },
    ]);
    const conn = await fx.connect();
    const threadId = await startThread(conn, fx);
    const out = await timed('turn: MCP call + message', () => runTurn(conn, { threadId, params: turnParams(conn, threadId, 'reply please') }));
    expect(out.status).toBe('completed');
    const mcp = out.items.find((i) => i.type === 'mcpToolCall') as any;
    expect(mcp).toMatchObject({ server: 'gitea', tool: 'issue_write', status: 'completed', arguments: { method: 'add_comment', owner: 'acme', repo: 'widget', index: 42 } });
    expect(out.finalMessage).toBe('Posted the comment.');
    const outputs = fx.model.functionCallOutputs();
    expect(outputs.map((o) => o.call_id)).toContain('call_c1');
    // The real gitea-mcp reached the double with the bot's token (the comment is giteabot's): one
    // POST, each tool call preceded by the Go SDK's GET /api/v1/version.
    const comments = fx.gitea.comments('acme', 'widget', 42);
    expect(comments.map((c) => [(c.user as { login: string }).login, c.body])).toEqual([['giteabot', 'Done. <!-- ccweb taskId=t1 -->']]);
    expect(fx.gitea.requests.map((r) => `${r.method} ${r.path} ${r.status}`)).toEqual([
      'GET /api/v1/version 200',
      'POST /api/v1/repos/acme/widget/issues/42/comments 201',
    ]);
    // What the model got back is gitea-mcp's JSON text with the new comment's id.
    const output = outputs.find((o) => o.call_id === 'call_c1');
    expect(JSON.stringify(output)).toContain(`issuecomment-${comments[0]!.id as number}`);
  });

  it('a shell (exec) step runs through Codex and its output returns to the model', async () => {
    fx = await fixture([{ type: 'shell', command: 'echo shell-ok-$((40+2))' }, { type: 'message', text: 'ran it' }]);
    const conn = await fx.connect();
    const threadId = await startThread(conn, fx);
    const out = await timed('turn: shell + message', () => runTurn(conn, { threadId, params: turnParams(conn, threadId, 'run') }));
    expect(out.status).toBe('completed');
    const cmd = out.items.find((i) => i.type === 'commandExecution') as any;
    expect(cmd?.aggregatedOutput).toContain('shell-ok-42');
    expect(JSON.stringify(fx.model.functionCallOutputs())).toContain('shell-ok-42');
    expect(fx.model.shellTool()?.name).toBe('exec_command');
  });

  it('request_user_input is refused by Codex in Default mode (no server request; the model is told)', async () => {
    fx = await fixture([
      {
        type: 'tool_call',
        name: 'request_user_input',
        arguments: { questions: [{ id: 'branch', header: 'Branch', question: 'Which branch?', options: [{ label: 'main', description: 'the main branch' }, { label: 'dev', description: 'the dev branch' }] }] },
      },
      { type: 'message', text: 'Which branch should I use?' },
    ]);
    const conn = await fx.connect();
    const threadId = await startThread(conn, fx);
    const out = await timed('turn: request_user_input attempt', () => runTurn(conn, { threadId, params: turnParams(conn, threadId, 'ask me') }));
    expect(out.status).toBe('completed');
    expect(out.userInputRequested).toEqual([]);
    expect(fx.events.filter((e) => e.type === 'server_request')).toEqual([]);
    expect(JSON.stringify(fx.model.functionCallOutputs())).toMatch(/unavailable in Default mode/);
  });

  it('thread/resume after the app-server is restarted, with the MCP config resent', async () => {
    fx = await fixture([
      { type: 'message', text: 'first' },
      { type: 'tool_call', name: 'issue_write', namespace: 'mcp__gitea', arguments: { method: 'add_comment', owner: 'acme', repo: 'widget', index: 7, body: 'after resume' } },
      { type: 'message', text: 'second' },
    ]);
    const conn1 = await fx.connect();
    const threadId = await startThread(conn1, fx);
    expect((await runTurn(conn1, { threadId, params: turnParams(conn1, threadId, 'one') })).finalMessage).toBe('first');
    await timed('app-server close (stdin EOF)', () => conn1.close());
    const conn2 = await timed('app-server restart', () => fx!.connect());
    const resumed: any = await timed('thread/resume (required MCP)', () =>
      conn2.request('thread/resume', threadResumeParams({ threadId, cwd: fx!.workspace, giteaMcp: giteaMcp(fx!), sandbox: fx!.agentSandbox.forThread(fx!.workspace) })),
    );
    expect(resumed.thread.id).toBe(threadId);
    const out = await runTurn(conn2, { threadId, params: turnParams(conn2, threadId, 'two') });
    expect(out.status).toBe('completed');
    expect(out.items.some((i) => i.type === 'mcpToolCall' && (i as any).status === 'completed')).toBe(true);
    expect(out.finalMessage).toBe('second');
    expect(fx.gitea.comments('acme', 'widget', 7).map((c) => c.body)).toEqual(['after resume']);
    // The resumed thread carries the earlier conversation to the model.
    expect(JSON.stringify(fx.model.responsesBodies().at(-1).input)).toContain('first');
  });

  it('turn/interrupt → turn/completed with status interrupted', async () => {
    fx = await fixture([{ type: 'stall' }]);
    const conn = await fx.connect();
    const threadId = await startThread(conn, fx);
    const t0 = performance.now();
    const out = await runTurn(conn, {
      threadId,
      params: turnParams(conn, threadId, 'stall'),
      onTurnId: (turnId) => {
        void fx!.model.waitForResponsesRequests(1).then(() => conn.request('turn/interrupt', { threadId, turnId }));
      },
    });
    console.log(`[codex timing] turn/interrupt round trip: ${(performance.now() - t0).toFixed(0)} ms`);
    expect(out.status).toBe('interrupted');
    // An unknown / finished turn cannot be interrupted.
    await expect(conn.request('turn/interrupt', { threadId, turnId: out.turnId })).rejects.toMatchObject({ code: -32600 });
  });

  it('app-server killed mid-turn: the turn and pending requests reject with app_server_exited; exit is emitted', async () => {
    fx = await fixture([{ type: 'stall' }]);
    const conn = await fx.connect();
    const threadId = await startThread(conn, fx);
    const exits: CodexConnectionEvent[] = [];
    conn.on('exit', (e) => exits.push(e));
    const turn = runTurn(conn, { threadId, params: turnParams(conn, threadId, 'stall') });
    await fx.model.waitForResponsesRequests(1);
    // A request that stays pending: thread/start waits for an MCP server that never answers initialize.
    const pending = conn.request('thread/start', threadStartParams({ cwd: fx.workspace, giteaMcp: giteaMcp(fx, fx.mcpFaults.hang), sandbox: fx.agentSandbox.forThread(fx.workspace) }));
    await new Promise((r) => setTimeout(r, 300));
    const t0 = performance.now();
    conn.kill('SIGKILL');
    await expect(turn).rejects.toMatchObject({ code: 'app_server_exited' });
    await expect(pending).rejects.toMatchObject({ code: 'app_server_exited' });
    console.log(`[codex timing] SIGKILL → rejections: ${(performance.now() - t0).toFixed(0)} ms`);
    expect(exits).toEqual([{ type: 'exit', code: null, signal: 'SIGKILL', expected: false }]);
    await expect(conn.request('config/read', {})).rejects.toBeInstanceOf(CodexRpcError);
  });

  it('required MCP command missing → thread/start fails with -32603', async () => {
    fx = await fixture();
    const conn = await fx.connect();
    const err = await timed('thread/start, MCP command missing', () =>
      conn
        .request('thread/start', threadStartParams({ cwd: fx!.workspace, giteaMcp: { ...giteaMcp(fx!), command: join(fx!.root, 'no-such-gitea-mcp') }, sandbox: fx!.agentSandbox.forThread(fx!.workspace) }))
        .then(
          () => null,
          (e: unknown) => e,
        ),
    );
    expect(err).toBeInstanceOf(CodexRpcError);
    expect((err as CodexRpcError).code).toBe(-32603);
    expect((err as CodexRpcError).message).toMatch(/required MCP servers failed to initialize/);
    // The server keeps working.
    expect(typeof (await startThread(conn, fx))).toBe('string');
  });

  it('required MCP server exits at once → thread/start fails with -32603', async () => {
    fx = await fixture();
    const conn = await fx.connect();
    const err = await timed('thread/start, MCP exits at once', () =>
      startThread(conn, fx!, fx!.mcpFaults.exit).then(
        () => null,
        (e: unknown) => e,
      ),
    );
    expect((err as CodexRpcError).code).toBe(-32603);
    expect((err as CodexRpcError).message).toMatch(/gitea/);
  });

  it('the token appears nowhere under CODEX_HOME, nor in app-server stderr/events, after a run with MCP calls', async () => {
    fx = await fixture([
      { type: 'tool_call', name: 'issue_write', namespace: 'mcp__gitea', arguments: { method: 'add_comment', owner: 'acme', repo: 'widget', index: 1, body: 'x' } },
      { type: 'message', text: 'ok' },
    ]);
    const conn = await fx.connect({ env: { ...process.env, CCWEB_GITEA_TOKEN: TOKEN, GITEA_TOKEN: TOKEN } });
    const threadId = await startThread(conn, fx);
    expect((await runTurn(conn, { threadId, params: turnParams(conn, threadId, 'go') })).status).toBe('completed');
    await conn.close();
    const hits = await timed('token scan of CODEX_HOME', async () => filesContaining(fx!.codexHome, TOKEN));
    expect(hits).toEqual([]);
    expect(JSON.stringify(fx.events)).not.toContain(TOKEN);
    expect(filesContaining(fx.root, TOKEN)).toEqual([]);
  });
});

describe('codex connection against a stand-in app-server', () => {
  const stub = nodeScript(join(repoRoot, 'test', 'support', 'codex-stub-app-server.ts'));

  async function startStub(env: Record<string, string>) {
    const { mkdtempSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const dir = mkdtempSync(join(tmpdir(), 'ccweb-stub-'));
    const log = join(dir, 'stub.jsonl');
    const events: CodexConnectionEvent[] = [];
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const conn = new CodexAppServerConnection({
      command: stub.command,
      args: stub.args,
      env: { ...process.env, CCWEB_GITEA_TOKEN: TOKEN, CCWEB_WEBHOOK_SECRET: 's', CCWEB_ADMIN_TOKEN: 'a', GITEA_ACCESS_TOKEN: TOKEN, GITEA_TOKEN: TOKEN },
      extraEnv: { STUB_APP_SERVER_LOG: log, ...env },
    });
    conn.onEvent((e) => events.push(e));
    await conn.start();
    return { conn, events, log };
  }

  it('rejected probes and a rejected collaborationMode → exactly one capability_downgrade each; the server keeps working', async () => {
    const { conn, events, log } = await timed('stub start-up chain', () => startStub({ STUB_REJECT_PROBES: '1', STUB_REJECT_COLLAB_TURN: '1' }));
    try {
      const downgrades = () => events.filter((e) => e.type === 'capability_downgrade').map((e: any) => e.capability);
      expect(downgrades()).toEqual(['goals', 'collaborationMode/list']);
      expect(conn.model).toBe('stub-model');
      const threadId = ((await conn.request('thread/start', { cwd: '/tmp' })) as any).thread.id;
      // collaborationMode/list failed → runTurn goes straight to the plain turn.
      const base = { threadId, text: 'hi', model: conn.model!, reasoningEffort: 'low' };
      const out1 = await runTurn(conn, { threadId, params: turnStartParams(base), plainParams: plainTurnStartParams(base) });
      expect(out1).toMatchObject({ status: 'completed', usedPlainFallback: true, finalMessage: 'stub reply (collab=no, model=stub-model)' });
      expect(out1.items.map((i) => i.type)).toEqual(['agentMessage']); // arrived before the turn/start response
      // A fresh connection whose probes succeed, but turn/start rejects collaborationMode → one downgrade, plain retry.
      const ok = await startStub({ STUB_REJECT_COLLAB_TURN: '1' });
      try {
        expect(ok.events.filter((e) => e.type === 'capability_downgrade')).toEqual([]);
        for (let i = 0; i < 2; i++) {
          const out = await runTurn(ok.conn, { threadId, params: turnStartParams(base), plainParams: plainTurnStartParams(base) });
          expect(out).toMatchObject({ status: 'completed', usedPlainFallback: true });
        }
        expect(ok.events.filter((e) => e.type === 'capability_downgrade').map((e: any) => e.capability)).toEqual(['collaborationMode']);
      } finally {
        await ok.conn.close();
      }
      expect(downgrades()).toEqual(['goals', 'collaborationMode/list']);
      // Secrets were stripped from the app-server's environment.
      const envLine = readJsonLines(log).find((l) => l.stub === 'env');
      expect(envLine.sensitiveEnvNames).toEqual(expect.not.arrayContaining(['CCWEB_GITEA_TOKEN', 'CCWEB_WEBHOOK_SECRET', 'CCWEB_ADMIN_TOKEN', 'GITEA_ACCESS_TOKEN', 'GITEA_TOKEN']));
      // No `jsonrpc` field on the wire.
      expect(readJsonLines(log).filter((l) => !l.stub).every((l) => !('jsonrpc' in l))).toBe(true);
    } finally {
      await conn.close();
    }
  });

  it('unknown notifications are surfaced, requestUserInput is answered and surfaced, unknown server requests get -32601', async () => {
    const a = await startStub({ STUB_UNKNOWN_NOTIFICATION: '1', STUB_SERVER_REQUEST: 'item/tool/requestUserInput' });
    const b = await startStub({ STUB_SERVER_REQUEST: 'weird/newRequest' });
    const c = await startStub({ STUB_SERVER_REQUEST: 'item/commandExecution/requestApproval' });
    try {
      await new Promise((r) => setTimeout(r, 200));
      expect(a.events.filter((e) => e.type === 'unknown_notification').map((e: any) => e.notification.method)).toEqual(['stub/somethingNew']);
      const ui = a.events.find((e) => e.type === 'user_input_requested') as any;
      expect(ui).toMatchObject({ requestId: 'srv-1', threadId: 'thr-stub', turnId: 'turn-stub', itemId: 'item-1' });
      expect(ui.questions[0].question).toBe('Which branch?');
      expect(readJsonLines(a.log).find((l) => l.id === 'srv-1')).toEqual({ id: 'srv-1', result: { answers: {} } });
      expect(readJsonLines(b.log).find((l) => l.id === 'srv-1')).toMatchObject({ id: 'srv-1', error: { code: -32601 } });
      expect(readJsonLines(c.log).find((l) => l.id === 'srv-1')).toEqual({ id: 'srv-1', result: { decision: 'decline' } });
      // Still alive.
      expect(((await a.conn.request('thread/start', {})) as any).thread.id).toBe('thr-stub');
    } finally {
      await Promise.all([a.conn.close(), b.conn.close(), c.conn.close()]);
    }
  });
});
