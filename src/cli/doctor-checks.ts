// The checks of `ccweb-gitea doctor`, in the order they run, each with the line its help prints:
// `help doctor` is built from this list, so it names every check there is.
import type { START_REFUSALS } from '../service/start-refusals.js';
import { SUPPORTED_NODE } from '../service/node-version.js';

export const DOCTOR_CHECK_HELP = {
  config: 'the configuration loads (environment and --config file), as for serve',
  node: `the running Node against the supported ones (${SUPPORTED_NODE})`,
  git: 'git is on PATH',
  codex: 'the Codex command and CODEX_HOME, then `codex app-server` completes initialize',
  'codex-account': "logged in? (account/read), and the account's rate limits",
  'agent-isolation': "runs a probe command in the agent's sandbox, as serve does at start",
  'gitea-mcp': 'the gitea-mcp command, and an MCP handshake through the gate',
  gitea: 'GET /api/v1/user with the token: Gitea answers and takes the token',
  'token-scope': "with --repo: the bot's permission on that repository",
  'token-scopes': 'the scopes each token holds: enough for the bot and the agent, no more than the agent needs',
  'webhook-secret': 'the webhook secret(s) and the admin token: long enough and each its own value',
  'data-dir': 'the data directory is on real storage, takes a durable write, and holds a store this version can open',
  'workspace-root': 'the workspace root is writable',
  port: 'CCWEB_HOST:CCWEB_PORT can be listened on',
  database: 'with CCWEB_DATABASE_URL: PostgreSQL answers, and its schema is not newer than this version',
  'store-lock': 'whether a running process holds the data directory',
} as const;

export type DoctorCheck = keyof typeof DOCTOR_CHECK_HELP;
export const DOCTOR_CHECKS = Object.keys(DOCTOR_CHECK_HELP) as DoctorCheck[];

/** Every refusal of serve names a check doctor has (checked when this compiles). */
type RefusalCheck = (typeof START_REFUSALS)[keyof typeof START_REFUSALS]['check'];
export const REFUSAL_CHECKS_EXIST: RefusalCheck extends DoctorCheck ? true : never = true;

/** `  name  what it checks`, one line per check, for the help. */
export function doctorChecksHelp(): string {
  const width = Math.max(...DOCTOR_CHECKS.map((c) => c.length));
  return DOCTOR_CHECKS.map((c) => `  ${c.padEnd(width)}  ${DOCTOR_CHECK_HELP[c]}`).join('\n');
}

export type CheckStatus = 'ok' | 'warn' | 'fail' | 'skip';

export interface CheckResult {
  status: CheckStatus;
  check: DoctorCheck;
  /** Doctor's own words; text from outside only through `Quote`. */
  detail: string;
  /** What to do about it; shown for everything but `ok`. */
  fix?: string;
}

/**
 * Text that came from outside doctor (an error message, a program's output, Gitea's answer) as it
 * may be shown: whole, or withheld whole when it holds a configured secret's value — never with the
 * value cut out, which would show where it was (and so what it was) and garble the text around it.
 */
export type Quote = (text: string) => string;

export const WITHHELD = '(withheld: it contains the value of a configured secret)';

export function quoteOutside(secrets: readonly string[]): Quote {
  const values = secrets.filter((s) => s.length > 0);
  return (text) => (values.some((s) => text.includes(s)) ? WITHHELD : text);
}
