// Runs the agent-isolation probe once and prints its result as JSON: for tests that run it inside
// `unshare` (a host without user namespaces), where the test process itself cannot go.
// argv: <root> (a fresh directory: data dir, CODEX_HOME without config.toml)
import { detectContainment } from '../../src/isolation/agent-containment.js';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { AGENT_SHELL_CONFIG_ARGS, defaultAgentPath } from '../../src/codex/agent-environment.js';
import { resolveBundledCodex } from '../../src/codex/codex-binary.js';
import { createAgentSandbox } from '../../src/isolation/agent-sandbox.js';
import { probeAgentIsolation } from '../../src/isolation/isolation-probe.js';

const root = process.argv[2]!;
const codexHome = join(root, 'codex-home');
mkdirSync(codexHome, { recursive: true });
const sandbox = createAgentSandbox({
  isolation: 'on',
  network: 'off',
  dataDir: join(root, 'data'),
  workspaceRoot: join(root, 'data', 'workspaces'),
  codexHome,
  codexCommand: resolveBundledCodex().command,
});
const result = await probeAgentIsolation(sandbox, {
  connection: {
    launcher: detectContainment().launcher,
    args: ['app-server', ...AGENT_SHELL_CONFIG_ARGS, ...sandbox.appServerArgs()],
    agentHome: join(root, 'data', 'agent-home'),
    agentPath: sandbox.pathWithHelpers(defaultAgentPath()),
    extraEnv: { CODEX_HOME: codexHome },
  },
  codexHome,
});
process.stdout.write(`${JSON.stringify(result)}\n`);
