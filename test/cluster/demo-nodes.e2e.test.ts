// `npm run demo -- --nodes 2`: two nodes on one throwaway PostgreSQL, on the Gitea double (which the demo
// chooses for --nodes, saying so). With --once it must show each task's outcome, both nodes running, node 2
// answering once node 1 stops, then exit 0 and leave nothing behind. The one run of the demo on the double
// in `npm test` (test/e2e/demo.e2e.test.ts runs the real Gitea).
// In test/cluster/ (run on Node 24 only in CI, like test/chaos: nothing here differs between Node versions).
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const root = join(import.meta.dirname, '../..');
const folderOf = (stdout: string) => /files under (\S+)/.exec(stdout)?.[1];

describe('npm run demo -- --nodes 2 [real gitea-mcp]', () => {
  it('--once --nodes 2: two nodes alike on one throwaway PostgreSQL; node 2 answers once node 1 stops; nothing is left behind', async () => {
    const { stdout } = await run(process.execPath, ['--import', 'tsx', 'src/cli/demo.ts', '--once', '--nodes', '2'], {
      cwd: root,
      timeout: 200_000,
      env: { ...process.env, CCWEB_LOG_LEVEL: 'error' },
    });
    expect(stdout).toContain('--nodes 2: on the Gitea double (an API without pages: its links open nothing)');
    expect(stdout).toMatch(/^Gitea double +http:\/\/127\.0\.0\.1:\d+ +\(repo acme\/widget, issue #1, PR #2; an API without pages\)$/m);
    // The double answers each webhook at once: the demo shows the answer.
    expect(stdout).toMatch(/bob on #1: "@ccweb-bot delete the repository"\n {4}→ webhook [0-9a-f]{8}… answered 200 \{"status":"rejected","reason":"actor_not_authorized"/);
    expect(stdout).toMatch(/  alice on #1: succeeded: answered; the change is pull request #3 http:\/\/127\.0\.0\.1:\d+\/acme\/widget\/pulls\/3\n/);
    expect(stdout).toContain('  bob on #1: refused: bob has read access only; only people with write access to acme/widget can ask the bot\n');
    expect(stdout).toContain('--once: the service and Gitea have stopped');
    expect(stdout).toMatch(/PostgreSQL {8}postgres:\/\/postgres@127\.0\.0\.1:\d+\/ccweb_demo {2}\(throwaway, shared by 2 nodes\)/);
    expect(stdout.match(/→ succeeded\n/g)?.length).toBe(2);
    expect(stdout).toMatch(/== nodes \(one PostgreSQL\) ==\n  demo-node-1 +writer .*\(the node asked\)\n  demo-node-2 +writer /);
    expect(stdout).toMatch(/node 2 listens at http:\/\/127\.0\.0\.1:\d+\n/);
    expect(stdout).toMatch(/answered 202 by node 2\n {4}→ gitea-task-[0-9a-f]+ succeeded/);
    expect(stdout).toMatch(/== nodes after node 1 stopped ==\n  demo-node-1 +stopped .*\n  demo-node-2 +writer .*\(the node asked\)/);
    const folder = folderOf(stdout);
    expect(existsSync(folder!)).toBe(false);
  }, 240_000);

});
