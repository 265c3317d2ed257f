// `npm run demo -- --once` is the newcomer's first command: it must finish, exit 0 and show the run.
// The demo runs on its sandbox Gitea stand-in by design: it must work where Go cannot build Gitea.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const root = join(import.meta.dirname, '../..');

describe('npm run demo -- --once', () => {
  it('runs the sandbox end to end, prints timelines and comments, and exits 0', async () => {
    const { stdout } = await run(process.execPath, ['--import', 'tsx', 'src/cli/demo.ts', '--once'], {
      cwd: root,
      timeout: 150_000,
      env: { ...process.env, CCWEB_LOG_LEVEL: 'warn' },
    });
    expect(stdout).toContain('== task timelines ==');
    expect(stdout.match(/→ succeeded\n/g)?.length).toBe(2);
    expect(stdout).toContain('→ rejected');
    expect(stdout).toMatch(/received → queued/);
    expect(stdout).toMatch(/verifying_reply → succeeded/);
    expect(stdout).toMatch(/\[ccweb-bot\] giteabot: 已收到/);
    expect(stdout).toMatch(/The workspace is at commit [0-9a-f]{40}/);
    expect(stdout).toMatch(/admin page\s+http:\/\/127\.0\.0\.1:\d+\/admin/);
  }, 180_000);
});
