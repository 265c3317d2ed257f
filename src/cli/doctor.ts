// `ccweb-gitea doctor`: checks everything the service needs before it can answer a comment, one
// line per check with the fix. Read-only except for a probe file in the data and workspace
// directories (created and removed) and the agent sandbox's folders under the data directory. Every line is scrubbed of the configured secrets.
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { isAlive } from '../store/process-lock.js';
import { join } from 'node:path';
import { execa } from 'execa';
import { CodexAppServerConnection, errorText } from '../codex/jsonrpc-connection.js';
import { bundledCodexCommand, ConfigError, loadConfig, type Config } from '../config/index.js';
import { createGiteaClient, GiteaError } from '../gitea/index.js';
import { agentTokenAdvice, probeTokenScopes } from '../gitea/token-scopes.js';
import { scrubText } from '../observability/logger.js';
import { probeGatedMcp } from '../sessions/mcp-preflight.js';
import GITEA_MCP_PIN from '../config/gitea-mcp-pin.json' with { type: 'json' };
import { checkCodexAccount } from './doctor-codex-account.js';
import { ISOLATION_FIX, probeAgentIsolation } from '../isolation/isolation-probe.js';
import { codexHomeOf, ISOLATION_OFF_WARNING, serviceCodexSetup } from '../isolation/service-isolation.js';

export type CheckStatus = 'ok' | 'warn' | 'fail' | 'skip';

export interface CheckResult {
  status: CheckStatus;
  check: string;
  detail: string;
  /** What to do about it; shown for everything but `ok`. */
  fix?: string;
}

export const DOCTOR_CHECKS = [
  'config',
  'git',
  'codex',
  'codex-account',
  'agent-isolation',
  'gitea-mcp',
  'gitea',
  'token-scope',
  'token-scopes',
  'webhook-secret',
  'data-dir',
  'workspace-root',
  'store-lock',
] as const;
export type DoctorCheck = (typeof DOCTOR_CHECKS)[number];
/** The checks after codex-account read the configuration: skipped when it does not load. */
const NEED_CONFIG = DOCTOR_CHECKS.slice(DOCTOR_CHECKS.indexOf('agent-isolation'));

export interface DoctorOptions {
  env: Readonly<Record<string, string | undefined>>;
  /** `--config PATH` etc., as for `serve`. */
  argv?: readonly string[];
  cwd?: string;
  /** `owner/name`: check the token can read this repository's collaborators. */
  repo?: string;
  skip?: ReadonlySet<string>;
  /** Per network/process check. Default 20 s. */
  timeoutMs?: number;
  /** Called as each check finishes (the CLI prints as it goes). */
  onResult?: (r: CheckResult) => void;
}

const MIN_SECRET_LENGTH = 16;

/** `ok    gitea  reachable …  → fix` — the fix arrow only where there is something to do. */
export function formatCheck(r: CheckResult): string {
  const head = `${r.status.padEnd(5)} ${r.check.padEnd(15)} ${r.detail}`;
  return r.status === 'ok' || !r.fix ? head : `${head}  → ${r.fix}`;
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

function writable(dir: string): string | null {
  try {
    mkdirSync(dir, { recursive: true });
    const probe = join(dir, `.ccweb-doctor-${process.pid}`);
    writeFileSync(probe, 'probe');
    rmSync(probe);
    return null;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code ?? 'error';
  }
}

async function checkGit(): Promise<CheckResult> {
  try {
    const { stdout } = await execa('git', ['--version']);
    return { status: 'ok', check: 'git', detail: stdout.trim() };
  } catch {
    return { status: 'fail', check: 'git', detail: 'git not found on PATH', fix: 'install git (apt install git) and make sure the service user can run it' };
  }
}

/** The Codex version `src/codex/protocol` was generated from (`codex-cli X.Y.Z`). */
function generatedProtocolVersion(): string | null {
  try {
    const text = readFileSync(new URL('../codex/protocol/VERSION', import.meta.url), 'utf8');
    return /codex-cli\s+(\S+)/.exec(text)?.[1] ?? null;
  } catch {
    return null;
  }
}

async function checkCodex(command: string, env: DoctorOptions['env'], timeoutMs: number): Promise<CheckResult> {
  // Codex exits 1 at start when its home is missing, which reads like a broken binary (issue 32): name the
  // folder instead. A fresh install has none until `codex login` (or systemd's StateDirectory=) makes it.
  const codexHome = codexHomeOf({ env: { ...env } });
  if (!existsSync(codexHome)) {
    return {
      status: 'fail',
      check: 'codex',
      detail: `CODEX_HOME ${codexHome} does not exist`,
      fix: `create it as the service user (\`mkdir -m 700 ${codexHome}\`) and log in there: \`CODEX_HOME=${codexHome} npx codex login\` from the service's folder (docs/operations.md#codex)`,
    };
  }
  const conn = new CodexAppServerConnection({
    command,
    env: { ...env },
    probes: false,
    initializeTimeoutMs: timeoutMs,
    probeTimeoutMs: Math.min(timeoutMs, 10_000),
  });
  try {
    await withTimeout(conn.start(), timeoutMs + 1000, 'codex app-server');
    const agent = conn.initializeResult?.userAgent ?? 'unknown user agent';
    const home = conn.initializeResult?.codexHome;
    const model = conn.model ? `model ${conn.model}` : 'model: Codex default';
    const detail = `app-server answered initialize: ${agent}; ${model}${home ? `; CODEX_HOME ${home}` : ''}`;
    // userAgent is `<client name>/<codex version> (…)`; the protocol types were generated from one version.
    const running = /^[^/\s]+\/(\d+\.\d+\.\d+\S*)/.exec(agent)?.[1];
    const generated = generatedProtocolVersion();
    if (running && generated && running !== generated) {
      return {
        status: 'warn',
        check: 'codex',
        detail: `${detail}; protocol types were generated from ${generated}, the binary is ${running}`,
        fix: 'use the bundled @openai/codex (unset CCWEB_CODEX_COMMAND) or regenerate with npm run gen:codex-protocol',
      };
    }
    return { status: 'ok', check: 'codex', detail };
  } catch (err) {
    return {
      status: 'fail',
      check: 'codex',
      detail: `\`${command} app-server\` did not initialize: ${errorText(err).slice(0, 200)}`,
      fix: 'set CCWEB_CODEX_COMMAND to a working codex binary (or reinstall @openai/codex) and check CODEX_HOME/config.toml',
    };
  } finally {
    await conn.close({ graceMs: 200, termMs: 1000 }).catch(() => undefined);
  }
}

/** The service's own start-up probe: same app-server command, arguments, environment and profile. */
async function checkAgentIsolation(config: Config, env: DoctorOptions['env'], timeoutMs: number): Promise<CheckResult> {
  if (config.agentIsolation === 'off') {
    return { status: 'warn', check: 'agent-isolation', detail: ISOLATION_OFF_WARNING, fix: 'unset CCWEB_AGENT_ISOLATION (see docs/security.md#opting-out)' };
  }
  const { sandbox, connection } = serviceCodexSetup(config, { env: { ...env } });
  const r = await probeAgentIsolation(sandbox, { connection, codexHome: codexHomeOf(connection), timeoutMs });
  if (!r.ok) return { status: 'fail', check: 'agent-isolation', detail: r.summary, fix: ISOLATION_FIX };
  return {
    status: 'ok',
    check: 'agent-isolation',
    detail: `a probe command ran in the agent sandbox (${r.durationMs} ms): ${r.checks.map((c) => c.detail).join('; ')}; network ${sandbox.network}; hidden: ${sandbox.deniedPaths().join(', ')}`,
  };
}

async function checkMcp(config: Config, timeoutMs: number, pathEnv: string | undefined): Promise<CheckResult> {
  // As the agent gets it: the gate with gitea-mcp as its child, with the token the agent's gitea-mcp uses.
  const result = await probeGatedMcp(
    { command: config.giteaMcpCommand, args: ['-t', 'stdio', '-host', config.giteaUrl], giteaUrl: config.giteaUrl, token: config.giteaMcpToken ?? config.giteaToken },
    { timeoutMs, ...(pathEnv !== undefined ? { pathEnv } : {}) },
  );
  if (!result.ok) {
    const fix =
      result.errorCode === 'mcp_command_missing'
        ? `install gitea-mcp ${GITEA_MCP_PIN.revision} (\`node scripts/install-gitea-mcp.mjs --to /usr/local/bin\`) and set CCWEB_GITEA_MCP_COMMAND to its path`
        : 'run the command by hand with `-t stdio -host <url>` and read its error; check it is the official gitea-mcp';
    return { status: 'fail', check: 'gitea-mcp', detail: `${result.errorCode}: ${result.reason}`, fix };
  }
  const version = result.serverVersion ?? 'unknown version';
  const detail = `${config.giteaMcpCommand} ${version} behind the gate: MCP handshake ok, ${result.tools.length} tools offered to the agent`;
  if (!result.hasCommentTool) {
    return { status: 'warn', check: 'gitea-mcp', detail: `${detail}, but no comment tool (issue_write add_comment / create_issue_comment)`, fix: 'use the pinned gitea-mcp; without a comment tool every reply goes through the REST fallback' };
  }
  if (result.serverVersion !== GITEA_MCP_PIN.version) {
    return { status: 'warn', check: 'gitea-mcp', detail: `${detail}; the service is tested with ${GITEA_MCP_PIN.version}`, fix: `install the pinned revision: node scripts/install-gitea-mcp.mjs --to /usr/local/bin` };
  }
  return { status: 'ok', check: 'gitea-mcp', detail };
}

async function checkGitea(config: Config, timeoutMs: number): Promise<{ result: CheckResult; login: string | null }> {
  const gitea = createGiteaClient({ baseUrl: config.giteaUrl, token: config.giteaToken, timeoutMs, retries: 0 });
  try {
    const user = await gitea.getCurrentUser();
    const login = user.login ?? null;
    if (config.botLogin && login !== config.botLogin) {
      return {
        login,
        result: {
          status: 'warn',
          check: 'gitea',
          detail: `token belongs to ${login ?? '?'}, not CCWEB_BOT_LOGIN=${config.botLogin}`,
          fix: 'use a token of the bot account, or set CCWEB_BOT_LOGIN to the token’s login (or unset it to learn it)',
        },
      };
    }
    return { login, result: { status: 'ok', check: 'gitea', detail: `${config.giteaUrl} reachable; token valid for ${login ?? '?'}` } };
  } catch (err) {
    const code = err instanceof GiteaError ? err.code : 'error';
    const fix =
      code === 'gitea_unauthorized'
        ? 'the token is wrong, expired or revoked: create a new one for the bot (Settings → Applications, scopes write:issue, read:repository, read:user) and set CCWEB_GITEA_TOKEN'
        : code === 'gitea_forbidden'
          ? 'the token lacks the read:user scope: create one with write:issue, read:repository, read:user'
          : `check CCWEB_GITEA_URL (${config.giteaUrl}) and that this host can reach it`;
    return { login: null, result: { status: 'fail', check: 'gitea', detail: `GET /api/v1/user failed: ${code}`, fix } };
  }
}

async function checkTokenScope(config: Config, repo: string | undefined, login: string | null, timeoutMs: number): Promise<CheckResult> {
  if (!repo) return { status: 'skip', check: 'token-scope', detail: 'no repository given', fix: 'pass --repo owner/name to check the token can read its collaborators' };
  const [owner, name] = repo.split('/');
  if (!owner || !name) return { status: 'fail', check: 'token-scope', detail: `--repo ${repo} is not owner/name`, fix: 'pass --repo owner/name' };
  const user = config.botLogin ?? login;
  if (!user) return { status: 'skip', check: 'token-scope', detail: 'bot login unknown (the gitea check failed)', fix: 'fix the gitea check first' };
  const gitea = createGiteaClient({ baseUrl: config.giteaUrl, token: config.giteaToken, timeoutMs, retries: 0 });
  try {
    const p = await gitea.getCollaboratorPermission(owner, name, user);
    const perm = String(p.permission);
    if (perm === 'none' || perm === 'read') {
      return { status: 'warn', check: 'token-scope', detail: `${user} has ${perm} permission on ${repo}`, fix: `add ${user} as a collaborator with write access so it can comment and fetch` };
    }
    return { status: 'ok', check: 'token-scope', detail: `${user} has ${perm} permission on ${repo}` };
  } catch (err) {
    const code = err instanceof GiteaError ? err.code : 'error';
    return {
      status: 'fail',
      check: 'token-scope',
      detail: `GET /repos/${repo}/collaborators/${user}/permission failed: ${code}`,
      fix: code === 'gitea_not_found' ? `check the repository name and that ${user} can see it` : 'give the token the read:repository scope and the bot access to the repository',
    };
  }
}

/** Which scopes each token holds (Gitea names them when it refuses a scope), and whether the agent's is narrow. */
async function checkTokenScopes(config: Config, timeoutMs: number): Promise<CheckResult> {
  const bot = await probeTokenScopes({ baseUrl: config.giteaUrl, token: config.giteaToken, timeoutMs });
  const agent = config.giteaMcpToken ? await probeTokenScopes({ baseUrl: config.giteaUrl, token: config.giteaMcpToken, timeoutMs }) : null;
  const show = (r: Awaited<ReturnType<typeof probeTokenScopes>>) => (r.ok ? r.scopes.join(', ') || '(none)' : `unknown (${r.reason})`);
  const detail = `CCWEB_GITEA_TOKEN: ${show(bot)}; ${agent ? `CCWEB_GITEA_MCP_TOKEN: ${show(agent)}` : 'CCWEB_GITEA_MCP_TOKEN unset: the agent uses CCWEB_GITEA_TOKEN behind the gate'}`;
  const agentScopes = agent ?? bot;
  if (!agentScopes.ok) return { status: 'warn', check: 'token-scopes', detail, fix: 'check the token is valid for CCWEB_GITEA_URL' };
  const advice = agentTokenAdvice(agentScopes.scopes);
  if (advice.status === 'ok') return { status: 'ok', check: 'token-scopes', detail: `${detail}; the agent's token: ${advice.detail}` };
  return {
    status: 'warn',
    check: 'token-scopes',
    detail: `${detail}; the agent's token: ${advice.detail}`,
    fix: `${advice.fix ?? ''}${agent ? '' : ' Then set CCWEB_GITEA_MCP_TOKEN (or CCWEB_GITEA_MCP_TOKEN_FILE) to it.'}`.trim(),
  };
}

function checkSecret(config: Config): CheckResult {
  const short = config.webhookSecret.filter((s) => s.length < MIN_SECRET_LENGTH).length;
  if (short > 0) {
    return {
      status: 'warn',
      check: 'webhook-secret',
      detail: `${short} of ${config.webhookSecret.length} secret(s) shorter than ${MIN_SECRET_LENGTH} characters`,
      fix: 'use a long random secret (`openssl rand -hex 32`) in both Gitea’s webhook and CCWEB_WEBHOOK_SECRET',
    };
  }
  return { status: 'ok', check: 'webhook-secret', detail: `${config.webhookSecret.length} secret(s) set, each ≥ ${MIN_SECRET_LENGTH} characters` };
}

function checkDir(check: 'data-dir' | 'workspace-root', dir: string, key: string): CheckResult {
  const problem = writable(dir);
  if (problem) return { status: 'fail', check, detail: `${dir} is not writable (${problem})`, fix: `create it and give the service user write access, or point ${key} elsewhere` };
  return { status: 'ok', check, detail: `${dir} writable` };
}

function checkStoreLock(dataDir: string): CheckResult {
  const lock = join(dataDir, 'store', 'LOCK');
  if (!existsSync(lock)) return { status: 'ok', check: 'store-lock', detail: 'store not in use' };
  const pid = Number(readFileSync(lock, 'utf8'));
  if (Number.isInteger(pid) && pid > 0 && isAlive(pid)) {
    return {
      status: 'warn',
      check: 'store-lock',
      detail: `store in use by live process ${pid}`,
      fix: 'fine if that is the running service; a second `serve` on this data dir would refuse to start',
    };
  }
  return { status: 'ok', check: 'store-lock', detail: `stale lock of dead process ${pid} (taken over at start)` };
}

/** Runs every check (minus `skip`) and returns them in order. Never throws for a failed check. */
export async function runDoctor(options: DoctorOptions): Promise<CheckResult[]> {
  const timeoutMs = options.timeoutMs ?? 20_000;
  const skip = options.skip ?? new Set<string>();
  const results: CheckResult[] = [];
  let secrets: string[] = [];
  const report = (r: CheckResult) => {
    const clean: CheckResult = { ...r, detail: scrubText(r.detail, secrets), ...(r.fix ? { fix: scrubText(r.fix, secrets) } : {}) };
    results.push(clean);
    options.onResult?.(clean);
  };
  const run = async (name: DoctorCheck, fn: () => CheckResult | Promise<CheckResult>) => {
    if (skip.has(name)) return;
    try {
      report(await fn());
    } catch (err) {
      report({ status: 'fail', check: name, detail: `check crashed: ${errorText(err).slice(0, 200)}`, fix: 'report this as a bug' });
    }
  };

  let config: Config | null = null;
  try {
    config = loadConfig({ env: options.env, argv: options.argv ?? [], ...(options.cwd ? { cwd: options.cwd } : {}) });
    secrets = [config.giteaToken, config.adminToken, ...config.webhookSecret];
    report({ status: 'ok', check: 'config', detail: config.configFile ? `loaded (environment over ${config.configFile})` : 'loaded from the environment' });
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    // ConfigError messages never hold values; each problem carries its own fix.
    for (const p of err.problems) report({ status: 'fail', check: 'config', detail: p, fix: 'see docs/configuration.md#reference' });
  }

  await run('git', checkGit);
  if (config === null) {
    // Without a configuration the codex checks would fail for reasons that are not Codex's (issue 32):
    // say what to configure first, and check the rest once it loads.
    for (const name of ['codex', 'codex-account', ...NEED_CONFIG] as const) {
      if (!skip.has(name)) report({ status: 'skip', check: name, detail: 'needs a valid configuration', fix: 'configure first: fix the config lines above, then run doctor again' });
    }
    return results;
  }
  const codexCommand = config.codexCommand ?? bundledCodexCommand();
  await run('codex', () => checkCodex(codexCommand, options.env, timeoutMs));
  await run('codex-account', () => checkCodexAccount(codexCommand, options.env, timeoutMs));
  const c = config;
  await run('agent-isolation', () => checkAgentIsolation(c, options.env, timeoutMs));
  await run('gitea-mcp', () => checkMcp(c, timeoutMs, options.env['PATH']));
  let login: string | null = null;
  await run('gitea', async () => {
    const r = await checkGitea(c, timeoutMs);
    login = r.login;
    return r.result;
  });
  await run('token-scope', () => checkTokenScope(c, options.repo, login, timeoutMs));
  await run('token-scopes', () => checkTokenScopes(c, timeoutMs));
  await run('webhook-secret', () => checkSecret(c));
  await run('data-dir', () => checkDir('data-dir', c.dataDir, 'CCWEB_DATA_DIR'));
  await run('workspace-root', () => checkDir('workspace-root', c.workspaceRoot, 'CCWEB_WORKSPACE_ROOT'));
  await run('store-lock', () => checkStoreLock(c.dataDir));
  return results;
}
