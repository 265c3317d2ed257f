// Start-up checks that turn an operator's mistake into one clear line before anything is opened:
// the data directory, the Codex and gitea-mcp commands, CODEX_HOME, Gitea and its token, the port.
import { accessSync, closeSync, constants, existsSync, fsyncSync, mkdirSync, openSync, realpathSync, rmSync, statSync, writeSync } from 'node:fs';
import path from 'node:path';
import type { Config } from '../config/index.js';
import type { GiteaClient } from '../gitea/index.js';
import { GiteaError } from '../gitea/index.js';
import { resolveExecutable } from '../sessions/mcp-preflight.js';
import { DataDirLockedError } from '../data-dir/data-dir-lock.js';
import { StoreError } from '../store/types.js';
import { storeFormatOf } from '../upgrade/store-format.js';
import { SQLITE_FILE } from '../store/sqlite-store.js';
import { sqliteStoreProblem, type SqliteStoreProblem } from './sqlite-store-check.js';
import GITEA_MCP_PIN from '../config/gitea-mcp-pin.json' with { type: 'json' };
import { OperatorError, errnoOf } from './operator-error.js';
import { refusal } from './start-refusals.js';

/** Pseudo file systems: files there are not storage (writes to /proc or /sys loop or vanish). */
const NOT_STORAGE = ['/proc', '/sys', '/dev'];

/**
 * The data directory exists (created if needed) and takes a durable write. `embedded`: the store is
 * the data directory's own (no database URL), so its format is checked too: an earlier version's
 * journal without the SQLite file is refused until `migrate-store` moved it, and a SQLite file this
 * version cannot use (no database, unreadable, a newer schema) is refused as it is.
 */
export function checkDataDir(dataDir: string, options: { embedded: boolean }): void {
  const key = 'CCWEB_DATA_DIR';
  // Where it really is: the deepest existing ancestor, symbolic links resolved.
  let existing = path.resolve(dataDir);
  while (!existsSync(existing) && path.dirname(existing) !== existing) existing = path.dirname(existing);
  let real = existing;
  try {
    real = realpathSync(existing);
  } catch {
    // keep the unresolved path
  }
  if (NOT_STORAGE.some((p) => real === p || real.startsWith(`${p}/`))) {
    throw refusal('data_dir_not_storage', `data directory ${dataDir} is on ${real.split('/').slice(0, 2).join('/')}, which is not storage`, key, 'set it to a directory on a real disk, e.g. /var/lib/ccweb-gitea');
  }
  try {
    mkdirSync(dataDir, { recursive: true });
  } catch (error) {
    throw dataDirError(dataDir, error);
  }
  const probe = path.join(dataDir, `.ccweb-probe-${process.pid}`);
  try {
    const fd = openSync(probe, 'w');
    try {
      writeSync(fd, 'probe');
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    rmSync(probe, { force: true });
  } catch (error) {
    rmSync(probe, { force: true });
    throw dataDirError(dataDir, error);
  }
  if (options.embedded) {
    const store = path.join(dataDir, 'store');
    const format = storeFormatOf(store);
    if (format === 'journal') {
      throw refusal(
        'store_needs_migration',
        `${store} holds the store of an earlier ccweb-gitea (a journal); this version keeps it in SQLite`,
        key,
        'stop the service and run `ccweb-gitea migrate-store` once (it moves the store in place), then start it again',
      );
    }
    let problem: SqliteStoreProblem | null = null;
    try {
      problem = format === 'sqlite' ? sqliteStoreProblem(path.join(store, SQLITE_FILE)) : null;
    } catch (error) {
      throw dataDirError(dataDir, error);
    }
    if (problem) throw storeFileRefusal(problem);
  }
}

/** The store file this version cannot use: nothing is written to it; the fix is the operator's. */
function storeFileRefusal({ code, problem }: SqliteStoreProblem): OperatorError {
  return code === 'store_schema_too_new'
    ? refusal(code, problem, 'CCWEB_DATA_DIR', 'run the newer ccweb-gitea that wrote it, or restore the backup made before the upgrade (docs/operations.md, Backups and upgrades)')
    : refusal(code, problem, 'CCWEB_DATA_DIR', 'restore the store from a backup (docs/operations.md, Backups and upgrades), or move the file away to start with an empty store');
}

function dataDirError(dataDir: string, error: unknown): OperatorError {
  const code = errnoOf(error) ?? 'error';
  const why =
    code === 'EACCES' || code === 'EPERM'
      ? `the service user (uid ${process.getuid?.() ?? '?'}) may not write there: chown it to that user or choose another directory`
      : code === 'EROFS'
        ? 'it is on a read-only file system: choose a writable directory'
        : code === 'ENOTDIR' || code === 'EEXIST'
          ? 'a file is in the way: point it at a directory'
          : code === 'ENOSPC'
            ? 'the disk is full: free space'
            : 'choose a writable directory';
  return refusal('data_dir_unusable', `data directory ${dataDir} is not usable (${code})`, 'CCWEB_DATA_DIR', why);
}

/** The commands the service spawns, each with its key and fix. */
const COMMANDS = {
  codex: {
    refusal: 'codex_command_missing',
    key: 'CCWEB_CODEX_COMMAND',
    what: 'the Codex command',
    fix: 'unset it to use the bundled @openai/codex, or set it to the codex executable',
  },
  'gitea-mcp': {
    refusal: 'gitea_mcp_command_missing',
    key: 'CCWEB_GITEA_MCP_COMMAND',
    what: 'the gitea-mcp command',
    fix: `install gitea-mcp ${GITEA_MCP_PIN.revision} (\`node scripts/install-gitea-mcp.mjs --to /usr/local/bin\`) and set it to its path`,
  },
} as const;

/** A command the service will spawn resolves to an executable file. */
export function checkCommand(which: keyof typeof COMMANDS, command: string): void {
  const c = COMMANDS[which];
  if (resolveExecutable(command) === null) {
    throw refusal(c.refusal, `${c.what} \`${command}\` was not found or is not executable`, c.key, c.fix);
  }
}

/**
 * CODEX_HOME (where Codex keeps its login, configuration and state) is a directory the service user
 * may write: Codex exits at start otherwise ("CODEX_HOME points to …, but that path does not exist",
 * or it cannot open its state database), which reads like a broken binary or a broken sandbox.
 */
export function checkCodexHome(codexHome: string): void {
  const login = `\`CODEX_HOME=${codexHome} codex login\` as the service user (docs/operations.md#codex)`;
  let isDir: boolean;
  try {
    isDir = statSync(codexHome).isDirectory();
  } catch (error) {
    const code = errnoOf(error) ?? 'error';
    const why = code === 'ENOENT' ? 'does not exist' : `cannot be read (${code})`;
    throw refusal('codex_home_unusable', `CODEX_HOME ${codexHome} ${why}`, 'CODEX_HOME', `create it as the service user (\`mkdir -m 700 ${codexHome}\`) and log in there: ${login}; or point CODEX_HOME at the folder you logged in with`);
  }
  if (!isDir) throw refusal('codex_home_unusable', `CODEX_HOME ${codexHome} is not a directory`, 'CODEX_HOME', 'point CODEX_HOME at a directory (Codex keeps its login and state there)');
  try {
    accessSync(codexHome, constants.W_OK | constants.X_OK);
  } catch (error) {
    throw refusal(
      'codex_home_unusable',
      `CODEX_HOME ${codexHome} is not writable by the service user (uid ${process.getuid?.() ?? '?'}, ${errnoOf(error) ?? 'error'})`,
      'CODEX_HOME',
      `Codex writes its state there: \`chown -R\` it to the service user (systemd: StateDirectory=), or point CODEX_HOME elsewhere and log in there: ${login}`,
    );
  }
}

/** What happened when the service asked Gitea who the token belongs to. */
export type GiteaProbe = { ok: true; login: string } | { ok: false; reason: string };

/**
 * `GET /user` with the configured token. A token Gitea rejects is fatal (nothing will ever work); a
 * Gitea that cannot be reached is not (the service starts and reports not-ready, see readiness).
 */
export async function probeGitea(gitea: Pick<GiteaClient, 'getCurrentUser'>, giteaUrl: string): Promise<GiteaProbe> {
  try {
    const user = await gitea.getCurrentUser();
    return { ok: true, login: user.login };
  } catch (error) {
    if (error instanceof GiteaError && (error.code === 'gitea_unauthorized' || error.code === 'gitea_forbidden')) {
      throw refusal(
        'gitea_token_rejected',
        `Gitea at ${giteaUrl} rejects the token (HTTP ${error.status ?? '401'} on GET /api/v1/user)`,
        'CCWEB_GITEA_TOKEN',
        "create a new access token for the bot user (Settings → Applications, scopes write:issue, read:repository, read:user) and set it; check CCWEB_GITEA_URL points at the right Gitea",
      );
    }
    if (error instanceof GiteaError && error.code === 'gitea_not_found') {
      throw refusal('gitea_url_not_gitea', `${giteaUrl} does not answer like Gitea (404 on GET /api/v1/user)`, 'CCWEB_GITEA_URL', "set it to Gitea's base URL, e.g. https://gitea.example.com (without /api/v1)");
    }
    return { ok: false, reason: error instanceof Error ? error.message.slice(0, 200) : String(error) };
  }
}

/** An error from `listen()` as an operator error, or the error itself. */
export function listenError(error: unknown, config: Pick<Config, 'host' | 'port'>): unknown {
  const code = errnoOf(error);
  const where = `${config.host}:${config.port}`;
  if (code === 'EADDRINUSE') {
    return refusal('address_unusable', `port ${where} is already in use by another process`, 'CCWEB_PORT', 'stop the other process (`ss -ltnp` shows it) or set another port');
  }
  if (code === 'EACCES') {
    return refusal('address_unusable', `not allowed to listen on ${where}`, 'CCWEB_PORT', 'use a port above 1023, or give node CAP_NET_BIND_SERVICE');
  }
  if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND' || code === 'EAI_AGAIN') {
    return refusal('address_unusable', `cannot listen on ${where}: no such local address`, 'CCWEB_HOST', 'set it to an address of this machine, e.g. 127.0.0.1 or 0.0.0.0');
  }
  return error;
}

/**
 * The store's folder, locked by the process that opens it: the embedded store's files, or on PostgreSQL
 * the node's lock alone (`store-replica`, where an earlier version kept its replica and its lock, so one
 * still running there is refused too).
 */
export function storeDirOf(config: Pick<Config, 'dataDir' | 'databaseUrl'>): string {
  return path.join(config.dataDir, config.databaseUrl ? 'store-replica' : 'store');
}

/** An error from opening the store as an operator error, or the error itself. */
export function storeOpenError(error: unknown, dataDir: string): unknown {
  if (error instanceof DataDirLockedError) {
    return refusal('store_locked', error.message, 'CCWEB_DATA_DIR', 'another ccweb-gitea uses this data directory: stop it, or give this one its own directory');
  }
  if (error instanceof StoreError && (error.code === 'store_unreadable' || error.code === 'store_schema_too_new')) {
    return storeFileRefusal({ code: error.code, problem: error.message });
  }
  if (error instanceof StoreError && error.code === 'database_writer_taken') {
    return refusal('database_writer_taken', error.message, 'CCWEB_DATABASE_URL', 'stop the other node, or give this one its own database');
  }
  if (error instanceof StoreError && error.code === 'node_id_in_use') {
    return refusal('node_id_in_use', error.message, 'CCWEB_NODE_ID', 'give each node its own CCWEB_NODE_ID, or stop the other process first');
  }
  if (error instanceof StoreError && error.code === 'store_needs_migration') {
    return refusal('database_needs_migration', error.message, 'CCWEB_DATABASE_URL', 'stop every node, run `ccweb-gitea migrate-store` once, then start them again');
  }
  if (error instanceof StoreError && error.code === 'database_schema_too_new') {
    return refusal('database_schema_too_new', error.message, 'CCWEB_DATABASE_URL', 'upgrade this node');
  }
  if (error instanceof StoreError && error.code === 'database_migration_blocked') {
    return refusal('database_migration_blocked', error.message, 'CCWEB_DATABASE_URL', 'stop the other nodes first (this upgrade cannot run beside them)');
  }
  if (error instanceof StoreError && error.code === 'database_unreachable') {
    return refusal('database_unreachable', error.message, 'CCWEB_DATABASE_URL', 'check the URL, that PostgreSQL listens there and that the database exists (createdb); a supervisor restarts the node meanwhile');
  }
  const code = errnoOf(error);
  if (code !== undefined && /^E[A-Z]+$/.test(code)) return dataDirError(dataDir, error);
  return error;
}
