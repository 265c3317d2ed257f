// The operations endpoints: `/healthz` (the process answers), `/readyz` (it can take work) and
// `/metrics` (Prometheus). None of them needs a token: they reveal no secrets or task contents, and
// the service binds to 127.0.0.1 by default (see docs/operations.md before exposing them).
// It also counts every webhook answer, so it must be mounted before the webhook router.
import Router from '@koa/router';
import { METRICS_CONTENT_TYPE, type ServiceMetrics } from '../observability/metrics.js';
import type { Readiness } from './readiness.js';

export interface OpsRouterOptions {
  readiness: Readiness;
  metrics: ServiceMetrics;
  /** The webhook path whose answers are counted. */
  webhookPath: string;
  /** Extra `/readyz` detail that does not decide readiness (e.g. the model provider's rate-limit hold). */
  readyDetails?: () => Record<string, unknown>;
}

export function createOpsRouter(options: OpsRouterOptions): Router {
  const router = new Router();

  router.get('/healthz', (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    ctx.body = { status: 'ok' };
  });

  router.get('/readyz', async (ctx) => {
    const report = await options.readiness.check();
    ctx.set('Cache-Control', 'no-store');
    ctx.status = report.ready ? 200 : 503;
    ctx.body = { status: report.ready ? 'ready' : 'not_ready', store: report.store, appServer: report.appServer, ...report.dependencies, ...options.readyDetails?.() };
  });

  router.get('/metrics', async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    ctx.type = METRICS_CONTENT_TYPE;
    ctx.body = await options.metrics.render();
  });

  // Runs around the webhook route (which is mounted after this router): counts the answer it gave.
  router.post(options.webhookPath, async (ctx, next) => {
    try {
      await next();
    } catch (error) {
      // The app's error handler answers it; count what it will say (4xx as thrown, else 5xx).
      const status = (error as { status?: unknown } | null)?.status;
      const code = typeof status === 'number' && status >= 400 && status < 500 ? status : 500;
      options.metrics.observeWebhook({ status: code, body: { error: code === 500 ? 'internal_error' : 'bad_request' } });
      throw error;
    }
    options.metrics.observeWebhook({ status: ctx.status, body: ctx.body });
  });

  return router;
}
