// What the builds cached outside the clone share (scripts/install-gitea.mjs,
// scripts/install-gitea-mcp.mjs): a lock folder holding its owner's pid, so concurrent runs (pretest,
// vitest's globalSetup, another checkout) wait for one build instead of racing (a lock whose owner
// died is taken over); and the account's home, under which the caches live.
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { homedir, userInfo } from 'node:os';
import { join } from 'node:path';

/**
 * The home directory from the password database, not $HOME: the test run gives its workers another
 * HOME (CCWEB_TEST_SLOW_PROFILE, test/support/global-setup.ts) and must still find the builds.
 */
export function accountHome() {
  try {
    return userInfo().homedir || homedir();
  } catch {
    return homedir();
  }
}

function pidAlive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code === 'EPERM';
  }
}

/** A lock folder with the owner's pid; a lock whose owner died is taken over. */
export async function withLock(lockDir, log, fn) {
  const deadline = Date.now() + 30 * 60_000;
  let told = false;
  for (;;) {
    try {
      mkdirSync(lockDir);
      writeFileSync(join(lockDir, 'pid'), String(process.pid));
      break;
    } catch (e) {
      if (e.code !== 'EEXIST') throw e;
      let owner = NaN;
      try {
        owner = Number(readFileSync(join(lockDir, 'pid'), 'utf8'));
      } catch {
        /* being written; look again */
      }
      if (Number.isInteger(owner) && owner > 0 && !pidAlive(owner)) {
        rmSync(lockDir, { recursive: true, force: true });
        continue;
      }
      if (Date.now() > deadline) throw new Error(`waited 30 min for ${lockDir} (another build); remove it if no build runs`);
      if (!told) log(`another build holds ${lockDir}; waiting for it`);
      told = true;
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
  try {
    return await fn();
  } finally {
    rmSync(lockDir, { recursive: true, force: true });
  }
}

