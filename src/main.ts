// `npm start`: the service for real deployments (same as `ccweb-gitea serve`). Operator mistakes are
// handled in serve (one line, documented exit code); what reaches here is a bug: exit 1 with the stack.
import { serve } from './cli/serve.js';

serve(process.argv.slice(2)).catch((err: unknown) => {
  process.stderr.write(`ccweb-gitea: unexpected error (a bug, please report it; exit 1): ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
