import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import Router from '@koa/router';

const ADMIN_DIR = fileURLToPath(new URL('./admin-page/', import.meta.url));
const VISUALIZER_DIR = fileURLToPath(new URL('../../visualizer/page/', import.meta.url));

const TYPES: Record<string, string> = {
  html: 'text/html; charset=utf-8',
  js: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
};

// The pages render untrusted text (comment bodies, logins) with textContent only; the policy is
// the second line of defence: no inline script, no foreign origin, no framing.
const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self' data:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/**
 * The admin page (`/admin`) and the visualizer (`/visualizer`): static files, no build step. They
 * carry no data and need no token; every call they make to the API does.
 */
export function createStaticPagesRouter(): Router {
  const router = new Router();
  const files = new Map<string, { type: string; body: string }>();
  const add = (url: string, dir: string, file: string) => {
    files.set(url, { type: TYPES[file.split('.').pop()!]!, body: readFileSync(`${dir}${file}`, 'utf8') });
  };
  add('/admin', ADMIN_DIR, 'index.html');
  add('/admin/', ADMIN_DIR, 'index.html');
  add('/admin/admin.js', ADMIN_DIR, 'admin.js');
  add('/admin/admin.css', ADMIN_DIR, 'admin.css');
  add('/admin/operator-client.js', ADMIN_DIR, 'operator-client.js');
  add('/admin/usage-panel.js', ADMIN_DIR, 'usage-panel.js');
  add('/admin/security-panel.js', ADMIN_DIR, 'security-panel.js');
  add('/visualizer', VISUALIZER_DIR, 'index.html');
  add('/visualizer/', VISUALIZER_DIR, 'index.html');
  add('/visualizer/visualizer.js', VISUALIZER_DIR, 'visualizer.js');
  add('/visualizer/visualizer.css', VISUALIZER_DIR, 'visualizer.css');
  for (const [url, file] of files) {
    router.get(url, (ctx) => {
      ctx.set('content-security-policy', CSP);
      ctx.set('x-content-type-options', 'nosniff');
      ctx.set('referrer-policy', 'no-referrer');
      ctx.set('cache-control', 'no-cache');
      ctx.type = file.type;
      ctx.body = file.body;
    });
  }
  return router;
}
