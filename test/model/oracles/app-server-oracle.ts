/**
 * Codex app-server supervisor oracle, written from spec §5.3.1–2 (one long-lived app-server,
 * initialised once; best-effort probes whose failure only records a downgrade), §8 ("Codex App 不可达":
 * the work is retried) and the supervisor's documented life (src/sessions/app-server-supervisor.ts
 * header, SESSIONS.md): START → spawned → initialized → ready; a probe failure is a downgrade,
 * recorded once per capability per process; the process dies → exited → a restart is scheduled with
 * backoff → due at or after its deadline → starting again; stop → closing (stdin closed, SIGTERM) →
 * closed once the process has exited; a later START brings it back.
 */
import type { AnyEventObject } from 'xstate';
import type { Oracle } from './oracle.js';

export interface AppServerSpecState {
  state: string;
  /** Capabilities downgraded since this process started. */
  downgrades: string[];
  restartAt: number | null;
}

const T0 = 1_700_000_000_000;

export const appServerOracle: Oracle<AppServerSpecState> = {
  name: 'app-server',
  source: 'spec §5.3.1–2, §8 (Codex App unreachable); app-server supervisor design (SESSIONS.md)',
  states: ['stopped', 'starting', 'initializing', 'ready', 'exited', 'restarting', 'closing', 'closed'],
  initial: () => ({ state: 'stopped', downgrades: [], restartAt: null }),
  alphabet(s) {
    const due = s.restartAt ?? T0;
    return [
      { type: 'START', now: T0 },
      { type: 'SPAWNED', pid: 4343, now: T0 },
      { type: 'INITIALIZED', now: T0, model: 'oracle-model', userAgent: 'codex/oracle' },
      { type: 'CAPABILITY_DOWNGRADE', capability: 'goals', reason: 'method not found' },
      { type: 'CAPABILITY_DOWNGRADE', capability: 'collaborationMode', reason: 'method not found' },
      { type: 'EXITED', code: 1, signal: null, reason: 'exited', now: T0 },
      { type: 'SCHEDULE_RESTART', now: T0, delayMs: 2_000 },
      { type: 'RESTART_DUE', now: due },
      { type: 'RESTART_DUE', now: due - 1 },
      { type: 'STOP', now: T0 },
    ];
  },
  next(s, e) {
    const to = (state: string, patch: Partial<AppServerSpecState> = {}): AppServerSpecState => ({ ...s, ...patch, state });
    const ev = e as AnyEventObject & { capability?: string; now?: number; delayMs?: number };
    const freshProcess = { downgrades: [], restartAt: null };
    const downgrade = () =>
      s.downgrades.includes(ev.capability!) ? null : to(s.state, { downgrades: [...s.downgrades, ev.capability!].sort() });
    switch (s.state) {
      case 'stopped':
        if (e.type === 'START') return to('starting', freshProcess);
        if (e.type === 'STOP') return to('closed');
        return null;
      case 'starting':
        if (e.type === 'SPAWNED') return to('initializing');
        if (e.type === 'EXITED') return to('exited'); // spawn failed / died at once
        if (e.type === 'STOP') return to('closing');
        return null;
      case 'initializing':
        if (e.type === 'INITIALIZED') return to('ready');
        if (e.type === 'CAPABILITY_DOWNGRADE') return downgrade();
        if (e.type === 'EXITED') return to('exited');
        if (e.type === 'STOP') return to('closing');
        return null;
      case 'ready':
        if (e.type === 'CAPABILITY_DOWNGRADE') return downgrade();
        if (e.type === 'EXITED') return to('exited');
        if (e.type === 'STOP') return to('closing');
        return null;
      case 'exited':
        if (e.type === 'SCHEDULE_RESTART') return to('restarting', { restartAt: ev.now! + ev.delayMs! });
        if (e.type === 'STOP') return to('closed');
        return null;
      case 'restarting':
        if (e.type === 'RESTART_DUE') return ev.now! >= s.restartAt! ? to('starting', freshProcess) : null;
        if (e.type === 'STOP') return to('closed', { restartAt: null });
        return null;
      case 'closing':
        return e.type === 'EXITED' ? to('closed') : null;
      case 'closed':
        return e.type === 'START' ? to('starting', freshProcess) : null;
      default:
        return null;
    }
  },
  value: (s) => s.state,
  key: (s) => JSON.stringify({ state: s.state, downgrades: s.downgrades, restart: s.restartAt !== null }),
  observe: (s) => ({ downgrades: s.downgrades, restartAt: s.restartAt }),
};
