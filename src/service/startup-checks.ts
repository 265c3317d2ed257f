// Start-up checks that turn an operator's mistake into one clear line before anything is opened
// (issue 15): the data directory, the Codex and gitea-mcp commands, Gitea and its token, the port.
import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, realpathSync, rmSync, writeSync } from 'node:fs';
import path from 'node:path';
import type { Config } from '../config/index.js';
import type { GiteaClient } from '../gitea/index.js';
import { GiteaError } from '../gitea/index.js';
import { resolveExecutable } from '../sessions/mcp-preflight.js';
import { StoreError } from '../store/types.js';
import { EXIT_CODES, OperatorError, errnoOf } from './operator-error.js';

/** Pseudo file systems: files there are not storage (writes to /proc or /sys loop or vanish). */
const NOT_STORAGE = ['/proc', '/sys', '/dev'];

/** The data directory exists (created if needed) and takes a durable write. */
export function checkDataDir(dataDir: string): void {
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
    throw new OperatorError(`data directory ${dataDir} is on ${real.split('/').slice(0, 2).join('/')}, which is not storage`, key, 'set it to a directory on a real disk, e.g. /var/lib/ccweb-gitea', EXIT_CODES.config);
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
  return new OperatorError(`data directory ${dataDir} is not usable (${code})`, 'CCWEB_DATA_DIR', why, EXIT_CODES.cantCreate);
}

/** A command the service will spawn resolves to an executable file. */
export function checkCommand(command: string, key: string, what: string, fix: string): void {
  if (resolveExecutable(command) === null) {
    throw new OperatorError(`${what} \`${command}\` was not found or is not executable`, key, fix, EXIT_CODES.config);
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
      throw new OperatorError(
        `Gitea at ${giteaUrl} rejects the token (HTTP ${error.status ?? '401'} on GET /api/v1/user)`,
        'CCWEB_GITEA_TOKEN',
        "create a new access token for the bot user (Settings → Applications, scopes write:issue, read:repository, read:user) and set it; check CCWEB_GITEA_URL points at the right Gitea",
        EXIT_CODES.unavailable,
      );
    }
    if (error instanceof GiteaError && error.code === 'gitea_not_found') {
      throw new OperatorError(`${giteaUrl} does not answer like Gitea (404 on GET /api/v1/user)`, 'CCWEB_GITEA_URL', "set it to Gitea's base URL, e.g. https://gitea.example.com (without /api/v1)", EXIT_CODES.config);
    }
    return { ok: false, reason: error instanceof Error ? error.message.slice(0, 200) : String(error) };
  }
}

/** An error from `listen()` as an operator error, or the error itself. */
export function listenError(error: unknown, config: Pick<Config, 'host' | 'port'>): unknown {
  const code = errnoOf(error);
  const where = `${config.host}:${config.port}`;
  if (code === 'EADDRINUSE') {
    return new OperatorError(`port ${where} is already in use by another process`, 'CCWEB_PORT', 'stop the other process (`ss -ltnp` shows it) or set another port', EXIT_CODES.config);
  }
  if (code === 'EACCES') {
    return new OperatorError(`not allowed to listen on ${where}`, 'CCWEB_PORT', 'use a port above 1023, or give node CAP_NET_BIND_SERVICE', EXIT_CODES.config);
  }
  if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND' || code === 'EAI_AGAIN') {
    return new OperatorError(`cannot listen on ${where}: no such local address`, 'CCWEB_HOST', 'set it to an address of this machine, e.g. 127.0.0.1 or 0.0.0.0', EXIT_CODES.config);
  }
  return error;
}

/** An error from opening the store as an operator error, or the error itself. */
export function storeOpenError(error: unknown, dataDir: string): unknown {
  if (error instanceof StoreError && error.code === 'store_locked') {
    return new OperatorError(`${error.message}`, 'CCWEB_DATA_DIR', 'another ccweb-gitea uses this data directory: stop it, or give this one its own directory', EXIT_CODES.tempFail);
  }
  if (error instanceof StoreError && error.code === 'database_writer_taken') {
    return new OperatorError(error.message, 'CCWEB_DATABASE_URL', 'stop the other node, or give this one its own database', EXIT_CODES.tempFail);
  }
  if (error instanceof StoreError && error.code === 'database_schema_too_new') {
    return new OperatorError(error.message, 'CCWEB_DATABASE_URL', 'upgrade this node', EXIT_CODES.config);
  }
  if (error instanceof StoreError && error.code === 'database_migration_blocked') {
    return new OperatorError(error.message, 'CCWEB_DATABASE_URL', 'stop the other nodes first (this upgrade cannot run beside them)', EXIT_CODES.tempFail);
  }
  if (error instanceof StoreError && error.code === 'database_unreachable') {
    return new OperatorError(error.message, 'CCWEB_DATABASE_URL', 'check the URL, that PostgreSQL listens there and that the database exists (createdb); a supervisor restarts the node meanwhile', EXIT_CODES.tempFail);
  }
  const code = errnoOf(error);
  if (code !== undefined && /^E[A-Z]+$/.test(code)) return dataDirError(dataDir, error);
  return error;
}
