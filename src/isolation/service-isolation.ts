// The service's side of agent isolation: the sandbox built from the configuration, the start-up
// check (refuse to start when it does not hold, unless CCWEB_AGENT_ISOLATION=off), and the status
// doctor and the admin page show.
import { homedir } from 'node:os';
import { join } from 'node:path';
import { AGENT_SHELL_CONFIG_ARGS, defaultAgentPath } from '../codex/agent-environment.js';
import type { CodexConnectionOptions } from '../codex/jsonrpc-connection.js';
import type { Config } from '../config/index.js';
import { detectContainment, type Containment } from './agent-containment.js';
import { createAgentSandbox, type AgentSandbox } from './agent-sandbox.js';
import { ISOLATION_FIX, probeAgentIsolation, type ProbeCheck } from './isolation-probe.js';

export interface AgentIsolationStatus {
  /** `on`: verified on this host at start; `off`: the operator's explicit choice. */
  mode: 'on' | 'off';
  network: 'on' | 'off';
  /** Set when mode is off: said on every start, by doctor and on the admin page. */
  warning: string | null;
  checks: ProbeCheck[];
  deniedPaths: string[];
}

export const ISOLATION_OFF_WARNING =
  "agent isolation is OFF (CCWEB_AGENT_ISOLATION=off): the agent's commands run with the service user's full access — " +
  'a prompt injection in an issue or a repository file can read the bot token, the webhook secret, the data directory ' +
  'and other repositories. Turn it back on (unset CCWEB_AGENT_ISOLATION) once the host supports user namespaces.';

export class IsolationUnavailableError extends Error {
  override readonly name = 'IsolationUnavailableError';
  constructor(
    readonly summary: string,
    readonly checks: ProbeCheck[],
    /** What the probe found (isolation-probe.ts): the sandbox fails, or the app-server did not start. */
    readonly failure: 'sandbox' | 'app-server' = 'sandbox',
    readonly fix: string = ISOLATION_FIX,
  ) {
    const what = failure === 'sandbox' ? 'agent isolation does not hold on this host' : 'agent isolation could not be checked';
    super(`${what} (${summary}); the service will not start. Fix: ${fix}`);
  }
}

/** CODEX_HOME as the app-server sees it: its environment's CODEX_HOME, else `<HOME>/.codex`. */
export function codexHomeOf(connection: Pick<CodexConnectionOptions, 'env' | 'extraEnv'>): string {
  const env = { ...(connection.env ?? process.env), ...(connection.extraEnv ?? {}) };
  return env['CODEX_HOME'] || join(env['HOME'] || homedir(), '.codex');
}

export function agentSandboxFromConfig(config: Config, connection: Pick<CodexConnectionOptions, 'env' | 'extraEnv' | 'command'>): AgentSandbox {
  return createAgentSandbox({
    isolation: config.agentIsolation,
    network: config.agentNetwork,
    dataDir: config.dataDir,
    workspaceRoot: config.workspaceRoot,
    codexHome: codexHomeOf(connection),
    codexCommand: connection.command ?? config.codexCommand,
    hiddenPaths: [...(config.configFile ? [config.configFile] : []), ...config.secretFiles, ...config.agentHidePaths],
  });
}

/**
 * How the service starts its app-server — one definition for the service, its start-up probe and
 * doctor's probe, so what is checked is what runs.
 */
export function serviceCodexSetup(
  config: Config,
  opts: { env?: Record<string, string | undefined>; codexEnv?: Record<string, string> } = {},
): { sandbox: AgentSandbox; connection: CodexConnectionOptions; containment: Containment } {
  const base = { command: config.codexCommand, env: opts.env ?? process.env, ...(opts.codexEnv ? { extraEnv: opts.codexEnv } : {}) };
  const sandbox = agentSandboxFromConfig(config, base);
  // The app-server in a PID namespace of its own that dies with the service (agent-containment.ts).
  const containment = detectContainment({ env: base.env as NodeJS.ProcessEnv });
  return {
    sandbox,
    containment,
    connection: {
      ...base,
      ...(containment.launcher.length > 0 ? { launcher: containment.launcher } : {}),
      args: ['app-server', ...AGENT_SHELL_CONFIG_ARGS, ...sandbox.appServerArgs()],
      agentHome: join(config.dataDir, 'agent-home'),
      agentPath: sandbox.pathWithHelpers(config.agentPath ?? defaultAgentPath()),
    },
  };
}

interface WarnLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

/**
 * Isolation on: prepares the sandbox and proves it with the probe, or throws
 * IsolationUnavailableError. Off: warns (every start) and returns the status carrying the warning.
 */
export async function verifyAgentIsolation(
  sandbox: AgentSandbox,
  connection: CodexConnectionOptions,
  logger: WarnLogger,
  opts: { timeoutMs?: number } = {},
): Promise<AgentIsolationStatus> {
  if (sandbox.isolation === 'off') {
    logger.warn({ agentIsolation: 'off' }, ISOLATION_OFF_WARNING);
    return { mode: 'off', network: sandbox.network, warning: ISOLATION_OFF_WARNING, checks: [], deniedPaths: [] };
  }
  const result = await probeAgentIsolation(sandbox, { connection, codexHome: codexHomeOf(connection), ...(opts.timeoutMs ? { timeoutMs: opts.timeoutMs } : {}) });
  if (!result.ok) throw new IsolationUnavailableError(result.summary, result.checks, result.cause ?? 'sandbox', result.fix);
  logger.info({ agentIsolation: 'on', agentNetwork: sandbox.network, durationMs: result.durationMs, denied: sandbox.deniedPaths() }, 'agent isolation verified');
  return { mode: 'on', network: sandbox.network, warning: null, checks: result.checks, deniedPaths: sandbox.deniedPaths() };
}
