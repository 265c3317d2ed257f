import type { Tx } from '../store/types.js';
import { wakesScheduler } from './wake-decisions.js';

/**
 * Several nodes on one database: a transition that can make a claim possible anywhere (a task queued
 * or due for a retry, a repository lock freed) is announced on this channel in the transaction that makes it, so
 * every node's scheduler looks at once rather than at its next safety poll. A node at capacity whose
 * intake queued a task would otherwise leave an idle node waiting for it up to that long.
 */
export const CLAIMABLE_CHANNEL = 'ccweb_claimable';

/**
 * The runtime's `announce` for this process (`owner`, the scheduler's lease owner, is the payload: a
 * node's scheduler ignores its own announcements, its runtime told it already). PostgreSQL delivers a
 * notification at commit, once per transaction.
 */
export function announceClaimable(owner: string): (tx: Tx, change: { kind: string; toState: string }) => Promise<void> {
  return async (tx, change) => {
    if (wakesScheduler(change)) await tx.notify(CLAIMABLE_CHANNEL, owner);
  };
}
