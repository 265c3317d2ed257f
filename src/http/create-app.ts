// The HTTP application: routers from every module mounted on one Koa app, behind one error
// handler. `main.ts`/the CLI only binds it to a port; tests drive `app.callback()` directly.
import Koa from 'koa';
import type Router from '@koa/router';
import { StoreUnavailableError } from '../store/types.js';

export interface AppLogger {
  error(obj: Record<string, unknown>, msg?: string): void;
}

export interface CreateAppOptions {
  routers: readonly Router[];
  /** Run after the error handler, before the routers (e.g. the admin authentication guard). */
  middleware?: readonly Koa.Middleware[];
  logger?: AppLogger;
}

/** A client error raised by Koa itself or a router (`ctx.throw(4xx)`): its status is safe to show. */
function clientStatus(error: unknown): number | undefined {
  const status = (error as { status?: unknown; expose?: unknown } | null)?.status;
  return typeof status === 'number' && status >= 400 && status < 500 ? status : undefined;
}

export function createApp(options: CreateAppOptions): Koa {
  const app = new Koa();
  // Never trust X-Forwarded-*: the audit records the TCP peer (client-address.ts).
  app.proxy = false;

  app.use(async (ctx, next) => {
    try {
      await next();
    } catch (error) {
      const status = clientStatus(error);
      if (error instanceof StoreUnavailableError) {
        ctx.status = 503;
        ctx.body = { error: 'store_unavailable' };
      } else if (status !== undefined) {
        ctx.status = status;
        ctx.body = { error: status === 413 ? 'payload_too_large' : 'bad_request' };
      } else {
        ctx.status = 500;
        ctx.body = { error: 'internal_error' };
      }
      // Name and message only: request bodies and headers (signatures, tokens) never reach the log.
      options.logger?.error(
        { err: error instanceof Error ? { name: error.name, message: error.message } : String(error), path: ctx.path, status: ctx.status },
        'request failed',
      );
    }
  });

  for (const mw of options.middleware ?? []) app.use(mw);
  for (const router of options.routers) {
    app.use(router.routes());
    app.use(router.allowedMethods());
  }
  return app;
}
