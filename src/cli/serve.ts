// `ccweb-gitea serve` / `npm start`: the service for real deployments, configured by CCWEB_*
// variables and/or a JSON file. Stops gracefully on SIGINT/SIGTERM.
import { ConfigError, loadConfig } from '../config/index.js';
import { IsolationUnavailableError } from '../isolation/service-isolation.js';
import { startService } from '../service/create-service.js';

export async function serve(argv: readonly string[]): Promise<void> {
  let config;
  try {
    config = loadConfig({ env: process.env, argv });
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`ccweb-gitea: configuration error\n${err.message}\nRun \`ccweb-gitea doctor\` to check the whole setup.\n`);
      process.exit(2);
    }
    throw err;
  }
  let service;
  try {
    service = await startService({ config });
  } catch (err) {
    if (err instanceof IsolationUnavailableError) {
      process.stderr.write(`ccweb-gitea: ${err.message}\nRun \`ccweb-gitea doctor\` to see every check.\n`);
      process.exit(2);
    }
    throw err;
  }
  let closing = false;
  const shutdown = (signal: string) => {
    if (closing) return;
    closing = true;
    service.logger.info({ signal }, 'shutting down');
    service
      .close()
      .then(() => process.exit(0))
      .catch((err: unknown) => {
        service.logger.error({ err }, 'shutdown failed');
        process.exit(1);
      });
  };
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));
}
