import { createHash } from 'node:crypto';
import { hostname } from 'node:os';
// Configuration loader: environment (`CCWEB_*`) over an optional JSON file (`--config PATH`, else
// `ccweb.config.json` in the working directory) over defaults; validated per key with zod.
//
// Rules worth knowing:
// - An environment variable set to the empty string counts as unset (docker-compose `FOO=`).
// - Relative paths (data dir, workspace root, config file) resolve against `cwd`.
// - Lists: comma-separated in the environment; a comma-separated string or a JSON array in the file.
//   List entries are trimmed, so a webhook secret cannot start/end with spaces or contain a comma
//   when given through the environment.
// - Unknown keys in the file are an error (a typo must not silently fall back to a default), and so
//   is an unknown `CCWEB_*` environment variable (`CCWEB_PROT` → "did you mean CCWEB_PORT?"), except
//   the few read by the project's own tooling (`TOOLING_ENV_KEYS`, `CCWEB_TEST_*`).
// - Errors name the key in both spellings and say how to fix it; they never contain a value.
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { CONFIG_KEYS, DEFAULTS, KEYS, type ConfigKey, type KeySpec, type LogLevel } from './keys.js';
import type { Locale } from '../domain/locale.js';
import { limitsConfigFrom, type LimitsConfig } from './limit-keys.js';
import { editDistance, nearestName } from './nearest-name.js';

/** The host name plus a hash of the data directory: two nodes on one host with two data directories differ. */
export function defaultNodeId(dataDir: string): string {
  const host = hostname().replace(/[^A-Za-z0-9_.:-]/g, '-').slice(0, 60) || 'node';
  return `${host}-${createHash('sha256').update(dataDir).digest('hex').slice(0, 8)}`;
}

export interface Config extends LimitsConfig {
  /** The PostgreSQL store's URL (a secret: it may hold a password); unset → the embedded store. */
  databaseUrl?: string;
  /** This node's name in a shared database (heartbeats, log lines, leases). */
  nodeId?: string;
  /** Where this node serves, as the nodes list and a refused duplicate node id name it; unset → derived from host and port. */
  nodeUrl?: string;
  databaseOutageSeconds?: number;
  nodeHeartbeatSeconds?: number;
  host: string;
  port: number;
  /** Absolute. */
  dataDir: string;
  /** One or more secrets; a signature under any of them is accepted (rotation). */
  webhookSecret: string[];
  /** Base URL without trailing slash, e.g. `https://gitea.example.com`. */
  giteaUrl: string;
  /** Gitea's ROOT_URL when it differs from `giteaUrl`: payload repository URLs may name its host too. */
  giteaPublicUrl?: string;
  giteaToken: string;
  /** The agent's own narrower token for gitea-mcp (behind the gate); unset → `giteaToken`. */
  giteaMcpToken?: string;
  /** Unset → learn it from `GET /api/v1/user` at start. */
  botLogin?: string;
  adminToken: string;
  /** Absolute; default `<dataDir>/workspaces`. */
  workspaceRoot: string;
  codexCommand: string;
  giteaMcpCommand: string;
  webhookPath: string;
  webhookMaxBytes: number;
  /** Unset → `DEFAULTS.httpHeadersTimeoutSeconds` (10). */
  httpHeadersTimeoutSeconds?: number;
  /** Unset → `DEFAULTS.httpBodyTimeoutSeconds` (30). */
  httpBodyTimeoutSeconds?: number;
  /** Unset → `DEFAULTS.httpMaxConnections` (256). */
  httpMaxConnections?: number;
  maxConcurrentTasks: number;
  codexModel?: string;
  /** PATH of the app-server and the agent's commands; unset → `defaultAgentPath()`. */
  agentPath?: string;
  allowUsers: string[];
  denyUsers: string[];
  leaseTtlMs: number;
  turnTimeoutMs: number;
  workspaceTimeoutMs: number;
  logLevel: LogLevel;
  /** The language of the bot's own comments (receipts, failure results). Unset → `zh`. */
  locale?: Locale;
  /** Least seconds between two progress edits of a receipt. Unset → `DEFAULTS.receiptEditIntervalSeconds` (15). */
  receiptEditIntervalSeconds?: number;
  /** Unset → `DEFAULTS.deliveryRetentionDays` (30). */
  deliveryRetentionDays?: number;
  /** Unset → finished tasks are kept forever. */
  taskRetentionDays?: number;
  /** Unset → `DEFAULTS.archiveAfterMinutes` (60). */
  archiveAfterMinutes?: number;
  /** Unset → `pull_request`: commit, push the resource branch, open or reuse its pull request. */
  delivery?: 'pull_request' | 'branch' | 'off';
  /** Unset → `ccweb/`. */
  branchPrefix?: string;
  /** Unset → `DEFAULTS.securityEventRetentionDays` (30). */
  securityEventRetentionDays?: number;
  /** Unset → `DEFAULTS.intakeConfirmAttempts` (10). */
  intakeConfirmAttempts?: number;
  /** Unset → `DEFAULTS.intakeMaxPending` (1000). */
  intakeMaxPending?: number;
  /** The config file that was read (absolute), or null. */
  configFile: string | null;
  /** `off` only by the operator's explicit choice (CCWEB_AGENT_ISOLATION=off). */
  agentIsolation: 'on' | 'off';
  agentNetwork: 'on' | 'off';
  /** Absolute paths the agent's commands must not read, besides the ones the service knows. */
  agentHidePaths: string[];
  /** Absolute paths of the `*_FILE` secrets that were read (hidden from the agent). */
  secretFiles: string[];
}

/** Secret keys that may come from a file, and the key naming that file. */
export const SECRET_FILE_KEYS = {
  giteaToken: 'giteaTokenFile',
  giteaMcpToken: 'giteaMcpTokenFile',
  webhookSecret: 'webhookSecretFile',
  adminToken: 'adminTokenFile',
  databaseUrl: 'databaseUrlFile',
} as const satisfies Partial<Record<ConfigKey, ConfigKey>>;

/** Reads a `*_FILE` secret: its content without trailing newlines (how `echo x > file` writes it). */
function readSecretFile(file: string): { value: string } | { problem: string } {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    return { problem: `cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? 'read error'})` };
  }
  const value = text.replace(/[\r\n]+$/, '');
  return value.trim() === '' ? { problem: `${file} is empty` } : { value };
}

/** Keys whose values are never printed. */
export const SECRET_KEYS: readonly ConfigKey[] = CONFIG_KEYS.filter((k) => (KEYS[k] as KeySpec).secret === true);

export const DEFAULT_CONFIG_FILE = 'ccweb.config.json';

/** Invalid configuration. `problems` holds one line per bad key; `message` joins them. */
/** The refusal of a setup that still names a cluster mode (the modes went: every node is alike). */
export const CLUSTER_MODE_GONE = 'CCWEB_CLUSTER_MODE is gone: every node is alike; remove it';

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(readonly problems: string[]) {
    super(
      problems.length === 1
        ? `Invalid configuration: ${problems[0]}`
        : `Invalid configuration:\n${problems.map((p) => `- ${p}`).join('\n')}`,
    );
  }
}

export interface LoadConfigOptions {
  env?: Readonly<Record<string, string | undefined>>;
  /** Command-line arguments (without node and script); `--config PATH` / `--config=PATH` is honoured. */
  argv?: readonly string[];
  /** Explicit config file; wins over `--config` in argv. */
  configPath?: string;
  cwd?: string;
  /** Override how the default Codex command is found (tests). */
  resolveCodexCommand?: () => string;
}

function keyLabel(key: ConfigKey): string {
  return `${KEYS[key].env} ("${key}" in the config file)`;
}

/** `--config PATH` or `--config=PATH` from argv; throws on a dangling `--config`. */
export function configPathFromArgv(argv: readonly string[]): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--config') {
      const next = argv[i + 1];
      if (next === undefined || next === '' || next.startsWith('-')) {
        throw new ConfigError([`${arg} needs a path: pass --config ./ccweb.config.json`]);
      }
      return next;
    }
    if (arg.startsWith('--config=')) {
      const value = arg.slice('--config='.length);
      if (value === '') throw new ConfigError(['--config= needs a path: pass --config=./ccweb.config.json']);
      return value;
    }
  }
  return undefined;
}

function readConfigFile(file: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'read error';
    throw new ConfigError([`cannot read config file ${file} (${code}): check the --config path`]);
  }
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    // JSON.parse's message quotes the text, which may hold secrets: do not pass it on.
    throw new ConfigError([`config file ${file} is not valid JSON: fix its syntax (a JSON object of camelCase keys)`]);
  }
  if (typeof data !== 'object' || data === null || Array.isArray(data)) {
    throw new ConfigError([`config file ${file} must hold a JSON object, e.g. {"giteaUrl": "https://gitea.example.com"}`]);
  }
  return data as Record<string, unknown>;
}

function suggestKey(unknownKey: string): string | undefined {
  const byEnv = CONFIG_KEYS.find((k) => KEYS[k].env === unknownKey.toUpperCase());
  if (byEnv) return byEnv;
  const folded = unknownKey.toLowerCase().replace(/[_-]/g, '');
  return (
    CONFIG_KEYS.find((k) => k.toLowerCase() === folded) ??
    CONFIG_KEYS.find((k) => editDistance(k.toLowerCase(), folded) <= 2)
  );
}

/**
 * `CCWEB_*` variables read by build and test tooling, never by the service: not configuration errors.
 * Every `CCWEB_TEST_*` name is reserved for tests as well (e.g. CCWEB_TEST_SLOW_PROFILE, which CI exports).
 */
export const TOOLING_ENV_KEYS: readonly string[] = ['CCWEB_BUILD_DIR', 'CCWEB_CHROMIUM', 'CCWEB_GITEA_FIXTURES', 'CCWEB_GITEA_MCP_SOURCE', 'CCWEB_GITEA_MCP_CACHE'];
export const TOOLING_ENV_PREFIX = 'CCWEB_TEST_';

const KNOWN_ENV = new Set<string>(CONFIG_KEYS.map((k) => KEYS[k].env));

function suggestEnvKey(name: string): string | undefined {
  return nearestName(name, KNOWN_ENV);
}

/** The bundled Codex CLI's entry point (`@openai/codex` → its `bin.codex`), or `codex` from PATH. */
export function bundledCodexCommand(): string {
  try {
    const require = createRequire(import.meta.url);
    const pkgPath = require.resolve('@openai/codex/package.json');
    const pkg = JSON.parse(readFileSync(pkgPath, 'utf8')) as { bin?: string | Record<string, string> };
    const bin = typeof pkg.bin === 'string' ? pkg.bin : pkg.bin?.['codex'];
    if (typeof bin === 'string' && bin !== '') return path.resolve(path.dirname(pkgPath), bin);
  } catch {
    // fall through
  }
  return 'codex';
}

/**
 * Load and validate the configuration. Throws `ConfigError` listing every bad key at once.
 * Precedence per key: environment > config file > default.
 */
export function loadConfig(options: LoadConfigOptions = {}): Config {
  const env = options.env ?? process.env;
  const cwd = options.cwd ?? process.cwd();
  const argv = options.argv ?? process.argv.slice(2);

  const explicit = options.configPath ?? configPathFromArgv(argv);
  let configFile: string | null = null;
  let file: Record<string, unknown> = {};
  if (explicit !== undefined) {
    configFile = path.resolve(cwd, explicit);
    file = readConfigFile(configFile);
  } else if (existsSync(path.join(cwd, DEFAULT_CONFIG_FILE))) {
    configFile = path.resolve(cwd, DEFAULT_CONFIG_FILE);
    file = readConfigFile(configFile);
  }

  const problems: string[] = [];
  for (const key of Object.keys(file)) {
    if (!(CONFIG_KEYS as string[]).includes(key)) {
      const hint = suggestKey(key);
      problems.push(
        `unknown key "${key}" in config file ${configFile}: ` +
          (hint ? `did you mean "${hint}"?` : `remove it (known keys: ${CONFIG_KEYS.join(', ')})`),
      );
    }
  }

  for (const name of Object.keys(env)) {
    if (!name.startsWith('CCWEB_') || env[name] === undefined || KNOWN_ENV.has(name)) continue;
    if (TOOLING_ENV_KEYS.includes(name) || name.startsWith(TOOLING_ENV_PREFIX)) continue;
    const hint = suggestEnvKey(name);
    problems.push(
      `unknown environment variable ${name}: ` +
        (hint ? `did you mean ${hint}? Rename it.` : `unset it (known keys: run \`ccweb-gitea config-reference\`).`),
    );
  }

  const values: Partial<Record<ConfigKey, unknown>> = {};
  const secretFiles: string[] = [];
  const rawOf = (key: ConfigKey): { raw: unknown; source: string } | null => {
    const fromEnv = env[KEYS[key].env];
    if (fromEnv !== undefined && fromEnv !== '') return { raw: fromEnv, source: 'from the environment' };
    if (Object.hasOwn(file, key) && file[key] !== null) return { raw: file[key], source: 'from the config file' };
    return null;
  };
  for (const key of CONFIG_KEYS) {
    const spec: KeySpec = KEYS[key];
    let found = rawOf(key);
    const fileKey = (SECRET_FILE_KEYS as Partial<Record<ConfigKey, ConfigKey>>)[key];
    const viaFile = fileKey ? rawOf(fileKey) : null;
    if (fileKey && viaFile) {
      if (found) {
        problems.push(`${keyLabel(key)} and ${keyLabel(fileKey)} are both set: keep one of them`);
        continue;
      }
      if (typeof viaFile.raw !== 'string' || viaFile.raw.trim() === '') continue; // reported under its own key
      const filePath = path.resolve(cwd, viaFile.raw);
      const read = readSecretFile(filePath);
      if ('problem' in read) {
        problems.push(`${keyLabel(fileKey)}: ${read.problem}. ${KEYS[fileKey].fix}`);
        continue;
      }
      secretFiles.push(filePath);
      found = { raw: read.value, source: `from ${KEYS[fileKey].env}` };
    }
    if (!found) {
      if (spec.required) problems.push(`${keyLabel(key)} is required: ${spec.fix}${fileKey ? ` (or put it in a file and set ${KEYS[fileKey].env})` : ''}`);
      continue;
    }
    const { raw, source } = found;
    const parsed = spec.schema.safeParse(raw);
    if (!parsed.success) {
      problems.push(`${keyLabel(key)} is invalid (${source}): expected ${spec.expect}. ${spec.fix}`);
      continue;
    }
    values[key] = parsed.data;
  }
  if (problems.length > 0) throw new ConfigError(problems);

  const v = values as Record<string, unknown>;
  const dataDir = path.resolve(cwd, (v['dataDir'] as string | undefined) ?? DEFAULTS.dataDir);
  const config: Config = {
    host: (v['host'] as string | undefined) ?? DEFAULTS.host,
    port: (v['port'] as number | undefined) ?? DEFAULTS.port,
    dataDir,
    webhookSecret: v['webhookSecret'] as string[],
    giteaUrl: v['giteaUrl'] as string,
    giteaToken: v['giteaToken'] as string,
    adminToken: v['adminToken'] as string,
    workspaceRoot: path.resolve(cwd, (v['workspaceRoot'] as string | undefined) ?? path.join(dataDir, 'workspaces')),
    codexCommand:
      (v['codexCommand'] as string | undefined) ?? (options.resolveCodexCommand ?? bundledCodexCommand)(),
    giteaMcpCommand: (v['giteaMcpCommand'] as string | undefined) ?? DEFAULTS.giteaMcpCommand,
    webhookPath: (v['webhookPath'] as string | undefined) ?? DEFAULTS.webhookPath,
    webhookMaxBytes: (v['webhookMaxBytes'] as number | undefined) ?? DEFAULTS.webhookMaxBytes,
    maxConcurrentTasks: (v['maxConcurrentTasks'] as number | undefined) ?? DEFAULTS.maxConcurrentTasks,
    allowUsers: (v['allowUsers'] as string[] | undefined) ?? [...DEFAULTS.allowUsers],
    denyUsers: (v['denyUsers'] as string[] | undefined) ?? [...DEFAULTS.denyUsers],
    leaseTtlMs: (v['leaseTtlMs'] as number | undefined) ?? DEFAULTS.leaseTtlMs,
    turnTimeoutMs: (v['turnTimeoutMs'] as number | undefined) ?? DEFAULTS.turnTimeoutMs,
    workspaceTimeoutMs: (v['workspaceTimeoutMs'] as number | undefined) ?? DEFAULTS.workspaceTimeoutMs,
    logLevel: (v['logLevel'] as LogLevel | undefined) ?? DEFAULTS.logLevel,
    configFile,
    ...limitsConfigFrom(v),
    agentIsolation: (v['agentIsolation'] as 'on' | 'off' | undefined) ?? DEFAULTS.agentIsolation,
    agentNetwork: (v['agentNetwork'] as 'on' | 'off' | undefined) ?? DEFAULTS.agentNetwork,
    agentHidePaths: (v['agentHidePaths'] as string[] | undefined) ?? [],
    secretFiles,
  };
  if (v['giteaMcpToken'] !== undefined) config.giteaMcpToken = v['giteaMcpToken'] as string;
  if (v['botLogin'] !== undefined) config.botLogin = v['botLogin'] as string;
  for (const key of ['httpHeadersTimeoutSeconds', 'httpBodyTimeoutSeconds', 'httpMaxConnections'] as const) {
    if (v[key] !== undefined) config[key] = v[key] as number;
  }
  if (v['giteaPublicUrl'] !== undefined) config.giteaPublicUrl = v['giteaPublicUrl'] as string;
  if (v['codexModel'] !== undefined) config.codexModel = v['codexModel'] as string;
  if (v['agentPath'] !== undefined) config.agentPath = v['agentPath'] as string;
  if (v['locale'] !== undefined) config.locale = v['locale'] as Locale;
  if (v['receiptEditIntervalSeconds'] !== undefined) config.receiptEditIntervalSeconds = v['receiptEditIntervalSeconds'] as number;
  if (v['deliveryRetentionDays'] !== undefined) config.deliveryRetentionDays = v['deliveryRetentionDays'] as number;
  if (v['taskRetentionDays'] !== undefined) config.taskRetentionDays = v['taskRetentionDays'] as number;
  if (v['archiveAfterMinutes'] !== undefined) config.archiveAfterMinutes = v['archiveAfterMinutes'] as number;
  if (v['delivery'] !== undefined) config.delivery = v['delivery'] as Config['delivery'];
  if (v['branchPrefix'] !== undefined) config.branchPrefix = v['branchPrefix'] as string;
  if (v['securityEventRetentionDays'] !== undefined) config.securityEventRetentionDays = v['securityEventRetentionDays'] as number;
  if (v['intakeConfirmAttempts'] !== undefined) config.intakeConfirmAttempts = v['intakeConfirmAttempts'] as number;
  if (v['intakeMaxPending'] !== undefined) config.intakeMaxPending = v['intakeMaxPending'] as number;
  if (v['databaseUrl'] !== undefined) config.databaseUrl = v['databaseUrl'] as string;
  config.nodeId = (v['nodeId'] as string | undefined) ?? defaultNodeId(dataDir);
  if (v['nodeUrl'] !== undefined) config.nodeUrl = v['nodeUrl'] as string;
  if (v['databaseOutageSeconds'] !== undefined) config.databaseOutageSeconds = v['databaseOutageSeconds'] as number;
  if (v['nodeHeartbeatSeconds'] !== undefined) config.nodeHeartbeatSeconds = v['nodeHeartbeatSeconds'] as number;
  if (v['clusterMode'] !== undefined) throw new ConfigError([CLUSTER_MODE_GONE]);
  return config;
}

export const REDACTED = '[redacted]';

/** A copy safe to log: secrets replaced by `[redacted]` (the secret list keeps its length). */
/** Every secret value of the configuration (the keys marked secret in keys.ts): what must never be shown. */
export function secretValues(config: Config): string[] {
  return SECRET_KEYS.flatMap((k) => {
    const v: unknown = (config as unknown as Record<string, unknown>)[k];
    return v === undefined ? [] : Array.isArray(v) ? v.map(String) : [String(v)];
  });
}

export function redactConfig(config: Config): Config {
  return {
    ...config,
    webhookSecret: config.webhookSecret.map(() => REDACTED),
    giteaToken: REDACTED,
    ...(config.giteaMcpToken !== undefined ? { giteaMcpToken: REDACTED } : {}),
    adminToken: REDACTED,
    ...(config.databaseUrl !== undefined ? { databaseUrl: REDACTED } : {}),
    allowUsers: [...config.allowUsers],
    denyUsers: [...config.denyUsers],
  };
}
