import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { onTestFinished } from 'vitest';
import { STORE_INDEXES } from '../../src/domain/records.js';
import { ActorRuntime, type ActorKind } from '../../src/runtime/actor-runtime.js';
import { createSqliteStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/types.js';

/**
 * A real store in a fresh temp directory and a runtime hosting the given actor kinds. `clockMs`: the
 * clock the store judges leases by (a test's hand-moved clock; SQLite's own otherwise).
 */
export async function createTestRuntime(kinds: ActorKind[], dir = mkdtempSync(join(tmpdir(), 'ccweb-test-')), options: { clockMs?: () => number } = {}): Promise<{
  dir: string;
  store: Store;
  runtime: ActorRuntime;
  /** Stops actors and closes the store; `remove` also deletes the directory. */
  close: (remove?: boolean) => Promise<void>;
}> {
  const store = createSqliteStore({ dir, indexes: STORE_INDEXES, ...(options.clockMs ? { clockMs: options.clockMs } : {}) });
  await store.open();
  const runtime = new ActorRuntime({ store, kinds });
  return {
    dir,
    store,
    runtime,
    close: async (remove = true) => {
      await runtime.settled();
      runtime.stopAll();
      await store.close();
      if (remove) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A real, empty store for one test: closed, and its folder removed, when the test ends (passed or failed). */
export async function storeForTest(): Promise<Store> {
  const rt = await createTestRuntime([]);
  onTestFinished(() => rt.close());
  return rt.store;
}
