// Readiness of the service's outside dependencies, so that /readyz does not say ready while
// a task would fail on one (a missing gitea-mcp, a Codex that is not logged in). Each probe
// runs at start and then every `intervalMs` in the background; /readyz reads the last result, so it
// stays cheap and never waits on a slow dependency. Until the first result a part is not ready.
import type { ReadinessPart } from './readiness.js';

export interface DependencyProbe {
  /** The last result (not ready before the first one). */
  current(): ReadinessPart;
  /** Runs the probe now (also used at start); resolves with its result. */
  refresh(): Promise<ReadinessPart>;
  stop(): void;
}

export function startDependencyProbe(
  check: () => Promise<ReadinessPart>,
  /** `retryMs` (default 10 s): the next check after a failed one, so a recovery shows soon. */
  options: { intervalMs: number; timeoutMs: number; retryMs?: number; onChange?: (part: ReadinessPart) => void },
): DependencyProbe {
  let last: ReadinessPart = { ok: false, detail: 'not checked yet' };
  let inFlight: Promise<ReadinessPart> | null = null;
  const run = (): Promise<ReadinessPart> => {
    inFlight ??= (async () => {
      let timer: NodeJS.Timeout | undefined;
      let part: ReadinessPart;
      try {
        part = await Promise.race([
          check(),
          new Promise<ReadinessPart>((resolve) => {
            timer = setTimeout(() => resolve({ ok: false, detail: `no answer within ${options.timeoutMs} ms` }), options.timeoutMs);
          }),
        ]);
      } catch (error) {
        part = { ok: false, detail: (error instanceof Error ? error.message : String(error)).slice(0, 200) };
      } finally {
        clearTimeout(timer);
      }
      if (part.ok !== last.ok || part.detail !== last.detail) options.onChange?.(part);
      last = part;
      inFlight = null;
      return part;
    })();
    return inFlight;
  };
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const loop = () => {
    void run().then((part) => {
      if (stopped) return;
      timer = setTimeout(loop, part.ok ? options.intervalMs : (options.retryMs ?? 10_000));
      timer.unref();
    });
  };
  loop();
  return {
    current: () => last,
    refresh: run,
    stop: () => {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
