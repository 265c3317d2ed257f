// `npm run demo` is the newcomer's first command. With --once it must finish, exit 0, show the run
// and leave nothing behind; without it, the curl command it prints (the README's example) must
// really get an answer from the bot. The ports come from a flag and from environment variables.
// The demo runs on its sandbox Gitea stand-in by design: it must work where Go cannot build Gitea.
import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const root = join(import.meta.dirname, '../..');

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

const folderOf = (stdout: string) => /files under (\S+)/.exec(stdout)?.[1];

describe('npm run demo [real gitea-mcp]', () => {
  it('--once: runs the sandbox end to end on the chosen ports, prints timelines and comments, exits 0, removes its folder', async () => {
    const [servicePort, giteaPort, modelPort] = [await freePort(), await freePort(), await freePort()];
    const { stdout } = await run(process.execPath, ['--import', 'tsx', 'src/cli/demo.ts', '--once', '--gitea-port', String(giteaPort)], {
      cwd: root,
      timeout: 150_000,
      env: { ...process.env, CCWEB_LOG_LEVEL: 'warn', CCWEB_PORT: String(servicePort), DEMO_MODEL_PORT: String(modelPort) },
    });
    expect(stdout).toContain('== task timelines ==');
    // The service logs at warn here, and a normal start warns of nothing: no raw JSON log line in
    // between (the Codex login used to be "not ok" while the app-server was still starting).
    expect(stdout).not.toMatch(/^\{"level"/m);
    expect(stdout.match(/→ succeeded\n/g)?.length).toBe(2);
    expect(stdout).toContain('→ rejected');
    expect(stdout).toMatch(/received → queued/);
    expect(stdout).toMatch(/verifying_reply → succeeded/);
    expect(stdout).toMatch(/\[ccweb-bot\] giteabot: 已收到/);
    // The comments printed are the receipts' final edits: their first line follows the stage, never "queued" for a finished task.
    expect(stdout.match(/\[ccweb-bot\] giteabot: 已收到 — @alice 的请求已完成（任务 \S+）。 \*\*阶段：\*\* 已完成/g)?.length).toBe(2);
    expect(stdout).not.toContain('请求已排队');
    // bob may only read: his mention gets the thread's one notice that only writers can ask.
    expect(stdout.match(/\[ccweb-bot\] giteabot: @bob，只有对本仓库有写权限的人才能让机器人工作/g)?.length).toBe(1);
    expect(stdout).toMatch(/The workspace is at commit [0-9a-f]{40}/);
    // Alice's first request changed a file: it arrives as a pull request from the bot's branch.
    expect(stdout).toMatch(/I appended a line to CHANGES\.md/);
    expect(stdout).toMatch(new RegExp(`== pull requests ==\\n  #3 ccweb/issue-1 → main by ccweb-bot \\(head [0-9a-f]{10}\\): Append a line to CHANGES\\.md\\n      http://127\\.0\\.0\\.1:${giteaPort}/acme/widget/pulls/3\\n  #2 feature/login-retry → main by alice`));
    expect(stdout).toContain(`sandbox Gitea     http://127.0.0.1:${giteaPort} `);
    expect(stdout).toContain(`service           http://127.0.0.1:${servicePort} `);
    // A stopped service has no admin page to open and no token worth printing.
    expect(stdout).not.toMatch(/admin token|\/admin\b/);
    const folder = folderOf(stdout);
    expect(folder).toMatch(/ccweb-demo-/);
    expect(existsSync(folder!)).toBe(false);
  }, 180_000);

  it('keeps running: the printed curl command comments as alice and the bot answers; Ctrl-C removes the folder', async () => {
    // `npm run demo` as the README says, in its own process group, so that "Ctrl-C" below is what a terminal
    // does: SIGINT to every process of the group at once, npm included, which forwards it to the demo a
    // second time (issue 32: the second signal ended the demo before its folder was removed).
    const child = spawn('npm', ['run', '--silent', 'demo'], {
      cwd: root,
      env: { ...process.env, CCWEB_LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      const deadline = Date.now() + 150_000;
      while (!stdout.includes('Running until Ctrl-C.')) {
        if (Date.now() > deadline || child.exitCode !== null) throw new Error(`demo did not come up:\n${stdout}\n${stderr}`);
        await new Promise((r) => setTimeout(r, 200));
      }
      expect(stdout).toMatch(/admin page\s+http:\/\/127\.0\.0\.1:\d+\/admin\s+\(admin token: [0-9a-f]+\)/);

      // Exactly what a reader copies from the terminal: the two-line POST, through a shell.
      const lines = stdout.split('\n');
      const at = lines.findIndex((l) => l.trimStart().startsWith('curl -sS -X POST'));
      const post = `${lines[at]!.replace(/\\$/, '')} ${lines[at + 1]!.trim()}`;
      const read = lines.find((l) => l.trimStart().startsWith('curl -sS -H'))!.trim();
      const posted = JSON.parse((await run('sh', ['-c', post], { timeout: 30_000 })).stdout) as { id: number; user: { login: string } };
      expect(posted.user.login).toBe('alice');

      let answer: { body: string } | undefined;
      for (const until = Date.now() + 90_000; Date.now() < until && !answer; ) {
        const thread = JSON.parse((await run('sh', ['-c', read], { timeout: 30_000 })).stdout) as Array<{ id: number; body: string; user: { login: string } }>;
        answer = thread.find((c) => c.id > posted.id && c.user.login === 'ccweb-bot' && !c.body.startsWith('giteabot:'));
        if (!answer) await new Promise((r) => setTimeout(r, 500));
      }
      expect(answer?.body, `no answer to the curl comment:\n${stdout}\n${stderr}`).toMatch(/Done\. I looked at the request/);
    } finally {
      process.kill(-child.pid!, 'SIGINT');
    }
    expect(await exited).toBe(0);
    const folder = folderOf(stdout);
    expect(folder).toMatch(/ccweb-demo-/);
    expect(existsSync(folder!)).toBe(false);
  }, 300_000);
});
