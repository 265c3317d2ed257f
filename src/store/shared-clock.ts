import type { LeaseStore, Store } from './types.js';

/**
 * Now on the database's clock when the store has one (the SQL store: every node reads the same), else
 * on this process's. A time written by one node and compared by another is taken here, never from
 * a node's own clock, which may be set wrong.
 */
export async function sharedNow(store: Store): Promise<Date> {
  const clock = (store as Partial<LeaseStore>).clockMs;
  return new Date(typeof clock === 'function' ? await clock.call(store) : Date.now());
}
