import { createServer, type RequestListener, type Server } from 'node:http';

/** Starts the HTTP server on host:port; rejects with the listen error (port in use, bad host). */
export function listen(handler: RequestListener, host: string, port: number): Promise<Server> {
  return new Promise<Server>((resolve, reject) => {
    const s = createServer(handler);
    s.once('error', reject);
    s.listen(port, host, () => {
      s.off('error', reject);
      resolve(s);
    });
  });
}
