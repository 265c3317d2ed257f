// doctor's checks of this host's setup that need no outside service: Node, the secrets, the data and
// workspace directories, the address, the database, the store's lock. Each asks the rule serve
// decides its start with (src/service/start-refusals.ts lists them), so the two cannot disagree:
// what serve refuses fails here, what serve only warns about warns here.
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import type { Config } from '../config/index.js';
import { weakSecretProblems } from '../config/secret-strength.js';
import { nodeVersionVerdict } from '../service/node-version.js';
import { OperatorError } from '../service/operator-error.js';
import { checkDataDir, listenError, storeDirOf, storeOpenError } from '../service/startup-checks.js';
import { probeDatabase } from './probe-database.js';
import { describeLockHolder, liveLockHolder } from '../data-dir/data-dir-lock.js';
import type { CheckResult, DoctorCheck, Quote } from './doctor-checks.js';

/**
 * An operator error of serve's start-up checks as a failed check: its problem and fix. `quote`
 * where the problem carries outside text (a database's error message); the others are made of
 * doctor's words and the configuration's paths and addresses only.
 */
function failed(check: DoctorCheck, err: unknown, quote: Quote = (t) => t): CheckResult {
  if (err instanceof OperatorError) return { status: 'fail', check, detail: `${quote(err.problem)} [${err.key}]`, fix: err.fix };
  throw err;
}

export function checkNode(version: string): CheckResult {
  const v = nodeVersionVerdict(version);
  // serve starts on an older Node and warns: so does this.
  if (!v.supported) return { status: 'warn', check: 'node', detail: `${v.text}; serve starts on it, with a warning`, fix: v.fix };
  return { status: 'ok', check: 'node', detail: v.text };
}

/** serve refuses weak secrets unless started with --allow-weak-secrets; so this fails unless given it too. */
export function checkSecrets(config: Config, allowWeak: boolean): CheckResult {
  const problems = weakSecretProblems(config);
  if (problems.length === 0) {
    return { status: 'ok', check: 'webhook-secret', detail: `${config.webhookSecret.length} webhook secret(s) and the admin token set, each long enough and its own value` };
  }
  return {
    status: allowWeak ? 'warn' : 'fail',
    check: 'webhook-secret',
    detail: `${problems.join(' ')}${allowWeak ? ' (accepted: --allow-weak-secrets)' : ' serve refuses to start with it.'}`,
    fix: 'give each secret its own random value of at least 16 characters: `openssl rand -hex 32` (a webhook secret in both Gitea and CCWEB_WEBHOOK_SECRET)',
  };
}

export function checkDataDirectory(dataDir: string, options: { embedded: boolean }): CheckResult {
  try {
    checkDataDir(dataDir, options);
  } catch (err) {
    return failed('data-dir', err);
  }
  return { status: 'ok', check: 'data-dir', detail: `${dataDir} is on storage and takes a durable write` };
}

/** Not checked by serve at start (a task creates it): stricter here, so a wrong path shows before the first task. */
export function checkWorkspaceRoot(dir: string): CheckResult {
  try {
    mkdirSync(dir, { recursive: true });
    const probe = join(dir, `.ccweb-doctor-${process.pid}`);
    writeFileSync(probe, 'probe');
    rmSync(probe);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'error';
    return { status: 'fail', check: 'workspace-root', detail: `${dir} is not writable (${code})`, fix: 'create it and give the service user write access, or point CCWEB_WORKSPACE_ROOT elsewhere' };
  }
  return { status: 'ok', check: 'workspace-root', detail: `${dir} writable` };
}

/** The address serve listens on: listened on and closed again, its error read as serve reads it. */
export async function checkPort(config: Config): Promise<CheckResult> {
  const where = `${config.host}:${config.port}`;
  if (config.port === 0) return { status: 'ok', check: 'port', detail: `port 0: serve listens on a free port of ${config.host}` };
  const server = createServer();
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host: config.host, port: config.port, exclusive: true }, () => resolve());
    });
  } catch (err) {
    const holder = liveLockHolder(storeDirOf(config));
    // The running service holds both its data directory and its port: doctor runs beside it.
    if ((err as NodeJS.ErrnoException).code === 'EADDRINUSE' && holder !== null) {
      return {
        status: 'warn',
        check: 'port',
        detail: `${where} is in use, and ${describeLockHolder(holder)} holds this data directory: presumably the running service`,
        fix: 'fine if that is the running service; a second serve with this configuration would refuse to start',
      };
    }
    return failed('port', listenError(err, config));
  } finally {
    await new Promise<void>((resolve) => (server.listening ? server.close(() => resolve()) : resolve()));
  }
  return { status: 'ok', check: 'port', detail: `${where} can be listened on` };
}

export async function checkDatabase(config: Config, timeoutMs: number, quote: Quote): Promise<CheckResult> {
  if (!config.databaseUrl) return { status: 'skip', check: 'database', detail: 'CCWEB_DATABASE_URL unset: the embedded store in the data directory' };
  let probe;
  try {
    probe = await probeDatabase(config.databaseUrl, timeoutMs);
  } catch (err) {
    return failed('database', storeOpenError(err, config.dataDir), quote);
  }
  const pending = probe.pending.length > 0 ? `; serve brings it to version ${probe.known} at start` : '';
  return { status: 'ok', check: 'database', detail: `${probe.where} answers; schema version ${probe.schemaVersion}${pending}` };
}

/**
 * serve refuses a data directory another live process holds (exit 75). That process is normally the
 * running service doctor is run beside: a warning, which says what a second start would do.
 */
export function checkStoreLock(config: Config): CheckResult {
  const holder = liveLockHolder(storeDirOf(config));
  if (holder === null) return { status: 'ok', check: 'store-lock', detail: 'store not in use (a lock left by a process that is gone is taken over at start)' };
  return {
    status: 'warn',
    check: 'store-lock',
    detail: `store in use by live ${describeLockHolder(holder)}`,
    fix: 'fine if that is the running service; a second serve on this data directory would refuse to start (exit 75)',
  };
}
