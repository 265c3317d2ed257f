// The node:http settings the HTTP limits become: consistent for every configurable value,
// so Node never rejects them (headersTimeout must not exceed requestTimeout) and the route's own 408
// comes before the server's backstop. The behaviour itself: test/abuse/slow-clients.test.ts.
import { createServer } from 'node:http';
import { describe, expect, it } from 'vitest';
import { DEFAULT_HTTP_LIMITS, serverSettings } from '../../src/service/listen.js';

describe('serverSettings', () => {
  it('the defaults: 10 s headers, backstop 41 s, checked every second, keep-alive 5 s', () => {
    expect(serverSettings(DEFAULT_HTTP_LIMITS)).toEqual({
      headersTimeout: 10_000,
      requestTimeout: 41_000,
      connectionsCheckingInterval: 1_000,
      keepAliveTimeout: 5_000,
      maxRequestsPerSocket: 1_000,
      maxConnections: 256,
    });
  });

  it('stays consistent at the edges of the configurable ranges, and Node accepts it', () => {
    for (const headers of [1, 2, 10, 600]) {
      for (const body of [1, 3, 30, 3600]) {
        const s = serverSettings({ ...DEFAULT_HTTP_LIMITS, headersTimeoutMs: headers * 1000, bodyTimeoutMs: body * 1000 });
        expect(s.requestTimeout).toBeGreaterThan(s.headersTimeout + body * 1000 - 1);
        expect(s.keepAliveTimeout).toBeLessThanOrEqual(s.headersTimeout);
        expect(s.connectionsCheckingInterval).toBeLessThanOrEqual(Math.min(headers, body) * 250);
        const server = createServer({ headersTimeout: s.headersTimeout, requestTimeout: s.requestTimeout, connectionsCheckingInterval: s.connectionsCheckingInterval, keepAliveTimeout: s.keepAliveTimeout });
        server.close();
      }
    }
  });
});
