// `ccweb-gitea serve` / `npm start`: the service for real deployments, configured by CCWEB_*
// variables and/or a JSON file. Operator mistakes end it with one line (cause, key, fix) and a
// documented exit code (src/service/operator-error.ts, docs/operations.md); SIGINT/SIGTERM stop it
// gracefully within SHUTDOWN_DEADLINE_MS, also while it is still starting.
import { ConfigError, loadConfig } from '../config/index.js';
import { weakSecretProblems } from '../config/secret-strength.js';
import { StartAborted, startService } from '../service/create-service.js';
import { nodeVersionWarning } from '../service/node-version.js';
import { EXIT_CODES, OperatorError, formatOperatorError } from '../service/operator-error.js';
import { START_REFUSALS } from '../service/start-refusals.js';
import { StoreUnavailableError } from '../store/types.js';

/** How long a graceful stop may take before the process exits anyway (systemd's default stop timeout is 90 s). */
export const SHUTDOWN_DEADLINE_MS = 20_000;

export const ALLOW_WEAK_SECRETS_FLAG = '--allow-weak-secrets';

function fail(lines: string, code: number): never {
  process.stderr.write(lines.endsWith('\n') ? lines : `${lines}\n`);
  process.exit(code);
}
import { IsolationUnavailableError } from '../isolation/service-isolation.js';

export async function serve(argv: readonly string[]): Promise<void> {
  const oldNode = nodeVersionWarning(process.version);
  if (oldNode) process.stderr.write(`${oldNode}\n`);
  let config;
  try {
    config = loadConfig({ env: process.env, argv: argv.filter((a) => a !== ALLOW_WEAK_SECRETS_FLAG) });
  } catch (err) {
    if (err instanceof ConfigError) {
      // One line per problem (a config file may hold several); `doctor` checks everything else.
      const { exitCode } = START_REFUSALS.config_invalid;
      fail(err.problems.map((p) => `ccweb-gitea: configuration error: ${p} (exit ${exitCode}; \`ccweb-gitea doctor\` checks the whole setup)`).join('\n'), exitCode);
    }
    throw err;
  }
  if (!argv.includes(ALLOW_WEAK_SECRETS_FLAG)) {
    const weak = weakSecretProblems(config);
    const { exitCode } = START_REFUSALS.weak_secret;
    if (weak.length > 0) fail(weak.map((p) => `ccweb-gitea: weak secret: ${p} (exit ${exitCode})`).join('\n'), exitCode);
  }

  // Signals are handled from here on: a stop during start-up (e.g. while waiting for Gitea) is a stop too.
  const starting = new AbortController();
  let stop: ((signal: string) => void) | null = null;
  let closing = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (closing) return;
    closing = true;
    // A second signal, or a stuck drain, must not keep the port and the data directory forever.
    const deadline = setTimeout(() => {
      process.stderr.write(`ccweb-gitea: stopping took longer than ${SHUTDOWN_DEADLINE_MS} ms; exiting anyway (exit ${EXIT_CODES.shutdownTimeout})\n`);
      process.exit(EXIT_CODES.shutdownTimeout);
    }, SHUTDOWN_DEADLINE_MS);
    deadline.unref();
    if (stop) stop(signal);
    else starting.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  let service;
  try {
    service = await startService({ config, signal: starting.signal });
  } catch (err) {
    if (err instanceof StartAborted) process.exit(0);
    if (err instanceof OperatorError) fail(formatOperatorError(err), err.exitCode);
    // Agent isolation keeps its own documented answer: the reason, both ways out, exit 2.
    if (err instanceof IsolationUnavailableError) fail(`ccweb-gitea: ${err.message}\nRun \`ccweb-gitea doctor\` to see every check.`, START_REFUSALS.agent_isolation_unavailable.exitCode);
    // The database went away after the store opened, while the rest started: what a running node
    // does then (exit 75, a supervisor starts it again), not a bug.
    if (err instanceof StoreUnavailableError) fail(`ccweb-gitea: the store stopped: ${err.message}; exiting (${EXIT_CODES.tempFail}) so a restart reads what the store holds`, EXIT_CODES.tempFail);
    throw err;
  }
  const running = service;
  stop = (signal) => {
    running.logger.info({ signal }, 'shutting down');
    running
      .close()
      .then(() => process.exit(0))
      .catch((err: unknown) => {
        running.logger.error({ err }, 'shutdown failed');
        process.exit(1);
      });
  };
  if (closing) stop('SIGTERM');
}
