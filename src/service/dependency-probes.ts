/**
 * The service's outside dependencies, checked at start and periodically: Gitea, the
 * gitea-mcp command, and whether Codex is logged in. /readyz reads their last results; each change
 * is logged once (`probeChangeLog`).
 */
import { appServerStateHas } from '../../machines/app-server.js';
import type { Config } from '../config/index.js';
import type { GiteaClient } from '../gitea/gitea-client.js';
import { startDependencyProbe, type DependencyProbe } from '../health/dependency-probe.js';
import type { ReadinessPart } from '../health/readiness.js';
import { codexLoginPart, giteaPart, mcpPart } from '../health/service-probes.js';
import type { Logger } from '../observability/logger.js';
import type { AppServerSupervisor } from '../sessions/app-server-supervisor.js';

export interface ServiceProbes {
  gitea: DependencyProbe;
  mcp: DependencyProbe;
  codexLogin: DependencyProbe;
  stop(): void;
}

/**
 * The log line of a dependency's new result: info when it became ok, warn when it is not, debug
 * while it waits for what it is asked through (the app-server starting: every start, no problem).
 */
export function probeChangeLog(name: string, part: ReadinessPart): { level: 'debug' | 'info' | 'warn'; fields: Record<string, unknown>; msg: string } {
  return {
    level: part.ok ? 'info' : part.waiting ? 'debug' : 'warn',
    fields: { dependency: name, ok: part.ok, detail: part.detail },
    msg: `readiness: ${name} ${part.ok ? 'ok' : 'not ok'}`,
  };
}

export function startServiceProbes(deps: {
  config: Pick<Config, 'giteaUrl' | 'giteaToken' | 'giteaMcpCommand' | 'giteaMcpToken'>;
  gitea: Pick<GiteaClient, 'getVersion'>;
  /** The gitea-mcp arguments the sessions use. */
  mcpArgs: string[];
  supervisor: Pick<AppServerSupervisor, 'state' | 'connection'>;
  logger: Logger;
}): ServiceProbes {
  const { config, supervisor, logger } = deps;
  const onChange = (name: string) => (part: ReadinessPart) => {
    const line = probeChangeLog(name, part);
    logger[line.level](line.fields, line.msg);
  };
  const gitea = startDependencyProbe(() => giteaPart(deps.gitea), { intervalMs: 30_000, timeoutMs: 15_000, onChange: onChange('gitea') });
  const mcp = startDependencyProbe(
    () => mcpPart({ command: config.giteaMcpCommand, args: deps.mcpArgs, giteaUrl: config.giteaUrl, token: config.giteaMcpToken ?? config.giteaToken }, 20_000),
    { intervalMs: 5 * 60_000, timeoutMs: 30_000, onChange: onChange('mcp') },
  );
  const codexLogin = startDependencyProbe(
    async () => {
      // Asked only of a ready app-server (its own readiness part covers start-up and restarts).
      if (!appServerStateHas((await supervisor.state())?.state, 'serving')) return { ok: false, detail: 'waiting for the app-server', waiting: true };
      return codexLoginPart(await supervisor.connection({ timeoutMs: 5_000 }), 15_000);
    },
    { intervalMs: 5 * 60_000, retryMs: 5_000, timeoutMs: 30_000, onChange: onChange('codexLogin') },
  );
  return {
    gitea,
    mcp,
    codexLogin,
    stop() {
      for (const probe of [gitea, mcp, codexLogin]) probe.stop();
    },
  };
}
