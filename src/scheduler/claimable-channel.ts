import type { Tx } from '../store/types.js';
import { wakesScheduler } from './wake-decisions.js';

/**
 * Several nodes on one database: a transition that can make a claim possible anywhere (a task queued
 * or due for a retry, a repository lock freed) is announced on this channel in the transaction that makes it, so
 * every node's scheduler looks at once rather than at its next safety poll. A node at capacity whose
 * intake queued a task would otherwise leave an idle node waiting for it up to that long.
 */
export const CLAIMABLE_CHANNEL = 'ccweb_claimable';

/** For the runtime's `announce`: notifies CLAIMABLE_CHANNEL (PostgreSQL delivers it at commit, once per transaction). */
export async function announceClaimable(tx: Tx, change: { kind: string; toState: string }): Promise<void> {
  if (wakesScheduler(change)) await tx.notify(CLAIMABLE_CHANNEL, '');
}
