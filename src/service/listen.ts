// The HTTP server every route is served by, with the limits that keep slow or many clients from
// holding it: Node's defaults let a client trickle headers for 60 s and a body for 300 s,
// checked only every 30 s, and accept any number of connections.
import { createServer, type RequestListener, type Server } from 'node:http';
import { hostname } from 'node:os';

export interface HttpLimits {
  /** The whole request head must arrive within this (slow headers → 408, connection closed). */
  headersTimeoutMs: number;
  /**
   * The body must arrive within this after the head. Routes that read a body enforce it themselves
   * with a 408 of their own (src/intake/webhook-route.ts); the server cuts any request still incomplete at
   * head + body + a margin, as the backstop for every other route.
   */
  bodyTimeoutMs: number;
  /** Connections past this are closed at once; established ones are untouched. */
  maxConnections: number;
  /** An idle keep-alive connection is closed after this. */
  keepAliveTimeoutMs: number;
  /** A keep-alive connection is closed after this many requests. */
  maxRequestsPerSocket: number;
}

export const DEFAULT_HTTP_LIMITS: HttpLimits = {
  headersTimeoutMs: 10_000,
  bodyTimeoutMs: 30_000,
  maxConnections: 256,
  keepAliveTimeoutMs: 5_000,
  maxRequestsPerSocket: 1_000,
};

/** The backstop comes after the route's own body deadline, so the route's 408 is the one sent. */
const BACKSTOP_MARGIN_MS = 1_000;

/** The node:http options (and properties) these limits become; pure, for tests of the arithmetic. */
export function serverSettings(l: HttpLimits) {
  const requestTimeout = l.headersTimeoutMs + l.bodyTimeoutMs + BACKSTOP_MARGIN_MS;
  return {
    headersTimeout: l.headersTimeoutMs,
    requestTimeout,
    // Node looks for expired requests only this often (default 30 s, which turned a 60 s header
    // timeout into 69 s): a quarter of the shortest timeout, at most a second. Cheap: one list walk.
    connectionsCheckingInterval: Math.max(50, Math.min(1_000, Math.floor(Math.min(l.headersTimeoutMs, l.bodyTimeoutMs) / 4))),
    // An idle connection waiting for its next request counts as keep-alive, never as slow headers:
    // keep it shorter than the header timeout so the two cannot be confused.
    keepAliveTimeout: Math.min(l.keepAliveTimeoutMs, l.headersTimeoutMs),
    maxRequestsPerSocket: l.maxRequestsPerSocket,
    maxConnections: l.maxConnections,
  };
}

/** Starts the HTTP server on host:port; rejects with the listen error (port in use, bad host). */
export function listen(handler: RequestListener, host: string, port: number, limits: HttpLimits = DEFAULT_HTTP_LIMITS): Promise<Server> {
  return new Promise<Server>((resolve, reject) => {
    const s = serverSettings(limits);
    const server = createServer(
      { headersTimeout: s.headersTimeout, requestTimeout: s.requestTimeout, connectionsCheckingInterval: s.connectionsCheckingInterval, keepAliveTimeout: s.keepAliveTimeout },
      handler,
    );
    server.maxRequestsPerSocket = s.maxRequestsPerSocket;
    server.maxConnections = s.maxConnections;
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve(server);
    });
  });
}

/**
 * Where the other nodes reach this one when CCWEB_NODE_URL is unset: the address it listens on, or
 * the host name when it listens on every address (which no other machine can dial).
 */
export function defaultNodeUrl(host: string, port: number, machine: string = hostname()): string {
  const any = host === '0.0.0.0' || host === '::' || host === '[::]';
  const name = any ? machine : host;
  return `http://${name.includes(':') && !name.startsWith('[') ? `[${name}]` : name}:${port}`;
}
