/**
 * An HTTP endpoint on 127.0.0.1 that keeps every request a real Gitea delivers to it byte for byte
 * (raw header pairs as received, body bytes), and answers 200. For recording fixtures and for tests
 * that look at what Gitea actually sends.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';

export interface RecordedRequest {
  method: string;
  url: string;
  /** Header names as Gitea/Go spelled them, values as sent, in arrival order. */
  rawHeaders: Array<[string, string]>;
  /** Lower-cased header map (last value wins). */
  headers: Record<string, string>;
  body: Buffer;
  receivedAt: number;
}

export interface WebhookRecorder {
  url: string;
  requests: RecordedRequest[];
  /** Resolves with the first request (already received or future) that matches. */
  waitFor(match: (r: RecordedRequest) => boolean, timeoutMs?: number): Promise<RecordedRequest>;
  close(): Promise<void>;
}

export async function startWebhookRecorder(answer: (r: RecordedRequest, res: ServerResponse) => void = (_r, res) => res.writeHead(200, { 'Content-Type': 'application/json' }).end('{"status":"recorded"}')): Promise<WebhookRecorder> {
  const requests: RecordedRequest[] = [];
  const waiters = new Set<() => void>();
  const server = createServer((req: IncomingMessage, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const rawHeaders: Array<[string, string]> = [];
      for (let i = 0; i < req.rawHeaders.length; i += 2) rawHeaders.push([req.rawHeaders[i]!, req.rawHeaders[i + 1]!]);
      const headers: Record<string, string> = {};
      for (const [k, v] of rawHeaders) headers[k.toLowerCase()] = v;
      const r: RecordedRequest = { method: req.method ?? '', url: req.url ?? '', rawHeaders, headers, body: Buffer.concat(chunks), receivedAt: Date.now() };
      requests.push(r);
      answer(r, res);
      for (const w of waiters) w();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}/hook`,
    requests,
    waitFor(match, timeoutMs = 20_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const r = requests.find(match);
          if (!r) return false;
          waiters.delete(check);
          clearTimeout(timer);
          resolve(r);
          return true;
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`no matching webhook delivery within ${timeoutMs} ms (${requests.length} received)`));
        }, timeoutMs);
        if (!check()) waiters.add(check);
      });
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
