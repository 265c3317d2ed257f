// The configuration contract: every key, its environment name, its config-file name
// (camelCase without the prefix), how it is validated, its default and how to fix a bad value.
// Every key of the service is declared here (or merged in, like limit-keys.ts), with the `CCWEB_` prefix.
import { z } from 'zod';
import { DEFAULT_LOCALE, LOCALES, type Locale } from '../domain/locale.js';
import { LIMIT_KEYS, LIMIT_DEFAULTS } from './limit-keys.js';
import GITEA_MCP_PIN from './gitea-mcp-pin.json' with { type: 'json' };

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export interface KeySpec {
  /** Environment variable name. */
  env: string;
  /** Never printed: not in errors, not in `redactConfig` output. */
  secret?: boolean;
  required?: boolean;
  /** Accepts a string (from the environment or the file) or a JSON value (from the file). */
  schema: z.ZodType<unknown>;
  /** What a valid value looks like, for error messages. */
  expect: string;
  /** How to fix it, for error messages. */
  fix: string;
}

const nonEmpty = z.string().trim().min(1);

function integer(min: number, max: number) {
  return z
    .union([z.number(), z.string().trim().regex(/^\d+$/).transform(Number)])
    .pipe(z.number().int().min(min).max(max));
}

/** A comma-separated string (`a, b`) or a JSON array of strings; entries trimmed, empty ones dropped. */
const stringList = z
  .union([z.string().transform((s) => s.split(',')), z.array(z.string())])
  .transform((items) => items.map((s) => s.trim()).filter((s) => s !== ''));

const LOGIN = /^[A-Za-z0-9_.-]+$/;

const onOff = z
  .string()
  .transform((s) => s.trim().toLowerCase())
  .pipe(z.enum(['on', 'off']));
const loginList = stringList.refine((items) => items.every((s) => LOGIN.test(s)));

/** http(s) base URL without credentials, query or fragment; trailing slashes removed. */
const baseUrl = nonEmpty.transform((value, ctx) => {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    ctx.addIssue({ code: 'custom', message: 'not a URL' });
    return z.NEVER;
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.username || url.password || url.search || url.hash) {
    ctx.addIssue({ code: 'custom', message: 'not a plain http(s) URL' });
    return z.NEVER;
  }
  return url.toString().replace(/\/+$/, '');
});

export const KEYS = {
  host: {
    env: 'CCWEB_HOST',
    schema: nonEmpty.regex(/^\S+$/),
    expect: 'a host name or IP address to listen on',
    fix: 'Set it to e.g. 127.0.0.1 (default) or 0.0.0.0.',
  },
  port: {
    env: 'CCWEB_PORT',
    schema: integer(0, 65535),
    expect: 'an integer from 0 to 65535',
    fix: 'Set it to a TCP port number, e.g. 8080 (default); 0 picks a free port.',
  },
  dataDir: {
    env: 'CCWEB_DATA_DIR',
    schema: nonEmpty,
    expect: 'a directory path',
    fix: 'Set it to a writable directory, e.g. ./data (default); relative paths are resolved against the working directory.',
  },
  webhookSecret: {
    env: 'CCWEB_WEBHOOK_SECRET',
    secret: true,
    required: true,
    schema: stringList.refine((items) => items.length > 0),
    expect: 'one or more non-empty secrets, comma-separated (or a JSON array in the file)',
    fix: "Set it to the Secret of the Gitea webhook; during rotation list the new and the old one, e.g. 'new,old'.",
  },
  giteaUrl: {
    env: 'CCWEB_GITEA_URL',
    required: true,
    schema: baseUrl,
    expect: 'an http(s) URL without credentials, query or fragment',
    fix: 'Set it to the base URL of your Gitea, e.g. https://gitea.example.com (put the token in CCWEB_GITEA_TOKEN, not in the URL).',
  },
  giteaPublicUrl: {
    env: 'CCWEB_GITEA_PUBLIC_URL',
    schema: baseUrl,
    expect: 'an http(s) URL without credentials, query or fragment',
    fix: "Set it to Gitea's ROOT_URL (app.ini [server]) when it differs from CCWEB_GITEA_URL, e.g. the service talks to http://127.0.0.1:3000 while users see https://gitea.example.com; otherwise leave it unset.",
  },
  giteaToken: {
    env: 'CCWEB_GITEA_TOKEN',
    secret: true,
    required: true,
    schema: nonEmpty,
    expect: 'a non-empty access token',
    fix: "Create an access token for the bot user in Gitea (Settings → Applications) and set it here.",
  },
  giteaMcpToken: {
    env: 'CCWEB_GITEA_MCP_TOKEN',
    secret: true,
    schema: nonEmpty,
    expect: 'a non-empty access token',
    fix: "Create a second token for the bot user with only the scopes read:repository and write:issue (Gitea: Settings → Applications → Select permissions) and set it here; unset, the agent's gitea-mcp uses CCWEB_GITEA_TOKEN behind the gate.",
  },
  botLogin: {
    env: 'CCWEB_BOT_LOGIN',
    schema: nonEmpty.regex(LOGIN),
    expect: 'a Gitea login (letters, digits, -, _, .)',
    fix: 'Set it to the Gitea login of the bot user, or leave it unset to learn it from GET /api/v1/user.',
  },
  adminToken: {
    env: 'CCWEB_ADMIN_TOKEN',
    secret: true,
    required: true,
    schema: nonEmpty,
    expect: 'a non-empty token',
    fix: 'Set it to a long random string (e.g. `openssl rand -hex 32`); the control API requires it as a bearer token.',
  },
  workspaceRoot: {
    env: 'CCWEB_WORKSPACE_ROOT',
    schema: nonEmpty,
    expect: 'a directory path',
    fix: 'Set it to a writable directory for repository checkouts, or leave it unset for <dataDir>/workspaces.',
  },
  codexCommand: {
    env: 'CCWEB_CODEX_COMMAND',
    schema: nonEmpty,
    expect: 'a command or path',
    fix: 'Set it to the codex executable, or leave it unset to use the bundled @openai/codex binary.',
  },
  agentPath: {
    env: 'CCWEB_AGENT_PATH',
    schema: nonEmpty.regex(/^\/[^\0]*$/),
    expect: 'a colon-separated list of absolute directories',
    fix: 'Set it to the PATH the agent\'s commands should see, e.g. /opt/go/bin:/usr/local/bin:/usr/bin:/bin, or leave it unset for the directory of the running node plus the system directories.',
  },
  giteaMcpCommand: {
    env: 'CCWEB_GITEA_MCP_COMMAND',
    schema: nonEmpty,
    expect: 'a command or path',
    fix: `Set it to the gitea-mcp executable at revision ${GITEA_MCP_PIN.revision} (\`node scripts/install-gitea-mcp.mjs --to /usr/local/bin\` builds and installs it), default gitea-mcp.`,
  },
  // The store's engine (src/store/postgres/): unset, the embedded store in <dataDir>/store.
  databaseUrl: {
    env: 'CCWEB_DATABASE_URL',
    secret: true,
    schema: nonEmpty.regex(/^postgres(ql)?:\/\/\S+$/i),
    expect: 'a postgres:// URL',
    fix: 'Set it to the PostgreSQL database the store lives in, e.g. postgres://ccweb:PASSWORD@db.example.com:5432/ccweb (the database must exist; the service creates its tables), or unset it for the embedded store in <dataDir>/store.',
  },
  databaseUrlFile: {
    env: 'CCWEB_DATABASE_URL_FILE',
    schema: nonEmpty,
    expect: 'the path of a file holding the database URL',
    fix: 'Set it to a file readable only by the service user (e.g. /run/secrets/database_url), or unset it and use CCWEB_DATABASE_URL.',
  },
  nodeId: {
    env: 'CCWEB_NODE_ID',
    schema: nonEmpty.regex(/^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$/),
    expect: 'a name of up to 100 letters, digits, _, ., : or -',
    fix: "Set it to a name unique to this node (e.g. its host name), or leave it unset for the host name plus a hash of the data directory.",
  },
  nodeUrl: {
    env: 'CCWEB_NODE_URL',
    schema: baseUrl,
    expect: 'an http(s) URL without credentials, query or fragment',
    fix: "Set it to the URL this node is reached at, e.g. http://node-a.internal:8080 (default: http://CCWEB_HOST:port, with the host name when CCWEB_HOST listens on every address). The nodes list and a refused duplicate CCWEB_NODE_ID name it.",
  },
  databaseOutageSeconds: {
    env: 'CCWEB_DATABASE_OUTAGE_SECONDS',
    schema: integer(1, 3600),
    expect: 'an integer from 1 to 3600',
    fix: 'Set how long a node goes on without reaching PostgreSQL before it stops with exit 75 for a restart (meanwhile writes fail and are tried again, and webhooks are answered 503), e.g. 120 (default).',
  },
  // Gone: every node is alike (the database coordinates them). Still read, so that a setup that sets it
  // is refused with the upgrade instead of running in a mode that no longer exists.
  clusterMode: {
    env: 'CCWEB_CLUSTER_MODE',
    schema: z.string(),
    expect: 'unset',
    fix: 'Remove it: every node is alike (each accepts any webhook and runs any repository\'s tasks, one at a time per repository).',
  },
  nodeHeartbeatSeconds: {
    env: 'CCWEB_NODE_HEARTBEAT_SECONDS',
    schema: integer(1, 60),
    expect: 'an integer from 1 to 60',
    fix: 'Set how often a node writes its heartbeat to the database, e.g. 10 (default). A node id whose heartbeat is 3 intervals old is free for another process.',
  },
  // Secrets from files (the `_FILE` convention of container secrets): the value is the
  // file's content without its trailing newline. Set either the variable or its _FILE, not both.
  giteaMcpTokenFile: {
    env: 'CCWEB_GITEA_MCP_TOKEN_FILE',
    schema: nonEmpty,
    expect: 'the path of a file holding the token',
    fix: 'Set it to a file readable only by the service user (e.g. /run/secrets/gitea_mcp_token), or unset it and use CCWEB_GITEA_MCP_TOKEN.',
  },
  giteaTokenFile: {
    env: 'CCWEB_GITEA_TOKEN_FILE',
    schema: nonEmpty,
    expect: 'the path of a file holding the token',
    fix: 'Set it to a file readable only by the service user (e.g. /run/secrets/gitea_token), or unset it and use CCWEB_GITEA_TOKEN.',
  },
  webhookSecretFile: {
    env: 'CCWEB_WEBHOOK_SECRET_FILE',
    schema: nonEmpty,
    expect: 'the path of a file holding the secret(s), comma-separated',
    fix: 'Set it to a file readable only by the service user, or unset it and use CCWEB_WEBHOOK_SECRET.',
  },
  adminTokenFile: {
    env: 'CCWEB_ADMIN_TOKEN_FILE',
    schema: nonEmpty,
    expect: 'the path of a file holding the admin token',
    fix: 'Set it to a file readable only by the service user, or unset it and use CCWEB_ADMIN_TOKEN.',
  },
  // Agent isolation (src/isolation/): the sandbox of the agent's shell commands.
  agentIsolation: {
    env: 'CCWEB_AGENT_ISOLATION',
    schema: onOff,
    expect: 'on or off',
    fix: 'Leave it unset (on). off runs the agent with full access to everything the service user can read, including the bot token; only for hosts without user namespaces, and every start warns.',
  },
  agentNetwork: {
    env: 'CCWEB_AGENT_NETWORK',
    schema: onOff,
    expect: 'on or off',
    fix: "Set it to off (default: the agent's commands have no network) or on (the internet through Codex's proxy; loopback and private addresses stay unreachable).",
  },
  agentHidePaths: {
    env: 'CCWEB_AGENT_HIDE_PATHS',
    schema: stringList.refine((items) => items.every((s) => s.startsWith('/'))),
    expect: 'absolute paths, comma-separated (or a JSON array in the file)',
    fix: "List more directories or files the agent's commands must not read, e.g. /srv/backups,/etc/gitea.",
  },
  webhookPath: {
    env: 'CCWEB_WEBHOOK_PATH',
    schema: nonEmpty.regex(/^\/[^\s?#]*$/),
    expect: 'a URL path starting with /',
    fix: 'Set it to the path Gitea posts to, e.g. /api/gitea/webhook (default).',
  },
  webhookMaxBytes: {
    env: 'CCWEB_WEBHOOK_MAX_BYTES',
    schema: integer(1024, 1024 * 1024 * 1024),
    expect: 'an integer number of bytes from 1024 to 1073741824',
    fix: 'Set it to the largest webhook body to accept, e.g. 2097152 (2 MiB, default).',
  },
  // Slow and many clients: how long one request may take to arrive, and how many
  // connections the HTTP server holds at once.
  httpHeadersTimeoutSeconds: {
    env: 'CCWEB_HTTP_HEADERS_TIMEOUT_SECONDS',
    schema: integer(1, 600),
    expect: 'an integer number of seconds from 1 to 600',
    fix: 'Set it to how long a client may take to send a request\'s headers before it is answered 408 and disconnected, e.g. 10 (default).',
  },
  httpBodyTimeoutSeconds: {
    env: 'CCWEB_HTTP_BODY_TIMEOUT_SECONDS',
    schema: integer(1, 3600),
    expect: 'an integer number of seconds from 1 to 3600',
    fix: 'Set it to how long a client may take to send a whole request body (a webhook of up to CCWEB_WEBHOOK_MAX_BYTES) before it is answered 408 and disconnected, e.g. 30 (default).',
  },
  httpMaxConnections: {
    env: 'CCWEB_HTTP_MAX_CONNECTIONS',
    schema: integer(1, 100_000),
    expect: 'an integer from 1 to 100000',
    fix: 'Set it to how many HTTP connections the service holds at once (Gitea, operators, live event streams), e.g. 256 (default); connections past it are closed at once.',
  },
  maxConcurrentTasks: {
    env: 'CCWEB_MAX_CONCURRENT_TASKS',
    schema: integer(1, 256),
    expect: 'an integer from 1 to 256',
    fix: 'Set it to how many tasks may run at once across all repositories, e.g. 2 (default).',
  },
  codexModel: {
    env: 'CCWEB_CODEX_MODEL',
    schema: nonEmpty,
    expect: 'a model name',
    fix: "Set it to a model Codex accepts, or leave it unset for Codex's default.",
  },
  allowUsers: {
    env: 'CCWEB_ALLOW_USERS',
    schema: loginList,
    expect: 'comma-separated Gitea logins (or a JSON array in the file)',
    fix: 'List the logins allowed to trigger the bot, e.g. alice,bob; leave it unset to allow every user with write access.',
  },
  denyUsers: {
    env: 'CCWEB_DENY_USERS',
    schema: loginList,
    expect: 'comma-separated Gitea logins (or a JSON array in the file)',
    fix: 'List the logins never allowed to trigger the bot, e.g. mallory.',
  },
  leaseTtlMs: {
    env: 'CCWEB_LEASE_TTL_MS',
    schema: integer(1000, 24 * 60 * 60 * 1000),
    expect: 'an integer number of milliseconds from 1000 to 86400000',
    fix: 'Set it to how long a task lease lives without a heartbeat, e.g. 60000 (default).',
  },
  turnTimeoutMs: {
    env: 'CCWEB_TURN_TIMEOUT_MS',
    schema: integer(1000, 24 * 60 * 60 * 1000),
    expect: 'an integer number of milliseconds from 1000 to 86400000',
    fix: 'Set it to the longest a Codex turn may run, e.g. 1800000 (30 min, default).',
  },
  workspaceTimeoutMs: {
    env: 'CCWEB_WORKSPACE_TIMEOUT_MS',
    schema: integer(1000, 24 * 60 * 60 * 1000),
    expect: 'an integer number of milliseconds from 1000 to 86400000',
    fix: "Set it to the longest a task's workspace preparation (clone or fetch, and its worktree) may take, e.g. 120000 (2 min, default); a first clone of a repository with 10⁵ files on a loaded host can take several minutes.",
  },
  deliveryRetentionDays: {
    env: 'CCWEB_DELIVERY_RETENTION_DAYS',
    schema: integer(1, 3650),
    expect: 'an integer number of days from 1 to 3650',
    fix: "Set it to how long a delivery record answers repeats, e.g. 30 (default); keep it longer than anyone would press Gitea's Replay.",
  },
  taskRetentionDays: {
    env: 'CCWEB_TASK_RETENTION_DAYS',
    schema: integer(1, 36500),
    expect: 'an integer number of days from 1 to 36500',
    fix: 'Set it to how long finished tasks stay in the store, e.g. 365, or leave it unset to keep them forever (default); audit history is always kept.',
  },
  securityEventRetentionDays: {
    env: 'CCWEB_SECURITY_EVENT_RETENTION_DAYS',
    schema: integer(1, 3650),
    expect: 'an integer number of days from 1 to 3650',
    fix: 'Set it to how long failed-authentication records (per source and 10-minute window) and refused-mention counts (per author and UTC day) are kept, e.g. 30 (default).',
  },
  intakeConfirmAttempts: {
    env: 'CCWEB_INTAKE_CONFIRM_ATTEMPTS',
    schema: integer(1, 100),
    expect: 'an integer from 1 to 100',
    fix: "Set it to how many times a mention is checked with Gitea (its comment and the author's permission) while Gitea fails for a passing reason, e.g. 10 (default: 5 s, 10 s, 20 s … up to 10 min apart, about 35 minutes); after that it waits for a Replay.",
  },
  intakeMaxPending: {
    env: 'CCWEB_INTAKE_MAX_PENDING',
    schema: integer(1, 100_000),
    expect: 'an integer from 1 to 100000',
    fix: 'Set it to how many mentions may wait for Gitea to confirm them at once, e.g. 1000 (default); one more is answered 503 and stores nothing.',
  },
  archiveAfterMinutes: {
    env: 'CCWEB_ARCHIVE_AFTER_MINUTES',
    schema: integer(0, 525_600),
    expect: 'an integer number of minutes from 0 to 525600',
    fix: 'Set it to how long a finished task stays in the task lists and counts before it is archived, e.g. 60 (default); archived tasks stay readable by id and in the audit log.',
  },
  delivery: {
    env: 'CCWEB_DELIVERY',
    schema: z.string().trim().toLowerCase().pipe(z.enum(['pull_request', 'branch', 'off'])),
    expect: 'one of pull_request, branch, off',
    fix: "Set it to pull_request (default: the agent's changes go to a branch and a pull request), branch (a branch only) or off (nothing is pushed; the change is kept as a local branch and a patch file, listed in the task detail).",
  },
  branchPrefix: {
    env: 'CCWEB_BRANCH_PREFIX',
    schema: nonEmpty.regex(/^[A-Za-z0-9][A-Za-z0-9._/-]{0,60}$/).refine((s) => !s.includes('..') && !s.includes('//') && !s.endsWith('.lock')),
    expect: 'a branch-name prefix of letters, digits, ., _, - and /, e.g. ccweb/',
    fix: 'Set it to the prefix of the branches the bot pushes (issue-<N> or pr-<N> follows it), e.g. ccweb/ (default).',
  },
  locale: {
    env: 'CCWEB_LOCALE',
    schema: z.string().trim().toLowerCase().pipe(z.enum(LOCALES)),
    expect: `one of ${LOCALES.join(', ')}`,
    fix: 'Set it to the language of the comments the bot writes itself (the receipt, failure results and limit notices): zh (default) or en.',
  },
  receiptEditIntervalSeconds: {
    env: 'CCWEB_RECEIPT_EDIT_INTERVAL_SECONDS',
    schema: integer(1, 3600),
    expect: 'an integer from 1 to 3600 (seconds)',
    fix: 'Set it to the least time between two progress edits of a task\'s receipt, e.g. 15 (default); the final edit, once the task ends, does not wait.',
  },
  logLevel: {
    env: 'CCWEB_LOG_LEVEL',
    schema: z.string().trim().toLowerCase().pipe(z.enum(LOG_LEVELS)),
    expect: `one of ${LOG_LEVELS.join(', ')}`,
    fix: 'Set it to info (default), or debug while diagnosing.',
  },
  ...LIMIT_KEYS,
} satisfies Record<string, KeySpec>;

export type ConfigKey = keyof typeof KEYS;

export const CONFIG_KEYS = Object.keys(KEYS) as ConfigKey[];

export const DEFAULTS = {
  host: '127.0.0.1',
  port: 8080,
  dataDir: './data',
  giteaMcpCommand: 'gitea-mcp',
  webhookPath: '/api/gitea/webhook',
  webhookMaxBytes: 2 * 1024 * 1024,
  // Gitea sends a webhook in one go from nearby: 10 s for headers and 30 s for up to 2 MiB of body
  // are generous for it and short for a client that trickles bytes to hold a connection.
  httpHeadersTimeoutSeconds: 10,
  httpBodyTimeoutSeconds: 30,
  httpMaxConnections: 256,
  // A PostgreSQL restart or failover takes seconds to a minute; two minutes ride it out without a restart.
  databaseOutageSeconds: 120,
  nodeHeartbeatSeconds: 10,
  // Two, not more: every running task holds a Codex app-server process, a gitea-mcp process and a
  // checkout, and turns mostly wait on the model API, so extra slots buy little latency but add rate
  // limit pressure and spend. Tasks on one repository are serialised by its lock anyway, so this only
  // bounds cross-repository parallelism. Raise it on a bigger machine.
  maxConcurrentTasks: 2,
  allowUsers: [] as string[],
  denyUsers: [] as string[],
  // A lease is renewed by heartbeats; a crashed worker's task is recovered about a minute later.
  leaseTtlMs: 60_000,
  // Codex turns on real repositories (clone, build, test, reply) can take many minutes.
  turnTimeoutMs: 30 * 60_000,
  // A clone over the network is the slow step; two minutes fit most repositories.
  workspaceTimeoutMs: 120_000,
  logLevel: 'info' as LogLevel,
  locale: DEFAULT_LOCALE as Locale,
  // The receipt shows a task's progress by edits: one every 15 s at most keeps a
  // half-hour turn's elapsed time fresh without flooding Gitea (or the thread's watchers' feeds).
  receiptEditIntervalSeconds: 15,
  // Gitea never redelivers by itself; a month covers an operator pressing Replay after an outage.
  deliveryRetentionDays: 30,
  // Finished tasks are archived an hour after they finish: the task lists and counts then follow live
  // work, not history (archived records stay readable by key).
  archiveAfterMinutes: 60,
  // Change delivery: the agent's changes reach Gitea as a branch and a pull request.
  delivery: 'pull_request' as 'pull_request' | 'branch' | 'off',
  branchPrefix: 'ccweb/',
  // Long enough to look back at an incident; the records are aggregated, so this is cheap.
  securityEventRetentionDays: 30,
  // A mention Gitea could not yet confirm: asked again with backoff, bounded.
  intakeConfirmAttempts: 10,
  intakeMaxPending: 1000,
  ...LIMIT_DEFAULTS,
  agentIsolation: 'on' as 'on' | 'off',
  // Off: an untrusted prompt plus network is a way out for whatever the agent can read (the
  // repository itself); the bot's Gitea tools work without it (gitea-mcp runs outside the sandbox).
  agentNetwork: 'off' as 'on' | 'off',
};
