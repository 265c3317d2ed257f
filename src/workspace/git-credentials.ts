// How the bot token reaches git: only through the environment of the git process, as an
// `http.<cloneUrl>.extraHeader` entry in GIT_CONFIG_* (command-line precedence). Never in the remote
// URL, `.git/config`, process arguments or logs. The environment is built from scratch: nothing of
// the parent's environment is inherited except a small allow-list.
import { existsSync } from 'node:fs';

/** Variables copied from the parent environment when present. Nothing else is inherited. */
export const PASS_THROUGH_ENV = ['PATH', 'HOME', 'LANG', 'LC_ALL', 'TZ'] as const;

export interface GitEnvOptions {
  /** The bot token; omit for local commands that need no network. */
  token?: string;
  /** The URL the Authorization header is scoped to (the clone URL, or the Gitea base URL). */
  scopeUrl?: string;
  /** The environment to pick PASS_THROUGH_ENV from; defaults to `process.env`. */
  parentEnv?: NodeJS.ProcessEnv;
}

function noopAskpass(): string {
  for (const candidate of ['/bin/true', '/usr/bin/true']) if (existsSync(candidate)) return candidate;
  return 'true';
}

/** Config entries every git command gets, secret or not: no credential helper, no hooks, no fsmonitor. */
export function baseGitConfig(): Array<[string, string]> {
  return [
    // An empty value resets the helper list: no stored helper can answer or *store* the token.
    ['credential.helper', ''],
    // The workspace is handed to an agent; it must not be able to make our git run its code.
    ['core.hooksPath', '/dev/null'],
    ['core.fsmonitor', 'false'],
    ['core.askPass', noopAskpass()],
  ];
}

/**
 * A complete, fresh environment for one git process. With `token`, adds
 * `http.<scopeUrl>.extraHeader = Authorization: token <token>` through GIT_CONFIG_COUNT/KEY/VALUE.
 */
export function gitEnvironment(options: GitEnvOptions = {}): Record<string, string> {
  const parent = options.parentEnv ?? process.env;
  const env: Record<string, string> = {};
  for (const name of PASS_THROUGH_ENV) {
    const value = parent[name];
    if (value !== undefined) env[name] = value;
  }
  env.GIT_TERMINAL_PROMPT = '0';
  env.GIT_ASKPASS = noopAskpass();
  env.SSH_ASKPASS = noopAskpass();
  env.GCM_INTERACTIVE = 'never';
  // System config (admin-owned: CA bundles, proxies) still applies; credential helpers do not.
  const entries = baseGitConfig();
  if (options.token !== undefined) {
    if (!isUsableToken(options.token)) throw new Error('token contains characters that cannot go in a header');
    if (!options.scopeUrl) throw new Error('scopeUrl is required with a token');
    entries.push([`http.${credentialScope(options.scopeUrl)}.extraHeader`, `Authorization: token ${options.token}`]);
  }
  env.GIT_CONFIG_COUNT = String(entries.length);
  entries.forEach(([key, value], i) => {
    env[`GIT_CONFIG_KEY_${i}`] = key;
    env[`GIT_CONFIG_VALUE_${i}`] = value;
  });
  return env;
}

/** The URL prefix the header is limited to: the clone URL without userinfo, query or fragment. */
export function credentialScope(url: string): string {
  const u = new URL(url);
  u.username = '';
  u.password = '';
  u.search = '';
  u.hash = '';
  return u.toString();
}

export function isUsableToken(token: string): boolean {
  // eslint-disable-next-line no-control-regex
  return token.length > 0 && !/[\u0000-\u001f\u007f\s]/.test(token);
}

/** Replaces every secret (and any Authorization header value) in `text` with `[REDACTED]`. */
export function redactSecrets(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const secret of secrets) {
    if (secret.length < 4) continue;
    out = out.split(secret).join('[REDACTED]');
    const b64 = Buffer.from(secret).toString('base64').replace(/=+$/, '');
    if (b64.length >= 8) out = out.split(b64).join('[REDACTED]');
  }
  return out.replace(/(authorization:\s*)(\S+)(\s+\S+)?/gi, (_m, head: string) => `${head}[REDACTED]`);
}
