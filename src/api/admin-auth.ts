import { createHash, timingSafeEqual } from 'node:crypto';
import type { Context, Next } from 'koa';

/**
 * Constant-time token check: both sides are hashed first, so neither the content nor the length of
 * the configured token leaks through timing.
 */
export function tokenMatches(given: string, expected: string): boolean {
  const a = createHash('sha256').update(given, 'utf8').digest();
  const b = createHash('sha256').update(expected, 'utf8').digest();
  return timingSafeEqual(a, b) && expected.length > 0;
}

/** The bearer token of a request, or null. */
export function bearerToken(ctx: Context): string | null {
  const header = ctx.get('authorization');
  const m = /^Bearer[ ]+(\S+)\s*$/i.exec(header);
  return m ? m[1]! : null;
}

/** Koa middleware: 401 `{error:'unauthorized'}` (no detail) unless the admin token is presented. */
export function requireAdminToken(adminToken: string): (ctx: Context, next: Next) => Promise<void> {
  if (!adminToken) throw new Error('adminToken must be a non-empty string');
  return async (ctx, next) => {
    const token = bearerToken(ctx);
    if (token === null || !tokenMatches(token, adminToken)) {
      unauthorized(ctx);
      return;
    }
    await next();
  };
}

export function unauthorized(ctx: Context): void {
  ctx.status = 401;
  ctx.set('www-authenticate', 'Bearer');
  ctx.set('cache-control', 'no-store');
  ctx.body = { error: 'unauthorized' };
}
