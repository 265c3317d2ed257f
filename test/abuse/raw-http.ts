// A raw HTTP/1.1 client over a TCP socket: hostile requests need bytes no HTTP library will write
// (bare LF in a header, NUL bytes, conflicting framing headers, a body shorter than declared).
import { connect } from 'node:net';

export interface RawAnswer {
  /** The status line's code, or null when the connection closed without an answer. */
  status: number | null;
  head: string;
  error: string | null;
}

export interface RawRequest {
  method: string;
  path: string;
  /** Header lines exactly as written (`Name: value`); `Host` and `Connection: close` are added. */
  headers: string[];
  body?: Buffer;
  /** After writing, end our side at once: a client that hangs up mid-body (Content-Length not reached). */
  cut?: boolean;
}

export function encodeRequest(r: RawRequest): Buffer {
  const head = [`${r.method} ${r.path} HTTP/1.1`, 'Host: 127.0.0.1', 'Connection: close', ...r.headers].join('\r\n');
  return Buffer.concat([Buffer.from(`${head}\r\n\r\n`, 'latin1'), r.body ?? Buffer.alloc(0)]);
}

export function sendRaw(port: number, r: RawRequest, timeoutMs = 10_000): Promise<RawAnswer> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let error: string | null = null;
    let done = false;
    const socket = connect(port, '127.0.0.1');
    const finish = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      const text = Buffer.concat(chunks).toString('latin1');
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(text);
      resolve({ status: m ? Number(m[1]) : null, head: text.split('\r\n\r\n', 1)[0]!.slice(0, 2000), error });
    };
    const timer = setTimeout(() => {
      error ??= 'timeout';
      finish();
    }, timeoutMs);
    socket.on('connect', () => {
      socket.write(encodeRequest(r), (err) => {
        if (err) error ??= err.message;
      });
      if (r.cut) socket.end();
    });
    socket.on('data', (d: Buffer) => {
      chunks.push(d);
    });
    socket.on('error', (err) => {
      error ??= err.message;
      finish();
    });
    socket.on('close', finish);
    socket.on('end', finish);
  });
}

/** A connection the test writes to at its own pace, recording what came back and when it closed. */
export interface SlowConnection {
  /** Writes unless the connection is gone (the server may have cut it). */
  write(bytes: string | Buffer): void;
  /** Resolves when the server closes (or resets) the connection: the answer, and ms since connect. */
  closed: Promise<{ status: number | null; text: string; afterMs: number; error: string | null }>;
  /** Whether the TCP connection was established. */
  connected: Promise<void>;
  destroy(): void;
}

export function openSlow(port: number): SlowConnection {
  const socket = connect(port, '127.0.0.1');
  const chunks: Buffer[] = [];
  let error: string | null = null;
  let t0 = Date.now();
  const connected = new Promise<void>((resolve, reject) => {
    socket.once('connect', () => {
      t0 = Date.now();
      resolve();
    });
    socket.once('error', reject);
  });
  connected.catch(() => undefined);
  socket.on('data', (d: Buffer) => chunks.push(d));
  socket.on('error', (err) => {
    error ??= err.message;
  });
  const closed = new Promise<{ status: number | null; text: string; afterMs: number; error: string | null }>((resolve) => {
    socket.once('close', () => {
      const text = Buffer.concat(chunks).toString('latin1');
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(text);
      resolve({ status: m ? Number(m[1]) : null, text, afterMs: Date.now() - t0, error });
    });
  });
  return {
    write(bytes) {
      if (!socket.destroyed && socket.writable) socket.write(bytes, () => undefined);
    },
    closed,
    connected,
    destroy: () => socket.destroy(),
  };
}
