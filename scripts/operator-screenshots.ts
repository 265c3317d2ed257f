// Screenshots of the operators' pages of a running service (e.g. `npm run demo`), for the docs:
//   tsx scripts/operator-screenshots.ts <serviceUrl> <adminToken> <outDir> [taskId]
// Writes admin-list.png, task-detail.png (the given task, else the newest rejected one, else the
// newest) and visualizer-landing.png at 1280×800 into outDir. Needs Chromium (CHROMIUM_PATH).
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const [base, token, outDir, wantedTask] = process.argv.slice(2);
if (!base || !token || !outDir) {
  console.error('usage: tsx scripts/operator-screenshots.ts <serviceUrl> <adminToken> <outDir> [taskId]');
  process.exit(2);
}
mkdirSync(outDir, { recursive: true });

const res = await fetch(`${base}/api/gitea-workflow/tasks?pageSize=50`, { headers: { authorization: `Bearer ${token}` } });
const tasks = ((await res.json()) as { items: Array<{ taskId: string; state: string }> }).items;
const task = wantedTask ?? tasks.find((t) => t.state === 'rejected')?.taskId ?? tasks[0]?.taskId;

const browser = await chromium.launch({ executablePath: process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium', args: ['--no-sandbox', '--headless=new'] });
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  await page.goto(`${base}/admin`);
  await page.fill('#token', token);
  await page.fill('#operator', 'screenshots');
  await page.click('#sign-in');
  await page.waitForSelector('#tasks');
  await page.waitForTimeout(300);
  await page.screenshot({ path: join(outDir, 'admin-list.png') });
  if (task) {
    await page.goto(`${base}/admin#/tasks/${encodeURIComponent(task)}`);
    await page.waitForSelector('#timeline');
    await page.waitForTimeout(300);
    await page.screenshot({ path: join(outDir, 'task-detail.png'), fullPage: true });
  }
  // The same tab keeps the token (sessionStorage), as when an operator follows the page's link.
  await page.goto(`${base}/visualizer`);
  await page.waitForSelector('#chart svg');
  await page.waitForTimeout(300);
  await page.screenshot({ path: join(outDir, 'visualizer-landing.png') });
  console.log(`screenshots in ${outDir}${task ? ` (task ${task})` : ''}`);
} finally {
  await browser.close();
}
