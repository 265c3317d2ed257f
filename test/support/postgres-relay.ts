// A userspace TCP relay between one client (a node) and PostgreSQL, for the partitions the real network
// of a test machine cannot make on demand (a test double for the link only: both ends are real).
//   pass       bytes flow both ways;
//   cut        every connection is closed and new ones are refused (reset at once): the database went away;
//   half-open  connections stay open and pass nothing either way, new ones are accepted and pass nothing:
//              a partition where nothing answers and nothing is closed, which TCP alone notices only after
//              minutes.
// Back to `pass`, a half-open link delivers what was sent meanwhile, a close included, in order (as TCP's
// retransmissions do when a partition heals before the connection times out): a session the server ended
// meanwhile (idle_in_transaction_session_timeout) is then closed on the client too.
import { createServer, connect, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';

export type RelayMode = 'pass' | 'cut' | 'half-open';

export interface PostgresRelay {
  /** `postgres://…` URL of `databaseUrl` with its host and port replaced by the relay's. */
  url: string;
  port: number;
  mode(): RelayMode;
  setMode(mode: RelayMode): void;
  /** Client connections open now. */
  open(): number;
  close(): Promise<void>;
}

export async function startPostgresRelay(databaseUrl: string): Promise<PostgresRelay> {
  const target = new URL(databaseUrl);
  let mode: RelayMode = 'pass';
  /** Per connection, per direction: what a half-open link holds back (data, then null for a close). */
  const links = new Set<{ client: Socket; upstream: Socket; flush: Array<() => void> }>();
  const server: Server = createServer((client) => {
    if (mode === 'cut') {
      client.resetAndDestroy();
      return;
    }
    const upstream = connect(Number(target.port || 5432), target.hostname);
    const link = { client, upstream, flush: [] as Array<() => void> };
    links.add(link);
    for (const [from, to] of [[client, upstream], [upstream, client]] as const) {
      const held: Array<Buffer | null> = [];
      const deliver = () => {
        for (const chunk of held.splice(0)) if (chunk === null) to.destroy();
        else to.write(chunk);
      };
      link.flush.push(deliver);
      from.on('data', (chunk: Buffer) => {
        if (mode === 'pass') to.write(chunk);
        else held.push(chunk);
      });
      from.on('error', () => undefined);
      from.on('close', () => {
        if (mode === 'pass') {
          links.delete(link);
          to.destroy();
        } else held.push(null);
      });
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const url = new URL(databaseUrl);
  url.hostname = '127.0.0.1';
  url.port = String(port);
  return {
    url: url.toString(),
    port,
    mode: () => mode,
    setMode(next) {
      mode = next;
      if (next === 'cut') {
        for (const { client, upstream } of links) (client.resetAndDestroy(), upstream.destroy());
        links.clear();
      }
      if (next === 'pass') for (const link of links) for (const deliver of link.flush) deliver();
    },
    open: () => links.size,
    close: () =>
      new Promise<void>((resolve) => {
        for (const { client, upstream } of links) (client.destroy(), upstream.destroy());
        server.close(() => resolve());
      }),
  };
}
