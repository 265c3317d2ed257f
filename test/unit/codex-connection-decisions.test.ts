// The app-server connection's decisions without a process: what a line is (jsonrpc-messages.ts),
// how server requests are answered (server-requests.ts), how notifications reach their thread and
// turn (thread-router.ts). The process side is covered by test/integration/codex-connection.test.ts.
import { describe, expect, it } from 'vitest';
import { CodexRpcError, type CodexNotification } from '../../src/codex/jsonrpc-types.js';
import { PendingRequests } from '../../src/codex/pending-requests.js';
import { collaborationModesOf, configModelOf, effectiveModel, parseLine, routingKeys } from '../../src/codex/jsonrpc-messages.js';
import { answerServerRequest, dynamicToolFailure } from '../../src/codex/server-requests.js';
import { MAX_BUFFERED_THREADS, ThreadRouter, turnFilter } from '../../src/codex/thread-router.js';

let seq = 0;
const note = (threadId: string | null, turnId: string | null = null, method = 'item/completed'): CodexNotification => ({ method, params: {}, threadId, turnId, seq: ++seq });

describe('parseLine', () => {
  it('tells requests, notifications and responses apart by method and id', () => {
    expect(parseLine('{"id":3,"method":"item/tool/call","params":{"a":1}}')).toEqual({ kind: 'server_request', id: 3, method: 'item/tool/call', params: { a: 1 } });
    expect(parseLine('{"method":"turn/started","params":{},"emittedAtMs":5}')).toEqual({ kind: 'notification', method: 'turn/started', params: {}, emittedAtMs: 5 });
    expect(parseLine('{"method":"turn/started","id":null}')).toEqual({ kind: 'notification', method: 'turn/started', params: undefined });
    expect(parseLine('{"id":"a","result":{"ok":true}}')).toEqual({ kind: 'response', id: 'a', result: { ok: true } });
    expect(parseLine('{"id":1,"result":null}')).toEqual({ kind: 'response', id: 1, result: null });
    expect(parseLine('{"id":1,"error":{"code":-32600,"message":"bad","data":7}}')).toEqual({ kind: 'error_response', id: 1, code: -32600, message: 'bad', data: 7 });
    expect(parseLine('{"id":1,"error":{}}')).toEqual({ kind: 'error_response', id: 1, code: -32603, message: 'error', data: undefined });
  });
  it('reports what it cannot read, and skips blank lines', () => {
    expect(parseLine('   ')).toEqual({ kind: 'blank' });
    expect(parseLine('{oops')).toMatchObject({ kind: 'protocol_error' });
    expect(parseLine('42')).toEqual({ kind: 'protocol_error', error: 'not an object' });
    expect(parseLine('null')).toEqual({ kind: 'protocol_error', error: 'not an object' });
    expect(parseLine('{"id":1}')).toEqual({ kind: 'protocol_error', error: 'unrecognised message' });
  });
  it('finds thread and turn ids in their three spellings', () => {
    expect(routingKeys({ threadId: 't', turnId: 'u' })).toEqual({ threadId: 't', turnId: 'u' });
    expect(routingKeys({ thread: { id: 't' }, turn: { id: 'u' } })).toEqual({ threadId: 't', turnId: 'u' });
    expect(routingKeys({ conversationId: 'c' })).toEqual({ threadId: 'c', turnId: null });
    expect(routingKeys({ threadId: 5 })).toEqual({ threadId: null, turnId: null });
    expect(routingKeys(null)).toEqual({ threadId: null, turnId: null });
  });
});

describe('start-up readings', () => {
  it('picks the model: option, then a non-empty CCWEB_CODEX_MODEL, then config/read', () => {
    expect(effectiveModel('opt', 'env', 'cfg')).toBe('opt');
    expect(effectiveModel(undefined, 'env', 'cfg')).toBe('env');
    expect(effectiveModel(undefined, '', 'cfg')).toBe('cfg');
    expect(effectiveModel(undefined, undefined, null)).toBeNull();
    expect(configModelOf({ config: { model: 'gpt-x' } })).toBe('gpt-x');
    expect(configModelOf({ config: { model: '' } })).toBeNull();
    expect(configModelOf(undefined)).toBeNull();
  });
  it('reads the collaboration modes and whether `default` is one', () => {
    expect(collaborationModesOf({ data: [{ name: 'Plan', mode: 'plan' }, { name: 'Default', mode: 'default' }] })).toEqual({
      modes: [
        { name: 'Plan', mode: 'plan' },
        { name: 'Default', mode: 'default' },
      ],
      hasDefault: true,
    });
    expect(collaborationModesOf({ data: [{ mode: 'plan' }] })).toEqual({ modes: [{ name: '', mode: 'plan' }], hasDefault: false });
    expect(collaborationModesOf({})).toEqual({ modes: [], hasDefault: false });
  });
});

describe('server requests', () => {
  it('declines every approval and elicitation', () => {
    expect(answerServerRequest('item/commandExecution/requestApproval', {})).toEqual({ kind: 'declined', result: { decision: 'decline' } });
    expect(answerServerRequest('item/fileChange/requestApproval', {})).toEqual({ kind: 'declined', result: { decision: 'decline' } });
    expect(answerServerRequest('execCommandApproval', {})).toMatchObject({ kind: 'declined', result: { decision: { denied: {} } } });
    expect(answerServerRequest('applyPatchApproval', {})).toMatchObject({ kind: 'declined', result: { decision: { denied: {} } } });
    expect(answerServerRequest('mcpServer/elicitation/request', {})).toEqual({ kind: 'declined', result: { action: 'decline', content: null, _meta: null } });
    expect(answerServerRequest('item/permissions/requestApproval', {})).toEqual({ kind: 'declined', result: { permissions: {}, scope: 'turn' } });
  });
  it('answers a question for the user empty, reporting where it came from', () => {
    expect(answerServerRequest('item/tool/requestUserInput', { threadId: 't', turnId: 'u', itemId: 'i', questions: [{ q: 1 }] })).toEqual({
      kind: 'user_input',
      threadId: 't',
      turnId: 'u',
      itemId: 'i',
      questions: [{ q: 1 }],
      result: { answers: {} },
    });
    expect(answerServerRequest('item/tool/requestUserInput', { questions: 'x' })).toMatchObject({ itemId: null, questions: [] });
  });
  it('runs dynamic tools, refuses anything else', () => {
    expect(answerServerRequest('item/tool/call', {})).toEqual({ kind: 'dynamic_tool' });
    expect(answerServerRequest('account/login', {})).toEqual({ kind: 'rejected', code: -32601, message: 'method not supported by ccweb-gitea: account/login' });
    expect(dynamicToolFailure('x'.repeat(400)).contentItems[0]!.text).toHaveLength('ccweb-gitea: the tool failed: '.length + 300);
  });
});

describe('thread router', () => {
  it('delivers to the thread\'s subscribers, buffers for a thread nobody listens to and replays it in order', () => {
    const router = new ThreadRouter(10);
    const a: number[] = [];
    const off = router.subscribe('A', (n) => a.push(n.seq));
    const n1 = note('A');
    router.route(n1);
    const early = [note('B'), note('B')];
    for (const n of early) router.route(n);
    router.route(note(null));
    expect(a).toEqual([n1.seq]);
    const b: number[] = [];
    router.subscribe('B', (n) => b.push(n.seq));
    expect(b).toEqual(early.map((n) => n.seq));
    expect(router.bufferedThreads()).toEqual([]);
    off();
    router.route(note('A'));
    expect(a).toHaveLength(1);
    expect(router.bufferedThreads()).toEqual(['A']);
  });
  it('bounds buffers: the newest notifications per thread, the newest threads', () => {
    const router = new ThreadRouter(3);
    const ns = [1, 2, 3, 4, 5].map(() => note('T'));
    for (const n of ns) router.route(n);
    const got: number[] = [];
    router.subscribe('T', (n) => got.push(n.seq));
    expect(got).toEqual(ns.slice(2).map((n) => n.seq));
    for (let i = 0; i <= MAX_BUFFERED_THREADS; i++) router.route(note(`t${i}`));
    expect(router.bufferedThreads()).toHaveLength(MAX_BUFFERED_THREADS);
    expect(router.bufferedThreads()[0]).toBe('t1');
  });
  it('a throwing subscriber does not stop the others', () => {
    const router = new ThreadRouter(10);
    const got: string[] = [];
    router.subscribe('A', () => {
      throw new Error('x');
    });
    router.subscribe('A', () => got.push('second'));
    router.route(note('A'));
    expect(got).toEqual(['second']);
  });
  it('holds a turn\'s notifications until its id is known, then delivers its own and thread-level ones', () => {
    const got: string[] = [];
    const f = turnFilter(null, (n) => got.push(`${n.turnId}`));
    f.handle(note('A', 'u1'));
    f.handle(note('A', 'other'));
    f.handle(note('A', null));
    expect(got).toEqual([]);
    f.setTurnId('u1');
    expect(got).toEqual(['u1', 'null']);
    f.handle(note('A', 'u1'));
    f.handle(note('A', 'u2'));
    expect(got).toEqual(['u1', 'null', 'u1']);
    const known: string[] = [];
    const g = turnFilter('k', (n) => known.push(`${n.turnId}`));
    g.handle(note('A', 'k'));
    expect(known).toEqual(['k']);
  });
});

describe('pending requests', () => {
  it('settles a request by its response, once; an unknown or settled id is reported', async () => {
    const pending = new PendingRequests();
    const ok = pending.add(1, 'm', 10_000);
    const bad = pending.add(2, 'thread/start', 0);
    expect(pending.settle(1, { ok: true, result: { x: 1 } })).toBe(true);
    expect(pending.settle(1, { ok: true, result: null })).toBe(false);
    expect(pending.settle(2, { ok: false, code: -32600, message: 'nope', data: 3 })).toBe(true);
    await expect(ok).resolves.toEqual({ x: 1 });
    await expect(bad).rejects.toMatchObject({ name: 'CodexRpcError', code: -32600, method: 'thread/start', data: 3, message: 'thread/start: nope' });
    expect(pending.settle(99, { ok: true, result: null })).toBe(false);
    expect(pending.size).toBe(0);
  });
  it('times a request out, and rejects all that wait when the process goes', async () => {
    const pending = new PendingRequests();
    const slow = pending.add(1, 'm', 5);
    await expect(slow).rejects.toMatchObject({ code: 'request_timeout' });
    expect(pending.settle(1, { ok: true, result: null })).toBe(false);
    // No timeout at all (Node would turn an infinite delay into 1 ms).
    const patient = pending.add(9, 'p', Number.POSITIVE_INFINITY);
    await new Promise((r) => setTimeout(r, 20));
    expect(pending.settle(9, { ok: true, result: 'late' })).toBe(true);
    await expect(patient).resolves.toBe('late');
    const a = pending.add(2, 'a', Number.POSITIVE_INFINITY);
    const b = pending.add(3, 'b', 10_000);
    pending.rejectAll((method) => new CodexRpcError(method, 'app_server_exited', 'gone'));
    await expect(a).rejects.toMatchObject({ code: 'app_server_exited', method: 'a' });
    await expect(b).rejects.toMatchObject({ code: 'app_server_exited', method: 'b' });
    expect(pending.size).toBe(0);
  });
});
