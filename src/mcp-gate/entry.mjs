// The gate process's first module (src/mcp-gate/gate-launch.ts names it as the thread's MCP command).
// Plain ESM so that it runs before any loader: it takes the token out of the process environment
// first, so no helper process started later (tsx's esbuild service from a checkout) inherits it; only
// the child gitea-mcp gets it, from runGate. Then it loads the compiled gate (dist/) or, in a
// checkout, the TypeScript through tsx.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const env = { ...process.env };
delete process.env.GITEA_ACCESS_TOKEN;

let gate;
if (existsSync(fileURLToPath(new URL('./main.js', import.meta.url)))) {
  gate = await import('./main.js');
} else {
  const { register } = await import('tsx/esm/api');
  register();
  gate = await import('./main.ts');
}
await gate.main(env);
