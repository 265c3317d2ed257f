// `npm start`: the service for real deployments (same as `ccweb-gitea serve`).
import { serve } from './cli/serve.js';

serve(process.argv.slice(2)).catch((err: unknown) => {
  process.stderr.write(`ccweb-gitea: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
