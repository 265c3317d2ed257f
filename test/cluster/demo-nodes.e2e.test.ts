// `npm run demo -- --nodes 2`: two nodes on one throwaway PostgreSQL (issue 31). With --once it must
// show node 2 waiting, taking over when node 1 stops and answering, then leave nothing behind.
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
  it('--once --nodes 2: two nodes on one throwaway PostgreSQL; node 2 waits, takes over when node 1 stops and answers; nothing is left behind', async () => {
    const { stdout } = await run(process.execPath, ['--import', 'tsx', 'src/cli/demo.ts', '--once', '--nodes', '2'], {
      cwd: root,
      timeout: 200_000,
      env: { ...process.env, CCWEB_LOG_LEVEL: 'error' },
    });
    expect(stdout).toMatch(/PostgreSQL {8}postgres:\/\/postgres@127\.0\.0\.1:\d+\/ccweb_demo {2}\(throwaway, shared by 2 nodes\)/);
    expect(stdout.match(/→ succeeded\n/g)?.length).toBe(2);
    expect(stdout).toMatch(/== nodes \(one PostgreSQL\) ==\n  demo-node-1 +writer .*\(the node asked\)\n  demo-node-2 +standby /);
    expect(stdout).toMatch(/node 2 listens at http:\/\/127\.0\.0\.1:\d+ after [\d.]+ s/);
    expect(stdout).toMatch(/answered 202 by node 2\n {4}→ gitea-task-[0-9a-f]+ succeeded/);
    expect(stdout).toMatch(/== nodes after the take-over ==\n  demo-node-1 +stopped .*\n  demo-node-2 +writer .*\(the node asked\)/);
    const folder = folderOf(stdout);
    expect(existsSync(folder!)).toBe(false);
  }, 240_000);

});
