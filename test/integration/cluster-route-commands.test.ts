// The operators' task commands run on the node owning the task's repository
// (docs/DESIGN-nodes-at-once.md step 5): src/cluster/route-commands.ts, mounted by the control API's
// option `routeTaskCommand`. Two nodes here are two control APIs on 127.0.0.1 sharing one store (as
// nodes share the database); node-b hosts the task's actor, node-a's runtime only records what it
// would be sent. The scope is a table the test sets.
import { createServer, request, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Context, Next } from 'koa';
import { createApp } from '../../src/http/create-app.js';
import { clientAddress, wasForwarded } from '../../src/http/forwarded-client.js';
import { createControlRouter } from '../../src/api/control-router.js';
import type { TaskRecord } from '../../src/domain/records.js';
import type { ActorRuntime } from '../../src/runtime/actor-runtime.js';
import type { Store } from '../../src/store/types.js';
import { taskKind } from '../../src/tasks/task-actor.js';
import { routeTaskCommands } from '../../src/cluster/route-commands.js';
import type { OwnerTarget } from '../../src/cluster/repository-scope.js';
import { ADMIN_TOKEN, createQueuedTask, driveTask } from '../support/api-harness.js';
import { createTestRuntime } from '../support/test-runtime.js';

const KEY = 'd'.repeat(64);
const CLIENT = '127.0.0.2';
const PREFIX = '/api/gitea-workflow';

interface Node {
  name: string;
  url: string;
  server: Server;
  /** Events this node's runtime was asked to send. */
  sends: string[];
  aborts: string[];
  seen: Array<{ url: string; forwarded: boolean; client: string | undefined }>;
  asked: string[];
  owners: Map<string, OwnerTarget>;
}

let shared: Awaited<ReturnType<typeof createTestRuntime>>;
const servers: Server[] = [];
beforeEach(async () => {
  shared = await createTestRuntime([taskKind()]);
});
afterEach(async () => {
  for (const s of servers.splice(0)) await new Promise<void>((r) => (s.closeAllConnections(), s.close(() => r())));
  await shared.close();
});

/** The runtime, with every `send` noted (bound, so its private state is its own). */
function noting(runtime: ActorRuntime, sends: string[]): ActorRuntime {
  return new Proxy(runtime, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target) as unknown;
      if (prop === 'send') return (id: string, event: { type: string }, ...rest: unknown[]) => (sends.push(`${id} ${event.type}`), (target.send as (...a: unknown[]) => unknown)(id, event, ...rest));
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

async function startNode(
  name: string,
  options: { routeStore?: Pick<Store, 'get' | 'transact'>; timeoutMs?: number; middleware?: Array<(ctx: Context, next: Next) => Promise<void>> } = {},
): Promise<Node> {
  const node = { name, sends: [], aborts: [], seen: [], asked: [], owners: new Map() } as unknown as Node;
  const router = createControlRouter({
    store: shared.store,
    runtime: noting(shared.runtime, node.sends),
    adminToken: ADMIN_TOKEN,
    onAbortRequested: (taskId) => node.aborts.push(taskId),
    routeTaskCommand: routeTaskCommands({
      nodeId: name,
      key: () => KEY,
      store: options.routeStore ?? shared.store,
      scope: {
        routeOf: async (repoKey) => {
          node.asked.push(repoKey);
          return node.owners.get(repoKey) ?? { self: true, nodeId: name, url: null };
        },
      },
      ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
    }),
  });
  const app = createApp({
    routers: [router],
    middleware: [
      (ctx, next) => {
        node.seen.push({ url: ctx.originalUrl, forwarded: wasForwarded(ctx.req), client: clientAddress(ctx.req) });
        return next();
      },
      ...(options.middleware ?? []),
    ],
    forwardKey: () => KEY,
  });
  node.server = createServer(app.callback());
  servers.push(node.server);
  await new Promise<void>((r) => node.server.listen(0, '127.0.0.1', r));
  node.url = `http://127.0.0.1:${(node.server.address() as AddressInfo).port}`;
  return node;
}

const owns = (owner: Node): OwnerTarget => ({ self: false, nodeId: owner.name, url: owner.url });

function call(url: string, path: string, body: unknown, token: string | null = ADMIN_TOKEN) {
  const bytes = Buffer.from(JSON.stringify(body));
  const headers: Record<string, string> = { 'content-type': 'application/json', 'content-length': String(bytes.length) };
  if (token !== null) headers['authorization'] = `Bearer ${token}`;
  return new Promise<{ status: number; headers: IncomingHttpHeaders; body: any }>((resolve, reject) => {
    const out = request(`${url}${PREFIX}${path}`, { method: 'POST', headers, localAddress: CLIENT }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: JSON.parse(Buffer.concat(chunks).toString('utf8') || 'null') }));
    });
    out.on('error', reject);
    out.end(bytes);
  });
}

const command = () => ({ requestId: randomUUID(), operator: 'alice', reason: 'stop it' });
const state = async (taskId: string) => (await shared.store.get<TaskRecord>('tasks', taskId))!.state;

/** A running task of `Acme/Widget` (stored in that spelling), whose repository node-b owns for node-a. */
async function runningTask(taskId: string): Promise<void> {
  await createQueuedTask(shared.store, shared.runtime, { taskId, repoKey: 'default:Acme/Widget' });
  await driveTask(shared.runtime, taskId, 'running');
}

describe('a command about a task of a repository another node owns', () => {
  it('runs on the owner: its answer comes back, and this node sends the actor nothing', async () => {
    const a = await startNode('node-a');
    const b = await startNode('node-b');
    a.owners.set('default:acme/widget', owns(b));
    await runningTask('t-1');
    const req = command();

    const res = await call(a.url, '/tasks/t-1/abort?why=test', req);

    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ ok: true, taskId: 't-1', fromState: 'running', toState: 'aborting' });
    expect(res.headers['cache-control']).toBe('no-store');
    expect(await state('t-1')).toBe('aborting');
    expect(a.asked).toEqual(['default:acme/widget']); // the folded name
    expect(a.sends).toEqual([]);
    expect(a.aborts).toEqual([]);
    expect(b.sends).toEqual(['task:t-1 ABORT']);
    expect(b.aborts).toEqual(['t-1']);
    // The owner saw the same path and query, forwarded, and the client's address (not node-a's).
    expect(b.seen).toEqual([{ url: `${PREFIX}/tasks/t-1/abort?why=test`, forwarded: true, client: CLIENT }]);
    expect(b.asked).toEqual([]);
    expect((await shared.store.audit({ taskId: 't-1' })).filter((e) => e.action === 'control.task_abort')).toHaveLength(1);

    // A repeat is the owner's replay, answered as the owner answers it.
    const again = await call(a.url, '/tasks/t-1/abort', req);
    expect(again.status).toBe(200);
    expect(again.body).toEqual(res.body);
    expect(again.headers['idempotent-replay']).toBe('true');
    expect(b.sends).toEqual(['task:t-1 ABORT']);
  });

  it("the owner's refusal is the answer (409 for a task in a state the command does not apply to)", async () => {
    const a = await startNode('node-a');
    const b = await startNode('node-b');
    a.owners.set('default:acme/widget', owns(b));
    await runningTask('t-2');
    const res = await call(a.url, '/tasks/t-2/unblock', command());
    expect(res.status).toBe(409);
    expect(res.body).toEqual({ error: 'illegal_state', state: 'running' });
    expect(b.seen).toHaveLength(1);
    expect(a.sends).toEqual([]);
  });

  it('sends the body a body parser already read, as JSON', async () => {
    const parse = async (ctx: Context, next: Next) => {
      const chunks: Buffer[] = [];
      for await (const c of ctx.req) chunks.push(c as Buffer);
      (ctx.request as { body?: unknown }).body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      await next();
    };
    const a = await startNode('node-a', { middleware: [parse] });
    const b = await startNode('node-b');
    a.owners.set('default:acme/widget', owns(b));
    await runningTask('t-3');
    const res = await call(a.url, '/tasks/t-3/cancel', command());
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ taskId: 't-3', toState: 'aborting' });
    expect(b.sends).toEqual(['task:t-3 CANCEL']);
  });

  it('finds a task the replica does not hold yet by reading at the head, and routes it', async () => {
    const notYet: Pick<Store, 'get' | 'transact'> = { get: async () => undefined, transact: (fn) => shared.store.transact(fn) };
    const a = await startNode('node-a', { routeStore: notYet });
    const b = await startNode('node-b');
    a.owners.set('default:acme/widget', owns(b));
    await runningTask('t-4');
    const res = await call(a.url, '/tasks/t-4/abort', command());
    expect(res.status).toBe(200);
    expect(b.sends).toEqual(['task:t-4 ABORT']);
    expect(a.sends).toEqual([]);
  });

  it('an owner that cannot be reached: 503 with Retry-After naming it, and nothing done or recorded', async () => {
    const a = await startNode('node-a');
    const gone = await startNode('node-gone');
    await new Promise<void>((r) => (gone.server.closeAllConnections(), gone.server.close(() => r())));
    a.owners.set('default:acme/widget', owns(gone));
    await runningTask('t-5');
    const started = Date.now();

    const res = await call(a.url, '/tasks/t-5/abort', command());

    expect(Date.now() - started).toBeLessThan(5_000); // refused at once, not timed out
    expect(res.status).toBe(503);
    expect(res.headers['retry-after']).toBe('2');
    expect(res.body.error).toBe('owner_unreachable');
    expect(res.body.message).toContain('node-gone');
    expect(await state('t-5')).toBe('running');
    expect(a.sends).toEqual([]);
    expect(a.aborts).toEqual([]);
    expect(await shared.store.count('control_requests')).toBe(0);
  });
});

describe('a command handled where it arrives', () => {
  it('a task of a repository this node owns', async () => {
    const a = await startNode('node-a');
    await runningTask('t-6');
    const res = await call(a.url, '/tasks/t-6/abort', command());
    expect(res.status).toBe(200);
    expect(a.asked).toEqual(['default:acme/widget']);
    expect(a.sends).toEqual(['task:t-6 ABORT']);
    expect(a.aborts).toEqual(['t-6']);
  });

  it('a command another node forwarded, even when this node thinks that one owns the repository', async () => {
    const a = await startNode('node-a');
    const b = await startNode('node-b');
    a.owners.set('default:acme/widget', owns(b));
    b.owners.set('default:acme/widget', owns(a));
    await runningTask('t-7');
    const res = await call(a.url, '/tasks/t-7/abort', command());
    expect(res.status).toBe(200);
    expect(b.sends).toEqual(['task:t-7 ABORT']);
    expect(b.asked).toEqual([]);
    expect(a.seen).toHaveLength(1);
  });

  it('without the token (401 here, nothing forwarded), for a task nobody knows (404 here), and for commands about records every node reads', async () => {
    const a = await startNode('node-a');
    const b = await startNode('node-b');
    a.owners.set('default:acme/widget', owns(b));
    await runningTask('t-8');

    expect((await call(a.url, '/tasks/t-8/abort', command(), 'wrong-token')).status).toBe(401);
    const unknown = await call(a.url, '/tasks/t-none/abort', command());
    expect(unknown.status).toBe(404);
    expect(unknown.body).toEqual({ error: 'task_not_found' });
    expect((await call(a.url, '/control/pause', command())).status).toBe(200);
    expect((await call(a.url, `/repos/${encodeURIComponent('default:Acme/Widget')}/disable`, command())).status).toBe(404);

    expect(b.seen).toEqual([]);
    expect(a.asked).toEqual([]);
    expect(await state('t-8')).toBe('running');
  });
});
