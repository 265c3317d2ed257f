// The environment the service gives the app-server and, through it, every command the agent runs.
//
// Without this the agent inherits the operator's shell: Codex's `exec_command` runs `bash -lc`, which
// sources the host's login profile (pyenv, conda, nvm, banners …) on every command — slow (a stale
// pyenv lock made each command wait 60 s) and a leak of the operator's environment into the agent.
// So the service decides: a private HOME with no profile, an explicit PATH, no login shell, no
// profile snapshot, and only Codex's "core" variables handed to commands.
import { chmodSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';

/** System directories every Unix host has; the running Node's own directory goes first. */
const SYSTEM_PATH = ['/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin'];

/** Variables that make a non-login, non-interactive shell read a file anyway (bash, sh). */
const SHELL_STARTUP_VARS = ['BASH_ENV', 'ENV'];

/**
 * `-c` overrides for `codex app-server` (the same keys as `config.toml`): applied to every thread,
 * whatever the operator's CODEX_HOME says.
 * - `allow_login_shell=false`: `exec_command` runs `bash -c`, never `bash -lc` (a model asking for a
 *   login shell is refused by Codex itself);
 * - `features.shell_snapshot=false`: Codex would otherwise start the user's login shell once per
 *   session to capture its environment;
 * - `shell_environment_policy.inherit="core"`: commands get HOME, PATH, USER, SHELL, TMPDIR, LANG …
 *   and nothing else of the app-server's environment (Codex adds its own CODEX_* markers).
 */
export const AGENT_SHELL_CONFIG_ARGS: readonly string[] = [
  '-c',
  'allow_login_shell=false',
  '-c',
  'features.shell_snapshot=false',
  '-c',
  'shell_environment_policy.inherit="core"',
];

/** Default PATH for the agent: the directory of the Node running the service, then the system's. */
export function defaultAgentPath(execPath: string = process.execPath): string {
  return [...new Set([dirname(execPath), ...SYSTEM_PATH])].join(delimiter);
}

export interface AgentHome {
  /** HOME of the app-server and the agent's commands: private (0700), no shell profile in it. */
  home: string;
  /** TMPDIR inside it. */
  tmp: string;
  /** Removes the folder if this module created it as a throwaway (no dataDir given). */
  dispose(): void;
}

/**
 * The agent's private HOME: `dir` (e.g. `<dataDir>/agent-home`) or, when none is given, a throwaway
 * folder under the system tmp. Created with mode 0700; nothing is written into it.
 */
export function prepareAgentHome(dir?: string): AgentHome {
  const throwaway = dir === undefined;
  const home = dir ?? mkdtempSync(join(tmpdir(), 'ccweb-agent-home-'));
  mkdirSync(home, { recursive: true, mode: 0o700 });
  chmodSync(home, 0o700);
  const tmp = join(home, 'tmp');
  mkdirSync(tmp, { recursive: true, mode: 0o700 });
  return {
    home,
    tmp,
    dispose: () => {
      if (!throwaway) return;
      // Codex's sandbox keeps bookkeeping under TMPDIR (codex-bwrap-synthetic-mount-targets-*) that a
      // process of a just-killed app-server may still be writing: a failed removal must never throw
      // out of the exit path (it would leave the connection's pending requests unanswered).
      try {
        rmSync(home, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 });
      } catch {
        /* a leftover folder under the system tmp, nothing worse */
      }
    },
  };
}

/**
 * The app-server's environment from the service's (already stripped of secrets): HOME, TMPDIR and
 * PATH replaced, shell start-up variables removed, and CODEX_HOME pinned to where the operator's
 * Codex configuration and login really are (the default `~/.codex` would otherwise follow the new HOME).
 */
export function agentProcessEnv(
  base: Record<string, string>,
  agent: { home: string; tmp: string; path: string },
): Record<string, string> {
  const out: Record<string, string> = { ...base };
  for (const k of SHELL_STARTUP_VARS) delete out[k];
  out['CODEX_HOME'] = base['CODEX_HOME'] ?? join(base['HOME'] ?? homedir(), '.codex');
  out['HOME'] = agent.home;
  out['TMPDIR'] = agent.tmp;
  out['PATH'] = agent.path;
  return out;
}
