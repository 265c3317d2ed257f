// Readiness (`/readyz`): the service can take work only when the store still accepts a durable
// write and the Codex app-server is initialised. The write probe costs a journal line + fdatasync,
// so it runs at most once per interval; `store.sync()` (no write) catches a closed or fail-stopped
// store on every call, so a cached success can never hide a dead store.
import { appServerStateHas } from '../../machines/app-server.js';
import type { Store } from '../store/types.js';

/** The probe's record: one key in `control`, rewritten in place (compaction keeps one copy). */
export const READINESS_PROBE_KEY = 'readiness-probe';

/** `control` record `readiness-probe`: the last write that proved the store takes writes. */
export interface ReadinessProbeRecord {
  key: typeof READINESS_PROBE_KEY;
  probedAt: string;
}

export interface ReadinessPart {
  ok: boolean;
  detail: string;
  /** Not checked yet because what it is asked through is still starting: not a problem of its own. */
  waiting?: true;
}

export interface ReadinessReport {
  ready: boolean;
  store: ReadinessPart;
  appServer: ReadinessPart;
  /** Outside dependencies (Gitea, the MCP command, Codex's login), by name, when configured. */
  dependencies: Record<string, ReadinessPart>;
}

export interface ReadinessOptions {
  store: Pick<Store, 'transact' | 'sync'>;
  /** The app-server actor's state (`ready` when initialised), or undefined before it exists. */
  appServerState: () => string | undefined;
  /** Outside dependencies: their last probe results (see dependency-probe.ts). */
  dependencies?: Record<string, () => ReadinessPart>;
  /** Minimum time between two write probes. Default 5000 ms. */
  probeIntervalMs?: number;
  now?: () => number;
}

export interface Readiness {
  check(): Promise<ReadinessReport>;
}

function message(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).slice(0, 200);
}

export function createReadiness(options: ReadinessOptions): Readiness {
  const now = options.now ?? Date.now;
  const interval = options.probeIntervalMs ?? 5000;
  let lastWriteAt = Number.NEGATIVE_INFINITY;
  let inFlight: Promise<void> | null = null;

  const writeProbe = (): Promise<void> => {
    inFlight ??= options.store
      .transact(async (tx) => {
        await tx.put<ReadinessProbeRecord>('control', READINESS_PROBE_KEY, { key: READINESS_PROBE_KEY, probedAt: new Date(now()).toISOString() });
      })
      .then(() => {
        lastWriteAt = now();
      })
      .finally(() => {
        inFlight = null;
      });
    return inFlight;
  };

  async function storePart(): Promise<ReadinessPart> {
    try {
      await options.store.sync();
      if (now() - lastWriteAt >= interval) await writeProbe();
      return { ok: true, detail: 'accepts durable writes' };
    } catch (err) {
      return { ok: false, detail: message(err) };
    }
  }

  return {
    async check() {
      const store = await storePart();
      const state = options.appServerState();
      const appServer: ReadinessPart = appServerStateHas(state, 'serving') ? { ok: true, detail: 'initialized' } : { ok: false, detail: `state ${state ?? 'not started'}` };
      const dependencies: Record<string, ReadinessPart> = {};
      for (const [name, current] of Object.entries(options.dependencies ?? {})) dependencies[name] = current();
      const ready = store.ok && appServer.ok && Object.values(dependencies).every((p) => p.ok);
      return { ready, store, appServer, dependencies };
    },
  };
}
