// The load balancer in front of several nodes, as an operator runs one: every request goes to the
// next node in turn; a node that refuses the connection (down, or a standby that does not listen)
// is skipped for the next one. Bodies pass through byte for byte (webhook signatures cover them).
import { createServer, request, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';

/** One request the relay passed on and its answer: when it came in, where it went, how long the node took. */
export interface RelayAck {
  /** performance.now() when the relay had the whole request. */
  at: number;
  target: number;
  /** From the whole request in to the node's whole answer back: what the sender (Gitea) waits. */
  ms: number;
  status: number;
  delivery: string | null;
  body: Buffer;
}

export interface RoundRobinRelay {
  url: string;
  /** Which target answered each request, in order (index into `targets`). */
  served: number[];
  /** Which target answered each Gitea delivery (its X-Gitea-Delivery), by delivery id. */
  deliveries: Map<string, number>;
  /** The node each delivery's answer says handled it (its X-Ccweb-Node header), by delivery id. */
  handledBy: Map<string, string>;
  /** The answer's status of each delivery, by delivery id. */
  statuses: Map<string, number>;
  /** The delivery id a `sendNextTo` pin went with, by the pin's text. */
  pinnedDeliveries: Map<string, string>;
  /** Every answered request, in the order the answers came (a stopped node's come when it wakes). */
  acks: RelayAck[];
  /** Requests passed on and not answered yet (a stopped node holds them until it wakes). */
  inFlight(): number;
  /** Sends the next request whose body contains `text` to this target (once): a test's choice of node. */
  sendNextTo(index: number, text: string): void;
  close(): Promise<void>;
}

export async function startRoundRobinRelay(port: number, targets: () => string[]): Promise<RoundRobinRelay> {
  let next = 0;
  const served: number[] = [];
  const deliveries = new Map<string, number>();
  const handledBy = new Map<string, string>();
  const statuses = new Map<string, number>();
  const pinnedDeliveries = new Map<string, string>();
  const pinned: Array<{ index: number; text: string }> = [];
  const acks: RelayAck[] = [];
  let inFlight = 0;
  const forward = (target: string, req: IncomingMessage, body: Buffer) =>
    new Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: Buffer }>((resolve, reject) => {
      const url = new URL(req.url ?? '/', target);
      const out = request(url, { method: req.method, headers: { ...req.headers, host: url.host } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 502, headers: res.headers, body: Buffer.concat(chunks) }));
        res.on('error', reject);
      });
      out.on('error', reject);
      out.end(body);
    });
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const body = Buffer.concat(chunks);
      const at = performance.now();
      inFlight++;
      const list = targets();
      const pin = pinned.findIndex((p) => body.includes(p.text));
      const pinnedTo = pin >= 0 ? pinned.splice(pin, 1)[0]! : undefined;
      const first = pinnedTo?.index;
      const uuid = req.headers['x-gitea-delivery'];
      if (pinnedTo && typeof uuid === 'string') pinnedDeliveries.set(pinnedTo.text, uuid);
      for (let tried = 0; tried < list.length; tried++) {
        const index = tried === 0 && first !== undefined ? first : next++ % list.length;
        try {
          const answer = await forward(list[index]!, req, body);
          served.push(index);
          const delivery = req.headers['x-gitea-delivery'];
          acks.push({ at, target: index, ms: performance.now() - at, status: answer.status, delivery: typeof delivery === 'string' ? delivery : null, body });
          if (typeof delivery === 'string') deliveries.set(delivery, index);
          if (typeof delivery === 'string') statuses.set(delivery, answer.status);
          const node = answer.headers['x-ccweb-node'];
          if (typeof delivery === 'string' && typeof node === 'string') handledBy.set(delivery, node);
          inFlight--;
          res.writeHead(answer.status, answer.headers);
          res.end(answer.body);
          return;
        } catch {
          // Refused or reset: the next node.
        }
      }
      inFlight--;
      res.writeHead(502).end('no node answered');
    });
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    served,
    deliveries,
    handledBy,
    statuses,
    pinnedDeliveries,
    acks,
    inFlight: () => inFlight,
    sendNextTo(index, text) {
      pinned.push({ index, text });
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
