// `ccweb-gitea doctor`: checks everything the service needs before it can answer a comment, one
// line per check with the fix. Read-only except for a probe file in the data and workspace
// directories (created and removed) and the agent sandbox's folders under the data directory.
//
// It agrees with `serve`: every setup serve refuses to start with fails a check here (the rules are
// serve's own, see src/service/start-refusals.ts), and what serve only warns about warns here.
// No secret is ever printed: doctor's own words never hold one, and text from outside (errors,
// programs' output, Gitea's answers) is shown only through `Quote`, which withholds it whole when
// it holds a configured secret's value.
import { readFileSync } from 'node:fs';
import { execa } from 'execa';
import { CodexAppServerConnection, errorText } from '../codex/jsonrpc-connection.js';
import { ConfigError, DEFAULTS, loadConfig, secretValues, type Config } from '../config/index.js';
import { createGiteaClient, GiteaError } from '../gitea/index.js';
import { agentTokenAdvice, botTokenAdvice, probeTokenScopes, type TokenAdvice, type TokenScopesResult } from '../gitea/token-scopes.js';
import { probeGatedMcp } from '../sessions/mcp-preflight.js';
import GITEA_MCP_PIN from '../config/gitea-mcp-pin.json' with { type: 'json' };
import { checkCodexAccount } from './doctor-codex-account.js';
import { probeAgentIsolation } from '../isolation/isolation-probe.js';
import { codexHomeOf, ISOLATION_OFF_WARNING, serviceCodexSetup } from '../isolation/service-isolation.js';
import { botLoginDecision } from '../service/resolve-bot-login.js';
import { OperatorError } from '../service/operator-error.js';
import { checkCodexHome, checkCommand, probeGitea } from '../service/startup-checks.js';
import { MIN_SECRET_LENGTH } from '../config/secret-strength.js';
import { DOCTOR_CHECKS, quoteOutside, WITHHELD, type CheckResult, type DoctorCheck, type Quote } from './doctor-checks.js';
import { checkDatabase, checkDataDirectory, checkNode, checkPort, checkSecrets, checkStoreLock, checkWorkspaceRoot } from './doctor-setup-checks.js';

export { DOCTOR_CHECKS, type CheckResult, type CheckStatus, type DoctorCheck } from './doctor-checks.js';

export interface DoctorOptions {
  env: Readonly<Record<string, string | undefined>>;
  /** `--config PATH` etc., as for `serve`. */
  argv?: readonly string[];
  cwd?: string;
  /** `owner/name`: check the token can read this repository's collaborators. */
  repo?: string;
  skip?: ReadonlySet<string>;
  /** As serve's --allow-weak-secrets: weak secrets warn instead of failing. */
  allowWeakSecrets?: boolean;
  /** Per network/process check. Default 20 s. */
  timeoutMs?: number;
  /** The running Node's version (default process.version). */
  nodeVersion?: string;
  /** Called as each check finishes (the CLI prints as it goes). */
  onResult?: (r: CheckResult) => void;
}

/** The checks that run without a configuration. */
const WITHOUT_CONFIG: readonly DoctorCheck[] = ['config', 'node', 'git'];

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

/** An operator error of serve's start-up checks as a failed check (its problem quoted: it may carry outside text). */
function refused(check: DoctorCheck, err: unknown, quote: Quote): CheckResult {
  if (err instanceof OperatorError) return { status: 'fail', check, detail: `${quote(err.problem)} [${err.key}]`, fix: err.fix };
  throw err;
}

async function checkGit(quote: Quote): Promise<CheckResult> {
  try {
    const { stdout } = await execa('git', ['--version']);
    return { status: 'ok', check: 'git', detail: quote(stdout.trim()) };
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

/** serve's first two Codex rules (the command resolves, CODEX_HOME is usable), then the app-server's initialize. */
async function checkCodex(config: Config, env: DoctorOptions['env'], timeoutMs: number, quote: Quote): Promise<CheckResult> {
  const codexHome = codexHomeOf({ env: { ...env } });
  try {
    checkCommand('codex', config.codexCommand);
    checkCodexHome(codexHome);
  } catch (err) {
    return refused('codex', err, quote);
  }
  const command = config.codexCommand;
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
    const model = conn.model ? `model ${quote(conn.model)}` : 'model: Codex default';
    const detail = `app-server answered initialize: ${quote(agent)}; ${model}${home ? `; CODEX_HOME ${quote(home)}` : ''}`;
    // userAgent is `<client name>/<codex version> (…)`; the protocol types were generated from one version.
    const running = /^[^/\s]+\/(\d+\.\d+\.\d+\S*)/.exec(agent)?.[1];
    const generated = generatedProtocolVersion();
    if (running && generated && running !== generated) {
      return {
        status: 'warn',
        check: 'codex',
        detail: `${detail}; protocol types were generated from ${generated}, the binary is ${quote(running)}`,
        fix: 'use the bundled @openai/codex (unset CCWEB_CODEX_COMMAND) or regenerate with npm run gen:codex-protocol',
      };
    }
    return { status: 'ok', check: 'codex', detail };
  } catch (err) {
    return {
      status: 'fail',
      check: 'codex',
      detail: `\`${command} app-server\` did not initialize: ${quote(errorText(err).slice(0, 200))}`,
      fix: 'set CCWEB_CODEX_COMMAND to a working codex binary (or reinstall @openai/codex) and check CODEX_HOME/config.toml',
    };
  } finally {
    await conn.close({ graceMs: 200, termMs: 1000 }).catch(() => undefined);
  }
}

/** The service's own start-up probe: same app-server command, arguments, environment and profile, after the same Codex rules. */
async function checkAgentIsolation(config: Config, env: DoctorOptions['env'], timeoutMs: number, quote: Quote): Promise<CheckResult> {
  if (config.agentIsolation === 'off') {
    return { status: 'warn', check: 'agent-isolation', detail: ISOLATION_OFF_WARNING, fix: 'unset CCWEB_AGENT_ISOLATION (see docs/security.md#opting-out)' };
  }
  const { sandbox, connection } = serviceCodexSetup(config, { env: { ...env } });
  const codexHome = codexHomeOf(connection);
  // serve checks these before its probe: when one fails, the sandbox is never tried, and nothing is known about it.
  try {
    checkCommand('codex', config.codexCommand);
    checkCodexHome(codexHome);
  } catch (err) {
    const why = err instanceof OperatorError ? err.problem : errorText(err);
    return { status: 'skip', check: 'agent-isolation', detail: `not probed: ${quote(why)}`, fix: 'fix the codex check first (its line says how)' };
  }
  const r = await probeAgentIsolation(sandbox, { connection, codexHome, timeoutMs });
  if (!r.ok) return { status: 'fail', check: 'agent-isolation', detail: quote(r.summary), fix: r.fix };
  return {
    status: 'ok',
    check: 'agent-isolation',
    detail: `a probe command ran in the agent sandbox (${r.durationMs} ms): ${r.checks.map((c) => c.detail).join('; ')}; network ${sandbox.network}; hidden: ${sandbox.deniedPaths().join(', ')}`,
  };
}

async function checkMcp(config: Config, timeoutMs: number, pathEnv: string | undefined, quote: Quote): Promise<CheckResult> {
  try {
    checkCommand('gitea-mcp', config.giteaMcpCommand);
  } catch (err) {
    return refused('gitea-mcp', err, quote);
  }
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
    return { status: 'fail', check: 'gitea-mcp', detail: `${result.errorCode}: ${quote(result.reason)}`, fix };
  }
  const version = result.serverVersion ?? 'unknown version';
  const detail = `${config.giteaMcpCommand} ${quote(version)} behind the gate: MCP handshake ok, ${result.tools.length} tools offered to the agent`;
  if (!result.hasCommentTool) {
    return { status: 'warn', check: 'gitea-mcp', detail: `${detail}, but no comment tool (issue_write add_comment / create_issue_comment)`, fix: 'use the pinned gitea-mcp; without a comment tool every reply goes through the REST fallback' };
  }
  if (result.serverVersion !== GITEA_MCP_PIN.version) {
    return { status: 'warn', check: 'gitea-mcp', detail: `${detail}; the service is tested with ${GITEA_MCP_PIN.version}`, fix: `install the pinned revision: node scripts/install-gitea-mcp.mjs --to /usr/local/bin` };
  }
  return { status: 'ok', check: 'gitea-mcp', detail };
}

/** serve's own question at start (probeGitea): a token Gitea rejects, or a URL that is not Gitea, stops it. */
async function checkGitea(config: Config, timeoutMs: number, quote: Quote): Promise<{ result: CheckResult; login: string | null }> {
  const gitea = createGiteaClient({ baseUrl: config.giteaUrl, token: config.giteaToken, timeoutMs, retries: 0 });
  let probe;
  try {
    probe = await probeGitea(gitea, config.giteaUrl);
  } catch (err) {
    return { login: null, result: refused('gitea', err, quote) };
  }
  if (!probe.ok) {
    return {
      login: null,
      result: {
        status: 'fail',
        check: 'gitea',
        detail: `GET /api/v1/user at ${config.giteaUrl} did not answer: ${quote(probe.reason)}`,
        fix: `check CCWEB_GITEA_URL and that this host can reach it (serve waits for Gitea at start, or with CCWEB_BOT_LOGIN starts and reports not ready)`,
      },
    };
  }
  const login = quote(probe.login);
  const decision = botLoginDecision(probe, config.botLogin, 1);
  if (decision.kind === 'use' && decision.warn === 'token_is_another_user') {
    return {
      login: probe.login,
      result: {
        status: 'warn',
        check: 'gitea',
        detail: `token belongs to ${login}, not CCWEB_BOT_LOGIN=${config.botLogin ?? ''}`,
        fix: 'use a token of the bot account, or set CCWEB_BOT_LOGIN to the token’s login (or unset it to learn it)',
      },
    };
  }
  return { login: probe.login, result: { status: 'ok', check: 'gitea', detail: `${config.giteaUrl} reachable; token valid for ${login}` } };
}

async function checkTokenScope(config: Config, repo: string | undefined, login: string | null, timeoutMs: number, quote: Quote): Promise<CheckResult> {
  if (!repo) return { status: 'skip', check: 'token-scope', detail: 'no repository given', fix: 'pass --repo owner/name to check the token can read its collaborators' };
  const [owner, name] = repo.split('/');
  if (!owner || !name) return { status: 'fail', check: 'token-scope', detail: `--repo ${repo} is not owner/name`, fix: 'pass --repo owner/name' };
  const user = config.botLogin ?? login;
  if (!user) return { status: 'skip', check: 'token-scope', detail: 'bot login unknown (the gitea check failed)', fix: 'fix the gitea check first' };
  const who = quote(user);
  const gitea = createGiteaClient({ baseUrl: config.giteaUrl, token: config.giteaToken, timeoutMs, retries: 0 });
  try {
    const p = await gitea.getCollaboratorPermission(owner, name, user);
    const perm = quote(String(p.permission));
    if (perm === 'none' || perm === 'read') {
      return { status: 'warn', check: 'token-scope', detail: `${who} has ${perm} permission on ${repo}`, fix: `add ${who} as a collaborator with write access so it can comment and fetch` };
    }
    return { status: 'ok', check: 'token-scope', detail: `${who} has ${perm} permission on ${repo}` };
  } catch (err) {
    const code = err instanceof GiteaError ? err.code : 'error';
    return {
      status: 'fail',
      check: 'token-scope',
      detail: `GET /repos/${repo}/collaborators/${who}/permission failed: ${code}`,
      fix: code === 'gitea_not_found' ? `check the repository name and that ${who} can see it` : 'give the token the read:repository scope and the bot access to the repository',
    };
  }
}

const STATUS_RANK = { ok: 0, warn: 1, fail: 2 } as const;

/**
 * Which scopes each token holds (Gitea names them when it refuses a scope): a failure where the
 * service cannot work with them (the bot cannot answer or clone, the agent cannot read or answer,
 * Gitea does not take the agent's token), a warning where it works with a gap or the agent's token
 * can do more than the agent needs.
 */
async function checkTokenScopes(config: Config, timeoutMs: number, quote: Quote): Promise<CheckResult> {
  const bot = await probeTokenScopes({ baseUrl: config.giteaUrl, token: config.giteaToken, timeoutMs });
  const agent = config.giteaMcpToken ? await probeTokenScopes({ baseUrl: config.giteaUrl, token: config.giteaMcpToken, timeoutMs }) : null;
  const show = (r: TokenScopesResult) => (r.ok ? quote(r.scopes.join(', ')) || '(none)' : `unknown (${quote(r.reason)})`);
  const held = `CCWEB_GITEA_TOKEN: ${show(bot)}; ${agent ? `CCWEB_GITEA_MCP_TOKEN: ${show(agent)}` : 'CCWEB_GITEA_MCP_TOKEN unset: the agent uses CCWEB_GITEA_TOKEN behind the gate'}`;
  const advise = (r: TokenScopesResult, which: string, advice: (scopes: string[]) => TokenAdvice): TokenAdvice => {
    if (r.ok) return advice(r.scopes);
    if (r.invalidToken) return { status: 'fail', detail: `Gitea does not accept ${which}`, fix: `create a new token and set ${which}` };
    return { status: 'warn', detail: `the scopes of ${which} are not known`, fix: 'check the token is valid for CCWEB_GITEA_URL' };
  };
  const advices = [advise(bot, 'CCWEB_GITEA_TOKEN', (s) => botTokenAdvice(s, config.delivery ?? DEFAULTS.delivery))];
  // The agent's token is the bot's unless CCWEB_GITEA_MCP_TOKEN is set: judged once more, for the agent's needs, when known.
  const agentAdvice = agent ? advise(agent, 'CCWEB_GITEA_MCP_TOKEN', agentTokenAdvice) : bot.ok ? agentTokenAdvice(bot.scopes) : null;
  if (agentAdvice) advices.push(agentAdvice);
  const status = advices.reduce<'ok' | 'warn' | 'fail'>((worst, a) => (STATUS_RANK[a.status] > STATUS_RANK[worst] ? a.status : worst), 'ok');
  const detail = `${held}; ${advices.map((a) => a.detail).join('; ')}`;
  if (status === 'ok') return { status, check: 'token-scopes', detail };
  const fixes = advices.filter((a) => a.status !== 'ok' && a.fix).map((a) => a.fix!);
  const agentFix = !agent && agentAdvice && agentAdvice.status !== 'ok' ? ' Then set CCWEB_GITEA_MCP_TOKEN (or CCWEB_GITEA_MCP_TOKEN_FILE) to the agent’s token.' : '';
  return { status, check: 'token-scopes', detail, fix: `${fixes.join(' ')}${agentFix}`.trim() };
}

/**
 * A line that holds a secret's whole value (one long enough to be a real secret, never a word of
 * doctor's) would be a bug of a check that forgot to quote outside text: it is replaced, never printed.
 */
function guarded(r: CheckResult, strongSecrets: readonly string[]): CheckResult {
  const leaks = (t: string | undefined) => t !== undefined && strongSecrets.some((s) => t.includes(s));
  if (!leaks(r.detail) && !leaks(r.fix)) return r;
  return { status: r.status === 'ok' ? 'warn' : r.status, check: r.check, detail: `${WITHHELD} — report this as a bug`, fix: 'report this as a bug' };
}

/** Runs every check (minus `skip`) and returns them in order. Never throws for a failed check. */
export async function runDoctor(options: DoctorOptions): Promise<CheckResult[]> {
  const timeoutMs = options.timeoutMs ?? 20_000;
  const skip = options.skip ?? new Set<string>();
  const results: CheckResult[] = [];
  let strong: string[] = [];
  let quote: Quote = (t) => t;
  const report = (r: CheckResult) => {
    const shown = guarded(r, strong);
    results.push(shown);
    options.onResult?.(shown);
  };
  const run = async (name: DoctorCheck, fn: () => CheckResult | Promise<CheckResult>) => {
    if (skip.has(name)) return;
    try {
      report(await fn());
    } catch (err) {
      report({ status: 'fail', check: name, detail: `check crashed: ${quote(errorText(err).slice(0, 200))}`, fix: 'report this as a bug' });
    }
  };

  let config: Config | null = null;
  try {
    config = loadConfig({ env: options.env, argv: options.argv ?? [], ...(options.cwd ? { cwd: options.cwd } : {}) });
    const secrets = secretValues(config);
    quote = quoteOutside(secrets);
    strong = secrets.filter((s) => s.length >= MIN_SECRET_LENGTH);
    report({ status: 'ok', check: 'config', detail: config.configFile ? `loaded (environment over ${config.configFile})` : 'loaded from the environment' });
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    // ConfigError messages never hold values; each problem carries its own fix.
    for (const p of err.problems) report({ status: 'fail', check: 'config', detail: p, fix: 'see docs/configuration.md#reference' });
  }

  await run('node', () => checkNode(options.nodeVersion ?? process.version));
  await run('git', () => checkGit(quote));
  if (config === null) {
    // Without a configuration the other checks would fail for reasons that are not theirs: say
    // what to configure first, and check the rest once it loads.
    for (const name of DOCTOR_CHECKS.filter((c) => !WITHOUT_CONFIG.includes(c))) {
      if (!skip.has(name)) report({ status: 'skip', check: name, detail: 'needs a valid configuration', fix: 'configure first: fix the config lines above, then run doctor again' });
    }
    return results;
  }
  const c = config;
  await run('codex', () => checkCodex(c, options.env, timeoutMs, quote));
  const codexFailed = results.some((r) => r.check === 'codex' && r.status === 'fail');
  await run('codex-account', () =>
    codexFailed
      ? { status: 'skip', check: 'codex-account', detail: 'not asked: the app-server does not start', fix: 'fix the codex check first (its line says how)' }
      : checkCodexAccount(c.codexCommand, options.env, timeoutMs, quote),
  );
  await run('agent-isolation', () => checkAgentIsolation(c, options.env, timeoutMs, quote));
  await run('gitea-mcp', () => checkMcp(c, timeoutMs, options.env['PATH'], quote));
  let login: string | null = null;
  await run('gitea', async () => {
    const r = await checkGitea(c, timeoutMs, quote);
    login = r.login;
    return r.result;
  });
  await run('token-scope', () => checkTokenScope(c, options.repo, login, timeoutMs, quote));
  await run('token-scopes', () => checkTokenScopes(c, timeoutMs, quote));
  await run('webhook-secret', () => checkSecrets(c, options.allowWeakSecrets === true));
  await run('data-dir', () => checkDataDirectory(c.dataDir, { embedded: !c.databaseUrl }));
  await run('workspace-root', () => checkWorkspaceRoot(c.workspaceRoot));
  await run('port', () => checkPort(c));
  await run('database', () => checkDatabase(c, timeoutMs, quote));
  await run('store-lock', () => checkStoreLock(c));
  return results;
}
