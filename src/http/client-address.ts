// Whose request it is: the TCP peer. X-Forwarded-* is never trusted (create-app.ts sets app.proxy
// false), so a client cannot name another address for the audit or the failed-login guard.
import type { IncomingMessage } from 'node:http';

export function clientAddress(req: IncomingMessage): string | undefined {
  return req.socket.remoteAddress;
}
