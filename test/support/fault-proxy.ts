// A fault-injecting HTTP proxy in front of a real server (a real Gitea): it forwards every request
// as is, except the next `count` requests whose path matches, which it answers itself with `status`
// (Gitea-style JSON error) without forwarding. For failures the real Gitea cannot produce on demand
// (a 500 or 502 from its permission or comment API), while every other answer stays the real one.
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FaultProxy {
  url: string;
  /** The next `count` requests whose path (with query) matches answer `status` unforwarded. */
  failNext(pattern: RegExp, status: number, count?: number): void;
  /** Paths (with query) of the requests answered with a fault, in order. */
  readonly faulted: string[];
  close(): Promise<void>;
}

export async function startFaultProxy(target: string): Promise<FaultProxy> {
  const to = new URL(target);
  const rules: Array<{ pattern: RegExp; status: number; remaining: number }> = [];
  const faulted: string[] = [];
  const server: Server = createServer((req, res) => {
    const path = req.url ?? '/';
    const rule = rules.find((r) => r.remaining > 0 && r.pattern.test(path));
    if (rule) {
      rule.remaining -= 1;
      faulted.push(path);
      req.resume();
      res.writeHead(rule.status, { 'Content-Type': 'application/json' }).end(JSON.stringify({ message: 'injected fault', url: '' }));
      return;
    }
    const headers = { ...req.headers, host: to.host };
    const out = httpRequest({ host: to.hostname, port: to.port, method: req.method, path, headers }, (upstream) => {
      res.writeHead(upstream.statusCode ?? 502, upstream.headers);
      upstream.pipe(res);
    });
    out.on('error', () => res.writeHead(502).end());
    req.pipe(out);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    failNext(pattern, status, count = 1) {
      rules.push({ pattern, status, remaining: count });
    },
    faulted,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
