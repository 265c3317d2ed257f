// Whose request it is when a standby forwarded it (src/http/standby-proxy.ts). The writer sees the
// standby as the TCP peer, but the audit (a webhook's source) and the guard against repeated failed
// logins (src/api/auth-failure-guard.ts) must see the client. A plain X-Forwarded-For would let any
// client name any address (this app never trusts one: create-app.ts), so the standby signs the
// client's address with the cluster's key, which only the nodes can read (it lives in the database,
// ccweb_cluster). A header that does not verify is ignored: the request is the TCP peer's.
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

export const FORWARDED_HEADER = 'x-ccweb-forwarded';

/** How far a signature's time may be from the writer's clock (clock skew between nodes plus transit). */
const WINDOW_MS = 60_000;

const mac = (key: string, client: string, at: number, method: string, url: string) =>
  createHmac('sha256', key).update(`v1\n${client}\n${at}\n${method}\n${url}`).digest('hex');

/** The header's value for a request from `client` that a standby forwards as `method url`. */
export function signForwarded(key: string, client: string, method: string, url: string, at: number = Date.now()): string {
  return `v1;${client};${at};${mac(key, client, at, method, url)}`;
}

/** The client address the header vouches for, or undefined when it does not verify (any reason). */
export function verifyForwarded(key: string, header: string, method: string, url: string, now: number = Date.now()): string | undefined {
  const parts = header.split(';');
  if (parts.length !== 4 || parts[0] !== 'v1') return undefined;
  const [, client, atText, given] = parts as [string, string, string, string];
  const at = Number(atText);
  if (!/^\d{1,16}$/.test(atText) || Math.abs(now - at) > WINDOW_MS || client.length === 0 || client.length > 64) return undefined;
  const expected = Buffer.from(mac(key, client, at, method, url), 'hex');
  const actual = Buffer.from(given, 'hex');
  return actual.length === expected.length && timingSafeEqual(actual, expected) ? client : undefined;
}

const VOUCHED = Symbol('ccweb.forwardedClient');
type Vouched = IncomingMessage & { [VOUCHED]?: string };

/**
 * Checks a forwarded request's header once, before anything reads the client's address, and removes
 * the header (nothing after this looks at it). Without a key (the embedded store: no standbys) every
 * such header is simply dropped.
 */
export function acceptForwardedClient(req: IncomingMessage, key: string | undefined): void {
  const header = req.headers[FORWARDED_HEADER];
  if (header === undefined) return;
  delete req.headers[FORWARDED_HEADER];
  if (key === undefined || typeof header !== 'string') return;
  const client = verifyForwarded(key, header, req.method ?? 'GET', req.url ?? '/');
  if (client !== undefined) (req as Vouched)[VOUCHED] = client;
}

/** Whether a standby vouched for this request's client (it was forwarded once already). */
export function wasForwarded(req: IncomingMessage): boolean {
  return (req as Vouched)[VOUCHED] !== undefined;
}

/** The request's client: the one a standby vouched for, else the TCP peer. */
export function clientAddress(req: IncomingMessage): string | undefined {
  return (req as Vouched)[VOUCHED] ?? req.socket.remoteAddress;
}

/**
 * The URL a request's target names on `base`, or undefined when it is not a path there: absolute
 * form (`http://elsewhere/…`), `//host/…`, or a path the URL parser reads as another host
 * (`/\\host/…`). A request is only ever sent on to the node it is meant for. Throws when `base`
 * itself is not a URL.
 */
export function sameOriginTarget(path: string, base: string): URL | undefined {
  const origin = new URL(base).origin;
  if (!path.startsWith('/') || path.startsWith('//')) return undefined;
  const target = new URL(path, base);
  return target.origin === origin ? target : undefined;
}
