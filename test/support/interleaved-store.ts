// A store with another writer's commit placed at one chosen moment, for tests of code that reads
// and then decides in a transaction.
import type { Store } from '../../src/store/types.js';

/**
 * The store, with `write` committed just before the first transaction run through it: another
 * writer landing between what the code under test read first and the transaction that decides on
 * it, a moment a real race reaches but a test cannot aim at otherwise. Everything else is the
 * store itself.
 */
export function writeBeforeFirstTransaction(store: Store, write: () => Promise<unknown>): Store {
  let pending: (() => Promise<unknown>) | null = write;
  return new Proxy(store, {
    get(target, prop) {
      if (prop === 'transact') {
        return async (fn: Parameters<Store['transact']>[0]) => {
          const w = pending;
          pending = null;
          await w?.();
          return target.transact(fn);
        };
      }
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}
