// The gate's side of its child, the real gitea-mcp: a JSON-RPC client over the child's stdio that
// behaves as the MCP SDK's Client does (same handshake, same 60 s per request, the same error texts
// in the calls file), in node builtins only. The gate builds every message it sends here itself;
// nothing Codex wrote is passed through as it came.
import { spawn, type ChildProcess } from 'node:child_process';
import { classify, idFromHead, LineSplitter, rpcError, rpcNotification, rpcRequest, rpcResult, RPC, type RpcId } from './jsonrpc-lines.js';

/** A tool's answer can be a whole file or diff: bounded far above that, below running out of memory. */
export const CHILD_LINE_MAX_BYTES = 64 * 1024 * 1024;
/** The MCP SDK Client's default request timeout, kept. */
export const CHILD_REQUEST_TIMEOUT_MS = 60_000;

/** An error the child answered (or the connection's end), worded as the SDK's McpError was. */
export class ChildError extends Error {
  constructor(readonly code: number, message: string) {
    super(`MCP error ${code}: ${message}`);
  }
}

interface Pending {
  resolve(result: unknown): void;
  reject(err: Error): void;
  timer: NodeJS.Timeout;
}

export class ChildPeer {
  private readonly proc: ChildProcess;
  private readonly pending = new Map<number, Pending>();
  private nextId = 0;
  private closedWith: Error | null = null;
  private readonly closedPromise: Promise<void>;

  constructor(command: string, args: string[], env: Record<string, string>) {
    this.proc = spawn(command, args, { env, stdio: ['pipe', 'pipe', 'inherit'] });
    this.closedPromise = new Promise((resolve) => {
      const done = (err: Error) => {
        if (this.closedWith) return;
        this.closedWith = err;
        for (const p of this.pending.values()) {
          clearTimeout(p.timer);
          p.reject(err);
        }
        this.pending.clear();
        resolve();
      };
      this.proc.on('error', (err) => done(new Error(`gitea-mcp (${command}) could not start: ${err.message}`)));
      // Not 'exit': answers still in the pipe are read first ('end' follows the last 'data').
      this.proc.on('close', () => done(new ChildError(-32000, 'Connection closed')));
      this.proc.stdout!.on('end', () => done(new ChildError(-32000, 'Connection closed')));
    });
    // A child gone mid-write must not crash the gate (EPIPE); its end is reported through `closed`.
    this.proc.stdin!.on('error', () => undefined);
    const lines = new LineSplitter(CHILD_LINE_MAX_BYTES);
    this.proc.stdout!.on('data', (chunk: Buffer) => {
      for (const frame of lines.push(chunk)) {
        if (frame.kind === 'line') this.receive(frame.text);
        else this.oversized(idFromHead(frame.head), frame.bytes);
      }
    });
  }

  /** Resolves once the child has gone (exited, closed its stdout, or never started). */
  get closed(): Promise<void> {
    return this.closedPromise;
  }

  request(method: string, params: unknown, timeoutMs = CHILD_REQUEST_TIMEOUT_MS): Promise<unknown> {
    if (this.closedWith) return Promise.reject(this.closedWith);
    const id = ++this.nextId;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        this.write(rpcNotification('notifications/cancelled', { requestId: id, reason: 'Request timed out' }));
        reject(new ChildError(-32001, 'Request timed out'));
      }, timeoutMs);
      this.pending.set(id, { resolve, reject, timer });
      this.write(rpcRequest(id, method, params));
    });
  }

  notify(method: string, params?: unknown): void {
    this.write(rpcNotification(method, params));
  }

  /** Ends the child: its stdin first (gitea-mcp stops at end of input), then signals if it lingers. */
  async close(): Promise<void> {
    if (!this.closedWith) this.proc.stdin!.end();
    const gone = this.closedPromise.then(() => true);
    const wait = (ms: number) => new Promise<boolean>((r) => setTimeout(() => r(false), ms).unref());
    if (await Promise.race([gone, wait(2000)])) return;
    this.proc.kill('SIGTERM');
    if (await Promise.race([gone, wait(2000)])) return;
    this.proc.kill('SIGKILL');
  }

  private write(line: string): void {
    if (this.closedWith || this.proc.stdin!.destroyed) return;
    this.proc.stdin!.write(`${line}\n`);
  }

  private receive(text: string): void {
    const msg = classify(text);
    if (msg.kind === 'response') {
      const p = typeof msg.id === 'number' ? this.pending.get(msg.id) : undefined;
      if (!p) return; // an answer to nothing asked (or already timed out)
      this.pending.delete(msg.id as number);
      clearTimeout(p.timer);
      if (msg.error) p.reject(new ChildError(msg.error.code, msg.error.message));
      else p.resolve(msg.result);
    } else if (msg.kind === 'request') {
      // The gate offers the child no capabilities (no sampling, roots or elicitation); it answers ping.
      this.write(msg.method === 'ping' ? rpcResult(msg.id, {}) : rpcError(msg.id, RPC.methodNotFound, 'Method not found'));
    }
    // Notifications (logging, list_changed) and lines that are not JSON-RPC are dropped: the tool list
    // is the one read at start, and nothing of the child reaches Codex except answers to the gate's calls.
  }

  private oversized(id: RpcId | null, bytes: number): void {
    const p = typeof id === 'number' ? this.pending.get(id) : undefined;
    if (!p) return;
    this.pending.delete(id as number);
    clearTimeout(p.timer);
    p.reject(new Error(`gitea-mcp's answer was larger than ${CHILD_LINE_MAX_BYTES} bytes (${bytes}+), so it is not passed on`));
  }
}
