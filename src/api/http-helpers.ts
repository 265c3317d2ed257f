import type { Context } from 'koa';
import { z } from 'zod';

/** An answer decided by a handler: thrown, turned into `status` + JSON body by `handled`. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly body: Record<string, unknown>,
  ) {
    super(String(body['error'] ?? status));
  }
}

export interface ApiLogger {
  error(obj: Record<string, unknown>, msg?: string): void;
}

const MAX_BODY_BYTES = 16 * 1024;

/**
 * The JSON body of a request. Uses a body an app-level parser already read, otherwise reads the
 * stream itself (bounded), so the routers work with or without a body parser in front.
 */
export async function readJsonBody(ctx: Context): Promise<unknown> {
  const parsed = (ctx.request as { body?: unknown }).body;
  if (parsed !== undefined) return parsed;
  const type = ctx.get('content-type');
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of ctx.req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) throw new ApiError(413, { error: 'body_too_large' });
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') return {};
  if (!/^application\/json\b/i.test(type)) throw new ApiError(415, { error: 'unsupported_media_type' });
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new ApiError(400, { error: 'invalid_json' });
  }
}

/** Parses with a zod schema; a failure becomes 400 with the paths and messages (never the values). */
export function parseOr400<T>(schema: z.ZodType<T>, value: unknown): T {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  throw new ApiError(400, {
    error: 'invalid_request',
    issues: result.error.issues.map((i) => ({ path: i.path.join('.'), code: i.code, message: i.message })),
  });
}

/** Wraps a handler: ApiError → its answer, anything else → 500 without detail (logged). */
export function handled(
  logger: ApiLogger | undefined,
  fn: (ctx: Context) => Promise<void>,
): (ctx: Context) => Promise<void> {
  return async (ctx) => {
    ctx.set('cache-control', 'no-store');
    try {
      await fn(ctx);
    } catch (err) {
      if (err instanceof ApiError) {
        ctx.status = err.status;
        ctx.body = err.body;
        return;
      }
      logger?.error({ err: err instanceof Error ? { name: err.name, message: err.message } : String(err), path: ctx.path }, 'operator api failed');
      ctx.status = 500;
      ctx.body = { error: 'internal_error' };
    }
  };
}

/** Query parameters as a flat record (repeated keys: the first value). */
export function queryOf(ctx: Context): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(ctx.query)) {
    const first = Array.isArray(v) ? v[0] : v;
    if (typeof first === 'string') out[k] = first;
  }
  return out;
}
