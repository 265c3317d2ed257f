// `npm run demo` is the newcomer's first command. By default it runs the real Gitea the tests build: the run
// must finish on the ports chosen by flag and environment, show each task's outcome (a refused one with its
// reason), and every link it prints must open in Gitea's own pages — a browser signed in with the login it
// prints sees the bot's pull request and the issue with the receipt and the answer — and the curl command it
// prints must really get an answer from the bot; Ctrl-C then leaves nothing behind. Where the Go module proxy
// does not serve gitea-mcp, the first line it prints names the fix. The Gitea double and --once run in
// test/cluster/demo-nodes.e2e.test.ts (`--nodes 2` runs on the double), and in the image (npm run test:image).
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { chromium } from 'playwright-core';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const root = join(import.meta.dirname, '../..');
const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

const folderOf = (stdout: string) => /files under (\S+)/.exec(stdout)?.[1];

/** The demo's environment without any gitea-mcp or Gitea choice of the caller's. */
function demoEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, CCWEB_LOG_LEVEL: 'warn', ...extra };
  delete env['CCWEB_GITEA_MCP_COMMAND'];
  return env;
}

describe('npm run demo [real gitea-mcp]', () => {
  it('on the real Gitea: outcomes and reasons, the pull request and the issue in Gitea\'s own pages, the printed curl answered; Ctrl-C removes the folder', async () => {
    if (!existsSync(CHROMIUM)) throw new Error(`Chromium not found at ${CHROMIUM}: install it (apt-get install -y chromium) or set CHROMIUM_PATH. The browser tests do not skip.`);
    // `npm run demo` as the README says, in its own process group, so that "Ctrl-C" below is what a terminal
    // does: SIGINT to every process of the group at once, npm included, which forwards it to the demo a
    // second time (the second signal must not end the demo before its folder is removed).
    const [servicePort, giteaPort, modelPort] = [await freePort(), await freePort(), await freePort()];
    const child = spawn('npm', ['run', '--silent', 'demo', '--', '--gitea-port', String(giteaPort)], {
      cwd: root,
      env: demoEnv({ CCWEB_PORT: String(servicePort), DEMO_MODEL_PORT: String(modelPort) }),
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--headless=new'] });
    try {
      const deadline = Date.now() + 200_000;
      while (!stdout.includes('Running until Ctrl-C.')) {
        if (Date.now() > deadline || child.exitCode !== null) throw new Error(`demo did not come up:\n${stdout}\n${stderr}`);
        await new Promise((r) => setTimeout(r, 200));
      }
      const gitea = /^Gitea 1\.\d+\.\d+ +(http:\/\/127\.0\.0\.1:\d+) +\(repo acme\/widget, issue #1, PR #2\)$/m.exec(stdout)?.[1];
      expect(gitea, stdout).toBe(`http://127.0.0.1:${giteaPort}`);
      expect(stdout).toContain(`service           http://127.0.0.1:${servicePort} `);
      expect(readFileSync(join(folderOf(stdout)!, 'codex-home', 'config.toml'), 'utf8')).toContain(`base_url = "http://127.0.0.1:${modelPort}/v1"`);
      const login = /^ +sign in as +alice \/ (\S+) +\(may write/m.exec(stdout)?.[1];
      expect(login, stdout).toBeDefined();
      expect(stdout).toMatch(/^ +or +bob \/ \S+ +\(read access only/m);

      // What happened, as before: timelines, the receipt and the answers, the bot's pull request.
      expect(stdout).toMatch(/received → queued/);
      expect(stdout).toMatch(/verifying_reply → succeeded/);
      // The service logs at warn here, and a normal start warns of nothing: no raw JSON log line in
      // between (the Codex login used to be "not ok" while the app-server was still starting).
      expect(stdout).not.toMatch(/^\{"level"/m);
      // The comments printed are the receipts' final edits: their first line follows the stage, never "queued" for a finished task.
      expect(stdout.match(/\[ccweb-bot\] giteabot: 已收到 — @alice 的请求已完成（任务 \S+）。 \*\*阶段：\*\* 已完成/g)?.length, stdout).toBe(2);
      expect(stdout).not.toContain('请求已排队');
      // bob may only read: his mention gets the thread's one notice that only writers can ask.
      expect(stdout.match(/\[ccweb-bot\] giteabot: @bob，只有对本仓库有写权限的人才能让机器人工作/g)?.length, stdout).toBe(1);
      expect(stdout).toMatch(/The workspace is at commit [0-9a-f]{40}/);
      const pulls = new RegExp(`== pull requests ==\\n  #3 ccweb/issue-1 → main by ccweb-bot \\(head [0-9a-f]{10}\\): Append a line to CHANGES\\.md\\n      (${gitea}/acme/widget/pulls/3)\\n  #2 feature/login-retry → main by alice`).exec(stdout);
      expect(pulls, stdout).not.toBeNull();
      // Each task's outcome; the refused one says why.
      const summary = stdout.slice(stdout.indexOf('== summary =='));
      expect(summary).toContain(`  alice on #1: succeeded: answered; the change is pull request #3 ${gitea}/acme/widget/pulls/3\n`);
      expect(summary).toContain('  alice on #2: succeeded: answered on the thread\n');
      expect(summary).toContain('  bob on #1: refused: bob has read access only; only people with write access to acme/widget can ask the bot\n');
      expect(stdout).toMatch(/admin page\s+http:\/\/127\.0\.0\.1:\d+\/admin\s+\(admin token: [0-9a-f]+\)/);

      // The links open in Gitea's own pages, signed in with the login the demo printed (the repository is private).
      const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
      await page.goto(`${gitea}/user/login`);
      await page.fill('#user_name', 'alice');
      await page.fill('#password', login!);
      await Promise.all([page.waitForURL((u) => !u.pathname.startsWith('/user/login')), page.press('#password', 'Enter')]);
      const pr = await page.goto(pulls![1]!);
      expect(pr?.status()).toBe(200);
      expect((await page.textContent('#issue-title-display'))?.replace(/\s+/g, ' ').trim()).toMatch(/^Append a line to CHANGES\.md #3\b/);
      const prAuthor = (await page.textContent('#pull-desc-display'))?.replace(/\s+/g, ' ').trim();
      expect(prAuthor).toMatch(/^ccweb-bot wants to merge 1 commits? from ccweb\/issue-1/);
      const issue = await page.goto(`${gitea}/acme/widget/issues/1`);
      expect(issue?.status()).toBe(200);
      const comments = await page.$$eval('.timeline-item.comment[id^="issuecomment-"]', (items) =>
        items.map((el) => ({
          author: el.querySelector('.comment-text-line a')?.textContent?.trim() ?? '',
          body: (el.querySelector('.render-content') as HTMLElement | null)?.innerText.trim() ?? '',
        })),
      );
      const fromBot = comments.filter((c) => c.author === 'ccweb-bot').map((c) => c.body);
      expect(fromBot).toHaveLength(3);
      expect(fromBot).toEqual(
        expect.arrayContaining([
          expect.stringMatching(/^giteabot: 已收到 — @alice 的请求已完成.*gitea-task-[0-9a-f]+/s),
          'I appended a line to CHANGES.md.',
          expect.stringMatching(/^giteabot: @bob，只有对本仓库有写权限的人才能让机器人工作/),
        ]),
      );
      await page.close();

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
      await browser.close();
      process.kill(-child.pid!, 'SIGINT');
    }
    expect(await exited).toBe(0);
    const folder = folderOf(stdout);
    expect(folder).toMatch(/ccweb-demo-/);
    expect(existsSync(folder!)).toBe(false);
  }, 360_000);

  it('where the Go module proxy does not serve gitea-mcp, its first line of output names CCWEB_GITEA_MCP_SOURCE, and it fails with the fix', async () => {
    // No gitea-mcp built yet (an empty cache), no module cached, a proxy that serves nothing: `go install` fails at once.
    const scratch = mkdtempSync(join(tmpdir(), 'ccweb-demo-nomcp-'));
    try {
      const env = demoEnv({ CCWEB_GITEA_MCP_CACHE: join(scratch, 'cache'), GOMODCACHE: join(scratch, 'mod'), GOPROXY: 'off' });
      delete env['CCWEB_GITEA_MCP_SOURCE'];
      const r = await run('sh', ['-c', `'${process.execPath}' --import tsx src/cli/demo.ts --once 2>&1`], { cwd: root, env, timeout: 60_000 }).then(
        () => ({ code: 0, out: '' }),
        (e: { code: number; stdout: string }) => ({ code: e.code, out: e.stdout }),
      );
      expect(r.code, r.out).toBe(1);
      const lines = r.out.split('\n').filter((l) => !l.startsWith('ccweb-gitea: warning: running on Node'));
      expect(lines[0]).toMatch(/^installing gitea-mcp \S+ .*where the Go module proxy does not serve it, set CCWEB_GITEA_MCP_SOURCE=\/path\/to\/gitea-mcp-src-\S+\.tar\.gz/);
      expect(r.out).toMatch(/^demo failed: gitea-mcp could not be fetched with `go install` \(the Go module proxy may not serve it\): set CCWEB_GITEA_MCP_SOURCE=/m);
      expect(r.out).not.toContain('files under');
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  }, 90_000);
});
