// `npm start`: the service for real deployments, configured by CCWEB_* variables and/or a JSON file.
import { ConfigError, loadConfig } from './config/index.js';
import { startService } from './service/create-service.js';

async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig({ env: process.env, argv: process.argv.slice(2) });
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`ccweb-gitea: configuration error\n${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const service = await startService({ config });
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

main().catch((err: unknown) => {
  process.stderr.write(`ccweb-gitea: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
