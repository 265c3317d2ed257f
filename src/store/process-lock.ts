import { linkSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { StoreError } from './types.js';

/**
 * One process per store directory. Two processes appending to one journal would interleave lines
 * and each replay only its own view; a lock file with the owner's pid makes the second `open()`
 * fail loudly instead. A lock left by a process that died (SIGKILL) is taken over.
 */
export function acquireProcessLock(dir: string): () => void {
  const path = join(dir, 'LOCK');
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      // Written whole under a private name, then linked into place: nobody ever reads a LOCK
      // without its pid, and of two processes taking over a stale lock only one link succeeds.
      const tmp = `${path}.${process.pid}.tmp`;
      writeFileSync(tmp, String(process.pid));
      try {
        linkSync(tmp, path);
      } finally {
        unlinkSync(tmp);
      }
      return () => {
        try {
          if (readFileSync(path, 'utf8') === String(process.pid)) unlinkSync(path);
        } catch {
          // already gone
        }
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const owner = liveLockHolder(dir);
      if (owner !== null) throw new StoreError('store_locked', `store ${dir} is in use by process ${owner}`);
      unlinkSync(path);
    }
  }
  throw new StoreError('store_locked', `store ${dir}: could not take the lock`);
}

/**
 * The live process (not this one) whose lock is on the store in `dir`, or null: no lock, or one left
 * by a process that is gone (taken over at the next open).
 */
export function liveLockHolder(dir: string): number | null {
  let owner: number;
  try {
    owner = Number(readFileSync(join(dir, 'LOCK'), 'utf8'));
  } catch {
    return null;
  }
  return Number.isInteger(owner) && owner > 0 && owner !== process.pid && isAlive(owner) ? owner : null;
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
