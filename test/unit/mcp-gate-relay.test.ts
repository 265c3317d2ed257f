// The gate's transport: the newline-delimited JSON-RPC framing (no MCP SDK),
// and the relay's answers to what Codex may send, malformed input first. The relay runs in process
// with a fake child (`callChild`), so what is checked is what it forwards and answers; the policy
// itself is test/unit/mcp-gate-policy.test.ts's, and the real gitea-mcp's the integration test's.
// The child side (child-peer.ts) runs against small Node scripts standing in for a child that
// misbehaves, which the real binary does not.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ChildPeer, CHILD_LINE_MAX_BYTES } from '../../src/mcp-gate/child-peer.js';
import { writeGateTask } from '../../src/mcp-gate/gate-files.js';
import type { McpTool } from '../../src/mcp-gate/gate-policy.js';
import { CODEX_LINE_MAX_BYTES, createRelay } from '../../src/mcp-gate/gate-relay.js';
import { classify, idFromHead, LineSplitter, type Frame } from '../../src/mcp-gate/jsonrpc-lines.js';

const recorded = JSON.parse(readFileSync(new URL('../fixtures/gitea-mcp/tools-list-a5dd03c7f0d8.json', import.meta.url), 'utf8')) as { tools: McpTool[] };
const scope = { owner: 'acme', repo: 'widget', number: 7 };
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('the framing: one JSON-RPC message per line', () => {
  it('cuts lines across chunks, keeps a character split between chunks, drops CR and blank lines', () => {
    const s = new LineSplitter(1024);
    const bytes = Buffer.from('{"a":"é"}\r\n\n  \n{"b":1}\n{"c"');
    const cut = bytes.indexOf(0xa9); // the second byte of é
    const frames = [...s.push(bytes.subarray(0, cut)), ...s.push(bytes.subarray(cut))];
    expect(frames).toEqual([
      { kind: 'line', text: '{"a":"é"}' },
      { kind: 'line', text: '{"b":1}' },
    ]);
    expect(s.push(Buffer.from(':2}\n'))).toEqual([{ kind: 'line', text: '{"c":2}' }]);
  });

  it('a line past the bound is not kept: its head comes out as oversized, the next line is read whole', () => {
    const s = new LineSplitter(64);
    const long = `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"x":"${'y'.repeat(200)}"}}`;
    const frames = [...s.push(Buffer.from(long.slice(0, 50))), ...s.push(Buffer.from(`${long.slice(50)}\n{"ok":1}\n`))];
    expect(frames).toHaveLength(2);
    expect(frames[0]).toMatchObject({ kind: 'oversized', bytes: long.length });
    expect(idFromHead((frames[0] as { head: string }).head)).toBe(42);
    expect(frames[1]).toEqual({ kind: 'line', text: '{"ok":1}' });
  });

  it('sorts a line into request, notification, response or invalid, keeping ids', () => {
    expect(classify('{"jsonrpc":"2.0","id":"a","method":"tools/list"}')).toEqual({ kind: 'request', id: 'a', method: 'tools/list', params: undefined });
    expect(classify('{"jsonrpc":"2.0","method":"notifications/initialized"}')).toMatchObject({ kind: 'notification' });
    expect(classify('{"jsonrpc":"2.0","id":3,"result":{}}')).toEqual({ kind: 'response', id: 3, result: {} });
    expect(classify('not json')).toMatchObject({ kind: 'invalid', id: null, code: -32700 });
    expect(classify('[{"jsonrpc":"2.0","id":1,"method":"tools/call"}]')).toMatchObject({ kind: 'invalid', id: null, code: -32600 });
    expect(classify('{"id":5,"method":"tools/call"}')).toMatchObject({ kind: 'invalid', id: 5, code: -32600 });
    for (const id of ['null', '1.5', '{}', '[1]', 'true']) {
      expect(classify(`{"jsonrpc":"2.0","id":${id},"method":"tools/call"}`)).toMatchObject({ kind: 'invalid', id: null });
    }
    expect(classify('{"jsonrpc":"2.0","id":6,"method":"tools/call","params":"x"}')).toMatchObject({ kind: 'invalid', id: 6 });
    expect(classify('{"jsonrpc":"2.0","id":6,"method":7}')).toMatchObject({ kind: 'invalid', id: 6 });
    expect(classify('{"jsonrpc":"2.0","id":6,"result":1,"error":{"code":1,"message":"x"}}')).toMatchObject({ kind: 'invalid', id: 6 });
  });

  it('reads an id from the head of a long line only where it stands first', () => {
    expect(idFromHead('{"jsonrpc":"2.0","id":"call-1","method":"tools/call","params":{"arguments":{"body":"…')).toBe('call-1');
    expect(idFromHead('{"id":9,"jsonrpc":"2.0"')).toBe(9);
    expect(idFromHead('{"jsonrpc":"2.0","method":"tools/call","params":{"id":9')).toBeNull();
    expect(idFromHead('garbage')).toBeNull();
  });
});

function relayWith(child: (name: string, args: Record<string, unknown>) => Promise<unknown> = async () => ({ content: [{ type: 'text', text: 'ok' }] })) {
  const stateDir = mkdtempSync(join(tmpdir(), 'ccweb-relay-'));
  dirs.push(stateDir);
  writeGateTask(stateDir, { taskId: 'gitea-task-1', extra: [] });
  const sent: any[] = [];
  const forwarded: { name: string; args: Record<string, unknown> }[] = [];
  const relay = createRelay({
    scope,
    stateDir,
    childTools: recorded.tools,
    childVersion: '0.0.0-test',
    callChild: (name, args) => {
      forwarded.push({ name, args });
      return child(name, args);
    },
    send: (line) => sent.push(JSON.parse(line)),
    callIdPrefix: 't',
  });
  const line = (m: unknown): Frame => ({ kind: 'line', text: typeof m === 'string' ? m : JSON.stringify(m) });
  const calls = () => {
    try {
      return readFileSync(join(stateDir, 'calls.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    } catch {
      return [];
    }
  };
  return { relay, sent, forwarded, line, calls };
}

const call = (id: unknown, name: unknown, args?: unknown, extra: Record<string, unknown> = {}) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, ...(args === undefined ? {} : { arguments: args }), ...extra } });

describe('the relay: what Codex may send', () => {
  it('answers initialize with the version asked if known (else the newest) and the child\'s version; tools/list is the narrowed list', () => {
    const { relay, sent, line } = relayWith();
    relay.receive(line({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'codex', version: '1' } } }));
    relay.receive(line({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '1999-01-01' } }));
    relay.receive(line({ jsonrpc: '2.0', method: 'notifications/initialized' }));
    relay.receive(line({ jsonrpc: '2.0', id: 2, method: 'tools/list', params: { _meta: { progressToken: 0 } } }));
    relay.receive(line({ jsonrpc: '2.0', id: 3, method: 'ping' }));
    expect(sent[0]).toEqual({ jsonrpc: '2.0', id: 0, result: { protocolVersion: '2025-06-18', capabilities: { tools: {} }, serverInfo: { name: 'ccweb-gitea-gate', version: '0.0.0-test' } } });
    expect(sent[1].result.protocolVersion).toBe('2025-11-25');
    const names = sent[2].result.tools.map((t: McpTool) => t.name);
    expect(names).toContain('get_file_contents');
    expect(names).not.toContain('delete_file');
    expect(names).not.toContain('pull_request_write');
    expect(sent[3]).toEqual({ jsonrpc: '2.0', id: 3, result: {} });
    expect(sent).toHaveLength(4); // the notification is not answered
  });

  it('an unparsable line, a batch, an invalid id, an oversized line: an error each, nothing forwarded, nothing recorded', async () => {
    const { relay, sent, forwarded, line, calls } = relayWith();
    relay.receive(line('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"issue_write"'));
    relay.receive(line([call(2, 'issue_write', { method: 'add_comment', owner: 'acme', repo: 'widget', index: 7, body: 'x' })]));
    relay.receive(line({ ...call(null, 'get_file_contents', { owner: 'acme', repo: 'widget', filePath: 'a' }) }));
    relay.receive(line({ ...call(4, 'get_file_contents', { owner: 'acme', repo: 'widget', filePath: 'a' }), jsonrpc: '1.0' }));
    relay.receive({ kind: 'oversized', head: '{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{', bytes: CODEX_LINE_MAX_BYTES + 1 });
    await relay.settled();
    expect(sent.map((m) => [m.id, m.error?.code])).toEqual([
      [null, -32700],
      [null, -32600],
      [null, -32600],
      [4, -32600],
      [5, -32600],
    ]);
    expect(forwarded).toEqual([]);
    expect(calls()).toEqual([]);
  });

  it('an unknown method is "Method not found" with its id; an unknown notification and a response get nothing; neither reaches the child', async () => {
    const { relay, sent, forwarded, line } = relayWith();
    relay.receive(line({ jsonrpc: '2.0', id: 'r1', method: 'resources/list' }));
    relay.receive(line({ jsonrpc: '2.0', id: 'r2', method: 'tools/call_raw', params: { name: 'issue_write' } }));
    relay.receive(line({ jsonrpc: '2.0', method: 'notifications/roots/list_changed' }));
    relay.receive(line({ jsonrpc: '2.0', id: 9, result: {} }));
    await relay.settled();
    expect(sent).toEqual([
      { jsonrpc: '2.0', id: 'r1', error: { code: -32601, message: 'Method not found: resources/list' } },
      { jsonrpc: '2.0', id: 'r2', error: { code: -32601, message: 'Method not found: tools/call_raw' } },
    ]);
    expect(forwarded).toEqual([]);
  });

  it('tools/call with params of the wrong shape is "Invalid params", not forwarded', async () => {
    const { relay, sent, forwarded, line } = relayWith();
    relay.receive(line(call(1, 42, {})));
    relay.receive(line(call(2, 'get_file_contents', ['acme', 'widget'])));
    relay.receive(line({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: ['get_file_contents'] }));
    await relay.settled();
    expect(sent.map((m) => [m.id, m.error?.code])).toEqual([
      [1, -32602],
      [2, -32602],
      [3, -32602],
    ]);
    expect(forwarded).toEqual([]);
  });

  it('a refused call is a tool error naming the reason, recorded as refused; the child never sees it', async () => {
    const { relay, sent, forwarded, line, calls } = relayWith();
    relay.receive(line(call(1, 'delete_file', { owner: 'acme', repo: 'widget', filePath: 'README.md' })));
    relay.receive(line(call(2, 'get_file_contents', { owner: 'acme', repo: 'secret', filePath: 'README.md' })));
    await relay.settled();
    expect(sent[0].id).toBe(1);
    expect(sent[0].result.isError).toBe(true);
    expect(sent[0].result.content[0].text).toMatch(/^ccweb-gitea refused delete_file: /);
    expect(sent[1].result.content[0].text).toMatch(/^ccweb-gitea refused get_file_contents: /);
    expect(forwarded).toEqual([]);
    expect(calls().map((c) => [c.tool, c.outcome])).toEqual([
      ['delete_file', 'refused'],
      ['get_file_contents', 'refused'],
    ]);
  });

  it('an allowed call is rebuilt for the child (the task\'s spelling of the repository, no _meta) and its answer passed back; started and forwarded are recorded', async () => {
    const { relay, sent, forwarded, line, calls } = relayWith(async () => ({ content: [{ type: 'text', text: 'file' }], structuredContent: { a: 1 } }));
    relay.receive(line(call(7, 'get_file_contents', { owner: 'ACME', repo: 'Widget', filePath: 'README.md' }, { _meta: { callId: 'c1', progressToken: 3 } })));
    await relay.settled();
    expect(forwarded).toEqual([{ name: 'get_file_contents', args: { owner: 'acme', repo: 'widget', filePath: 'README.md' } }]);
    expect(sent).toEqual([{ jsonrpc: '2.0', id: 7, result: { content: [{ type: 'text', text: 'file' }], structuredContent: { a: 1 } } }]);
    expect(calls().map((c) => [c.outcome, c.callId])).toEqual([
      ['started', 't-1'],
      ['forwarded', 't-1'],
    ]);
  });

  it('arguments null or absent are none: a tool without parameters is forwarded with none', async () => {
    const { relay, sent, forwarded, line } = relayWith();
    relay.receive(line(call(1, 'get_gitea_mcp_server_version', null)));
    relay.receive(line(call(2, 'get_gitea_mcp_server_version')));
    await relay.settled();
    expect(forwarded).toEqual([
      { name: 'get_gitea_mcp_server_version', args: {} },
      { name: 'get_gitea_mcp_server_version', args: {} },
    ]);
    expect(sent.map((m) => [m.id, m.result?.isError ?? false])).toEqual([
      [1, false],
      [2, false],
    ]);
  });

  it('a child that fails or answers something that is not a tool result: a tool error, recorded as failed', async () => {
    const answers: (() => Promise<unknown>)[] = [async () => ({ content: 'not a list' }), async () => 'text', async () => Promise.reject(new Error('MCP error -32001: Request timed out'))];
    const { relay, sent, line, calls } = relayWith(() => answers.shift()!());
    for (const id of [1, 2, 3]) relay.receive(line(call(id, 'list_branches', { owner: 'acme', repo: 'widget' })));
    await relay.settled();
    expect(sent.map((m) => [m.id, m.result.isError])).toEqual([
      [1, true],
      [2, true],
      [3, true],
    ]);
    expect(sent[2].result.content[0].text).toBe('gitea-mcp failed: MCP error -32001: Request timed out');
    expect(calls().filter((c) => c.outcome === 'failed')).toHaveLength(3);
  });

  it('a second request under an id still running is refused; a cancelled call gets no answer (it is still recorded)', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const { relay, sent, line, calls } = relayWith(async () => {
      await gate;
      return { content: [] };
    });
    relay.receive(line(call(1, 'list_branches', { owner: 'acme', repo: 'widget' })));
    relay.receive(line(call(1, 'list_branches', { owner: 'acme', repo: 'widget' })));
    relay.receive(line(call(2, 'list_branches', { owner: 'acme', repo: 'widget' })));
    relay.receive(line({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 2, reason: 'user' } }));
    release();
    await relay.settled();
    expect(sent.map((m) => [m.id, m.error?.code ?? 'result'])).toEqual([
      [1, -32600],
      [1, 'result'],
    ]);
    expect(calls().filter((c) => c.outcome === 'forwarded')).toHaveLength(2);
  });
});

describe('the child side: a gitea-mcp that misbehaves', () => {
  const node = (script: string) => new ChildPeer(process.execPath, ['-e', script], { PATH: process.env.PATH ?? '' });
  // Answers every request by id after reading it (a minimal server).
  const echoServer = (answer: string) => `
    const rl = require('node:readline').createInterface({ input: process.stdin });
    rl.on('line', (l) => { const m = JSON.parse(l); if (m.id !== undefined) { ${answer} } });`;

  it('an answer longer than the bound fails that call only, and the child answers the next one', async () => {
    const peer = node(
      echoServer(`
      if (m.method === 'big') process.stdout.write(JSON.stringify({ jsonrpc: '2.0', id: m.id, result: { pad: 'x'.repeat(${CHILD_LINE_MAX_BYTES}) } }) + '\\n');
      else process.stdout.write(JSON.stringify({ jsonrpc: '2.0', id: m.id, result: { ok: m.method } }) + '\\n');`),
    );
    try {
      await expect(peer.request('big', {})).rejects.toThrow(/larger than/);
      await expect(peer.request('small', {})).resolves.toEqual({ ok: 'small' });
    } finally {
      await peer.close();
    }
  });

  it('a child error is worded as the SDK worded it; a child that exits fails what is pending; its requests are answered (ping) or refused', async () => {
    const peer = node(`
      const rl = require('node:readline').createInterface({ input: process.stdin });
      const out = (m) => process.stdout.write(JSON.stringify({ jsonrpc: '2.0', ...m }) + '\\n');
      let asking = null;
      const seen = [];
      rl.on('line', (l) => {
        const m = JSON.parse(l);
        if (asking !== null && m.method === undefined) {
          seen.push(m);
          if (seen.length === 2) { out({ id: asking, result: { seen } }); asking = null; }
        } else if (m.method === 'err') out({ id: m.id, error: { code: -32602, message: 'unknown tool' } });
        else if (m.method === 'ask') { asking = m.id; out({ id: 'p', method: 'ping' }); out({ id: 's', method: 'sampling/createMessage', params: {} }); }
        else if (m.method === 'die') process.exit(3);
      });`);
    await expect(peer.request('err', {})).rejects.toThrow('MCP error -32602: unknown tool');
    const asked = (await peer.request('ask', {})) as { seen: any[] };
    expect(asked.seen).toEqual([
      { jsonrpc: '2.0', id: 'p', result: {} },
      { jsonrpc: '2.0', id: 's', error: { code: -32601, message: 'Method not found' } },
    ]);
    await expect(peer.request('die', {})).rejects.toThrow('MCP error -32000: Connection closed');
    await peer.closed;
    await expect(peer.request('after', {})).rejects.toThrow('Connection closed');
  });
});
