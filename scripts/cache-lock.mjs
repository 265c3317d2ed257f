// A lock folder holding its owner's pid, for the builds cached outside the clone
// (scripts/install-gitea.mjs, scripts/install-gitea-mcp.mjs): concurrent runs (pretest, vitest's
// globalSetup, another checkout) wait for one build instead of racing; a lock whose owner died is
// taken over.
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

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

