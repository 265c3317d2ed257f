// The operators' commands about a task run on the node that owns the task's repository
// (docs/DESIGN-nodes-at-once.md step 5): only that node hosts the task's actor and the Codex turn an
// abort has to interrupt. A koa middleware mounted after the token check on the task commands of
// src/api/control-router.ts (cancel, unblock, abort: option `routeTaskCommand`); it sends the request
// on to the owner (method, path and query, the body as received, the token) and answers what the owner
// answered. A request another node forwarded, a task this node's repository holds, and a task nobody
// knows stay here (the route answers as it always did). Commands about records every node reads
// (pause, a repository's settings, limits) need none of this.
import type { Context, Next } from 'koa';
import type { OutgoingHttpHeaders } from 'node:http';
import type { TaskRecord } from '../domain/records.js';
import { foldName } from '../domain/repository-identity.js';
import { clientAddress, wasForwarded } from '../http/forwarded-client.js';
import type { Store } from '../store/types.js';
import { forwardToOwner, RETRY_AFTER_SECONDS, type ForwardOptions, type OwnerAnswer } from './owner-http.js';
import type { RepositoryScope } from './repository-scope.js';

/** As the control API reads a body (src/api/http-helpers.ts): a command's body is a few hundred bytes. */
const MAX_BODY_BYTES = 16 * 1024;

export interface CommandOwnerRouteOptions extends ForwardOptions {
  store: Pick<Store, 'get' | 'transact'>;
  scope: Pick<RepositoryScope, 'routeOf'>;
}

type Body = { ok: true; bytes: Buffer; contentType: string | undefined } | { ok: false };

/**
 * The body to send on: the one a body parser already read (as JSON), else the bytes of the request,
 * which nothing has read yet (the control API reads its body itself, after this).
 */
async function bodyOf(ctx: Context): Promise<Body> {
  const parsed = (ctx.request as { body?: unknown }).body;
  if (parsed !== undefined) return { ok: true, bytes: Buffer.from(JSON.stringify(parsed), 'utf8'), contentType: 'application/json' };
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of ctx.req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) return { ok: false };
    chunks.push(chunk as Buffer);
  }
  return { ok: true, bytes: Buffer.concat(chunks, size), contentType: ctx.get('content-type') || undefined };
}

function answer(ctx: Context, a: OwnerAnswer): void {
  ctx.set('cache-control', 'no-store');
  for (const [name, value] of Object.entries(a.headers ?? {})) ctx.set(name, value);
  ctx.status = a.status;
  ctx.body = a.body;
}

/**
 * The middleware for routes with a `:taskId`. The task is read from the replica; one not there yet
 * (intake on another node wrote it less than a tail interval ago) is read once more at the
 * database's head, so the command is not answered 404 here for a task its owner knows.
 */
export function routeTaskCommands(options: CommandOwnerRouteOptions): (ctx: Context, next: Next) => Promise<void> {
  const { store, scope } = options;
  return async (ctx, next) => {
    const taskId = (ctx as Context & { params?: Record<string, string> }).params?.['taskId'];
    if (wasForwarded(ctx.req) || taskId === undefined) return next();
    const task = (await store.get<TaskRecord>('tasks', taskId)) ?? (await store.transact((tx) => tx.get<TaskRecord>('tasks', taskId)));
    if (task === undefined || typeof task.repoKey !== 'string') return next();
    const repoKey = foldName(task.repoKey);
    let owner;
    try {
      owner = await scope.routeOf(repoKey);
    } catch (error) {
      options.logger?.warn({ taskId, repoKey, err: error instanceof Error ? error.message : String(error) }, "cluster: the owner of a task's repository is unknown");
      answer(ctx, {
        status: 503,
        body: { error: 'owner_unknown', message: `node ${options.nodeId} could not tell which node handles this task's repository; try again shortly` },
        headers: { 'retry-after': String(RETRY_AFTER_SECONDS) },
      });
      return;
    }
    if (owner.self) return next();
    const body = await bodyOf(ctx);
    if (!body.ok) {
      answer(ctx, { status: 413, body: { error: 'body_too_large' } });
      return;
    }
    const headers: OutgoingHttpHeaders = {};
    const authorization = ctx.get('authorization');
    if (authorization !== '') headers['authorization'] = authorization;
    if (body.contentType !== undefined) headers['content-type'] = body.contentType;
    answer(
      ctx,
      await forwardToOwner(options, {
        owner,
        method: ctx.method,
        path: ctx.originalUrl,
        client: clientAddress(ctx.req),
        headers,
        body: body.bytes,
        about: { taskId, repoKey },
      }),
    );
  };
}
