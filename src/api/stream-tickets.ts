import { createHash, randomBytes } from 'node:crypto';
import type { Store } from '../store/types.js';

/**
 * One-use tickets that open a live-event stream (a browser's EventSource cannot send the admin token).
 * They are kept in the store, so a ticket one node issued opens the stream on whichever node behind
 * the same URL the browser reaches next. Only a ticket's hash is stored: a row read from the store or
 * a backup opens nothing.
 */
export interface StreamTickets {
  /** A new ticket, or null when `max` unexpired ones exist already. */
  issue(at: number): Promise<{ ticket: string; expiresAt: number } | null>;
  /** True once for a ticket that was issued and has not expired; it is used up either way. */
  redeem(ticket: string, at: number): Promise<boolean>;
}

interface StreamTicketRecord {
  key: string;
  kind: 'stream_ticket';
  expiresAt: number;
}

const PREFIX = 'stream-ticket:';
const keyOf = (ticket: string) => PREFIX + createHash('sha256').update(ticket).digest('base64url');
const isTicket = (r: { key?: unknown }): boolean => typeof r.key === 'string' && r.key.startsWith(PREFIX);

export function storeStreamTickets(store: Store, options: { ttlMs: number; max: number }): StreamTickets {
  return {
    async issue(at) {
      const ticket = randomBytes(32).toString('base64url');
      const expiresAt = at + options.ttlMs;
      const issued = await store.transact(async (tx) => {
        const live: StreamTicketRecord[] = [];
        for (const r of await tx.list<StreamTicketRecord>('control', isTicket)) {
          if (r.expiresAt <= at) await tx.delete('control', r.key);
          else live.push(r);
        }
        if (live.length >= options.max) return false;
        const key = keyOf(ticket);
        await tx.insert<StreamTicketRecord>('control', key, { key, kind: 'stream_ticket', expiresAt });
        return true;
      });
      return issued ? { ticket, expiresAt } : null;
    },
    async redeem(ticket, at) {
      const key = keyOf(ticket);
      return store.transact(async (tx) => {
        const r = await tx.get<StreamTicketRecord>('control', key);
        if (!r) return false;
        await tx.delete('control', key);
        return r.expiresAt > at;
      });
    },
  };
}
