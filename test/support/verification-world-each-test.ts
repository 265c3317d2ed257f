// The per-test set-up the reply-verification tests share (test/integration/verification.test.ts,
// verification-failure-paths.test.ts): before each test a new Gitea double holding `issues` and a
// new world on a new temporary directory; after it, the world, the double and the directory are gone.
// A test may crash its world and reopen it on the same directory, so the test file keeps the
// variables (`opened` fills them) and `current` names the world to close at the end.
import { afterEach, beforeEach } from 'vitest';
import { openWorld, removeDir, startGitea, type GiteaFixture, type World } from './verification-world.js';

export function openWorldEachTest(issues: number[], file: { opened(fresh: { gitea: GiteaFixture; world: World }): void; current(): World }): void {
  let gitea: GiteaFixture;
  const dirs: string[] = [];
  beforeEach(async () => {
    gitea = await startGitea(issues);
    const world = await openWorld(gitea);
    dirs.push(world.dir);
    file.opened({ gitea, world });
  });
  afterEach(async () => {
    await file.current().close().catch(() => undefined);
    await gitea.close();
    for (const d of dirs.splice(0)) removeDir(d);
  });
}
