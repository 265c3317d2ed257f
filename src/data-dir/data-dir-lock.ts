// One process per data directory, by a LOCK file in its store folder naming its owner, so a second
// `open()` fails loudly. On SQLite a second process could write the file too, and two services would
// then both run tasks, each hearing only its own in-process notifications; on PostgreSQL the directory
// holds the node's workspaces and Codex home, and a second process would share them and end the first's
// agent processes as leftovers at its start. It also keeps `migrate-store` off the files of an earlier
// version still running. A lock left by a process that died (SIGKILL) is taken over.
//
// A pid means something only on its host and in its pid namespace: in containers every service is
// pid 1, so a LOCK says where its pid lives (`{pid, host, pidNamespace, since}`). A lock from another
// host or namespace, whose process cannot be looked at from here, counts as live while its holder
// keeps touching it (every 15 s): one untouched for 2 minutes was left by a process that is gone (a
// container killed, a host that lost power), and the service restarted in a new container takes it
// over. A LOCK of an earlier version (the pid alone) is judged by its pid, as that version did.
import { linkSync, readFileSync, readlinkSync, statSync, unlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';

/** Another live process holds the directory (`code` as the store's errors have one: `store_locked`). */
export class DataDirLockedError extends Error {
  readonly code = 'store_locked';
  constructor(message: string) {
    super(message);
    this.name = 'DataDirLockedError';
  }
}

export interface LockHolder {
  pid: number;
  host?: string;
  pidNamespace?: string;
  since?: string;
  /** When the LOCK was last touched (its mtime), epoch ms. */
  touchedAt?: number;
}

export const LOCK_HEARTBEAT_MS = 15_000;
export const LOCK_STALE_AFTER_MS = 120_000;

/** This process's pid namespace (`pid:[4026531836]`), or undefined where /proc does not say. */
function pidNamespace(): string | undefined {
  try {
    return readlinkSync('/proc/self/ns/pid');
  } catch {
    return undefined;
  }
}

export function describeLockHolder(holder: LockHolder): string {
  const where = [holder.host !== undefined ? `on host ${holder.host}` : '', holder.pidNamespace !== undefined && holder.pidNamespace !== pidNamespace() ? `in pid namespace ${holder.pidNamespace}` : '', holder.since !== undefined ? `since ${holder.since}` : ''];
  const touched = elsewhere(holder) && holder.touchedAt !== undefined ? ` (its LOCK touched ${new Date(holder.touchedAt).toISOString()}; taken over once untouched for ${LOCK_STALE_AFTER_MS / 60_000} minutes)` : '';
  return [`process ${holder.pid}`, ...where.filter((w) => w !== '')].join(' ') + touched;
}

export function acquireProcessLock(dir: string): () => void {
  const path = join(dir, 'LOCK');
  const namespace = pidNamespace();
  const text = `${JSON.stringify({ pid: process.pid, host: hostname(), ...(namespace !== undefined ? { pidNamespace: namespace } : {}), since: new Date().toISOString() })}\n`;
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      // Written whole under a private name, then linked into place: nobody ever reads a LOCK
      // without its owner, and of two processes taking over a stale lock only one link succeeds.
      const tmp = `${path}.${process.pid}.tmp`;
      writeFileSync(tmp, text);
      try {
        linkSync(tmp, path);
      } finally {
        unlinkSync(tmp);
      }
      // The heartbeat that tells processes elsewhere (which cannot see this pid) that the lock is held.
      const heartbeat = setInterval(() => {
        try {
          const now = new Date();
          if (readFileSync(path, 'utf8') === text) utimesSync(path, now, now);
        } catch {
          // gone: nothing to keep alive
        }
      }, LOCK_HEARTBEAT_MS);
      heartbeat.unref();
      return () => {
        clearInterval(heartbeat);
        try {
          if (readFileSync(path, 'utf8') === text) unlinkSync(path);
        } catch {
          // already gone
        }
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const owner = liveLockHolder(dir);
      if (owner !== null) throw new DataDirLockedError(`store ${dir} is in use by ${describeLockHolder(owner)}`);
      unlinkSync(path);
    }
  }
  throw new DataDirLockedError(`store ${dir}: could not take the lock`);
}

/** The owner a LOCK names, or undefined when it names none (then it is stale). */
export function parseLock(text: string): LockHolder | undefined {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return undefined;
  }
  // An earlier version's LOCK: the pid alone.
  if (typeof doc === 'number') return Number.isInteger(doc) && doc > 0 ? { pid: doc } : undefined;
  if (doc === null || typeof doc !== 'object') return undefined;
  const { pid, host, pidNamespace: ns, since } = doc as Record<string, unknown>;
  if (!Number.isInteger(pid) || (pid as number) <= 0) return undefined;
  const str = (v: unknown) => (typeof v === 'string' ? v : undefined);
  return { pid: pid as number, ...(str(host) !== undefined ? { host: str(host)! } : {}), ...(str(ns) !== undefined ? { pidNamespace: str(ns)! } : {}), ...(str(since) !== undefined ? { since: str(since)! } : {}) };
}

/** Whether the LOCK's pid lives on another host or in another pid namespace, where it cannot be looked at. */
function elsewhere(holder: LockHolder): boolean {
  return (holder.host !== undefined && holder.host !== hostname()) || (holder.pidNamespace !== undefined && holder.pidNamespace !== pidNamespace());
}

/** Whether the process a LOCK names is alive; one elsewhere is taken to be while it touches its LOCK. */
export function holderIsLive(holder: LockHolder, now = Date.now()): boolean {
  if (elsewhere(holder)) return holder.touchedAt === undefined || now - holder.touchedAt < LOCK_STALE_AFTER_MS;
  return holder.pid !== process.pid && isAlive(holder.pid);
}

/**
 * The live process (not this one) whose lock is on the store in `dir`, or null: no lock, or one left
 * by a process that is gone (taken over at the next open).
 */
export function liveLockHolder(dir: string): LockHolder | null {
  let holder: LockHolder | undefined;
  try {
    const path = join(dir, 'LOCK');
    holder = parseLock(readFileSync(path, 'utf8'));
    if (holder !== undefined) holder.touchedAt = statSync(path).mtimeMs;
  } catch {
    return null;
  }
  return holder !== undefined && holderIsLive(holder) ? holder : null;
}

/** Whether a process with this pid exists (EPERM: it exists, owned by someone else). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
