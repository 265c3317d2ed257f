// The gate process (src/mcp-gate/gate-server.ts), started through entry.mjs, which hands over the
// environment it was started with (the token included) after taking the token out of process.env.
// Imports only the gate and node builtins, so it starts about as fast as Node itself.
import { gateEnvFrom, runGate } from './gate-server.js';

export async function main(env: NodeJS.ProcessEnv): Promise<never> {
  // Codex starts MCP servers in process groups of their own, so an app-server that is SIGKILLed
  // leaves them behind: exit once orphaned (the child gitea-mcp ends with its stdin).
  const parentPid = process.ppid;
  setInterval(() => {
    if (process.ppid !== parentPid) process.exit(0);
  }, 500).unref();
  try {
    await runGate(gateEnvFrom(env));
    process.exit(0);
  } catch (err) {
    process.stderr.write(`ccweb-gitea gate: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  }
}
