// The operator pages' task list and the visualizer's end states in real Chromium (Debian's package,
// driven by playwright-core) against a real HTTP server with a real store and runtime: the task list first with its pull
// request and thread links, error codes with their meaning, ISO dates, the concurrency limit and
// the busy slots; a rejected task without a change section; the visualizer's end states coloured by
// outcome and only live actors listed as live. Screenshots go to docs/screenshots/operator-pages/.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import type { TaskRecord } from '../../src/domain/records.js';
import { taskActorId } from '../../src/tasks/task-actor.js';
import { ADMIN_TOKEN, createQueuedTask, driveTask, insertRepository, startApiHarness, type ApiHarness } from '../support/api-harness.js';

const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
const SHOTS = join(import.meta.dirname, '../../docs/screenshots/operator-pages');

let h: ApiHarness;
let browser: Browser;
let page: Page;
const consoleErrors: string[] = [];

const patchTask = (taskId: string, patch: Partial<TaskRecord>) =>
  h.store.transact(async (tx) => {
    const t = (await tx.get<TaskRecord>('tasks', taskId))!;
    await tx.put('tasks', taskId, { ...t, ...patch });
  });

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`Chromium not found at ${CHROMIUM}: install it (apt-get install -y chromium) or set CHROMIUM_PATH. The browser tests do not skip.`);
  }
  mkdirSync(SHOTS, { recursive: true });
  h = await startApiHarness(undefined, { concurrency: () => ({ limit: 1, busy: 1 }) });
  await insertRepository(h.store, 'default:acme/widget');
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--headless=new'] });
  page = await browser.newPage({ viewport: { width: 1280, height: 760 } });
  page.on('console', (m) => {
    if (m.type() === 'error') consoleErrors.push(m.text());
  });
  page.on('pageerror', (e) => consoleErrors.push(e.message));

  await createQueuedTask(h.store, h.runtime, { taskId: 'task-pr', commentUrl: 'http://gitea.test/acme/widget/issues/1#issuecomment-5' } as never);
  await driveTask(h.runtime, 'task-pr', 'running');
  await patchTask('task-pr', {
    commentUrl: 'http://gitea.test/acme/widget/issues/1#issuecomment-5',
    publish: { status: 'published', mode: 'pull_request', branch: 'ccweb/issue-1', headSha: 'a'.repeat(40), commits: [], pullRequest: { number: 7, url: 'http://gitea.test/acme/widget/pulls/7' }, kept: null, errorCode: null, message: null, updatedAt: new Date().toISOString() },
  });
  await createQueuedTask(h.store, h.runtime, { taskId: 'task-failed', repoKey: 'default:acme/gadget' });
  await patchTask('task-failed', { errorCode: 'push_rejected', state: 'failed' });
  await createQueuedTask(h.store, h.runtime, { taskId: 'task-rejected' });
  await patchTask('task-rejected', { state: 'rejected' });
  await createQueuedTask(h.store, h.runtime, { taskId: 'task-waiting', repoKey: 'default:acme/gadget' });
});

afterAll(async () => {
  await browser?.close();
  await h?.close();
});

describe('admin page: the task list', () => {
  it('lists tasks first, with thread and pull-request links, error meanings, ISO dates and the busy slots', async () => {
    await page.goto(`${h.url}/admin`);
    await page.fill('#token', ADMIN_TOKEN);
    await page.fill('#operator', 'alice');
    await page.click('#sign-in');
    await page.waitForSelector('tr[data-task-id="task-pr"]');
    // The task list comes before the repositories (and usage) on the page.
    const order = await page.evaluate(() => {
      const tasks = document.getElementById('tasks')!;
      const repos = document.getElementById('repos')!;
      return tasks.compareDocumentPosition(repos) & Node.DOCUMENT_POSITION_FOLLOWING ? 'tasks-first' : 'repos-first';
    });
    expect(order).toBe('tasks-first');
    const row = (id: string) => page.locator(`tr[data-task-id="${id}"]`);
    expect(await row('task-pr').locator('td.pull-request a').getAttribute('href')).toBe('http://gitea.test/acme/widget/pulls/7');
    expect(await row('task-pr').locator('td a[href^="http://gitea.test/acme/widget/issues/1"]').count()).toBe(1);
    expect(await row('task-failed').locator('td.error-code').textContent()).toMatch(/^push_rejected\S.+/);
    expect(await row('task-failed').locator('td.error-code .meaning').textContent()).not.toBe('');
    for (const t of await page.locator('#tasks td.time').allTextContents()) expect(t).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/);
    expect(await page.textContent('#slots')).toBe('1/1 slots busy · 1 waiting');
    await page.screenshot({ path: join(SHOTS, 'admin-task-list.png') });
  });

  it('a failed task says its error code with the meaning; a rejected one has no change section', async () => {
    await page.goto(`${h.url}/admin#/tasks/task-failed`);
    await page.waitForSelector('#task-state[data-state="failed"]');
    expect(await page.textContent('#task-error')).toBe('push_rejected');
    expect(await page.locator('dd', { has: page.locator('#task-error') }).textContent()).toMatch(/push_rejected — \S/);
    await page.goto(`${h.url}/admin#/tasks/task-rejected`);
    await page.waitForSelector('#task-state[data-state="rejected"]');
    expect(await page.$$('#change')).toHaveLength(0);
    expect(await page.textContent('main')).not.toContain('Nothing published');
    await page.goto(`${h.url}/admin#/tasks/task-pr`);
    await page.waitForSelector('#change[data-status="published"]');
    expect(await page.locator('#change a').getAttribute('href')).toBe('http://gitea.test/acme/widget/pulls/7');
    await page.screenshot({ path: join(SHOTS, 'admin-task-detail.png') });
  });
});

describe('visualizer: end states and finished actors', () => {
  it('colours succeeded and failed end states apart, and lists finished actors apart from live ones', async () => {
    await createQueuedTask(h.store, h.runtime, { taskId: 'task-cancel' });
    const res = await h.call('POST', '/api/gitea-workflow/tasks/task-cancel/cancel', { requestId: randomUUID(), operator: 'alice', reason: 'test' });
    expect(res.status).toBe(200);
    await page.goto(`${h.url}/visualizer#kind=task&machine=task`);
    await page.waitForSelector('#chart svg[data-machine="task"]');
    const fill = (state: string) => page.$eval(`#chart g.state[data-state="${state}"] rect`, (r) => getComputedStyle(r).fill);
    expect(await page.$$('#chart g.state.final.outcome-good[data-state="succeeded"]')).toHaveLength(1);
    expect(await page.$$('#chart g.state.final.outcome-bad[data-state="failed"]')).toHaveLength(1);
    expect(await page.$$('#chart g.state.final.outcome-neutral[data-state="rejected"]')).toHaveLength(1);
    const [good, bad, neutral] = [await fill('succeeded'), await fill('failed'), await fill('rejected')];
    expect(new Set([good, bad, neutral]).size).toBe(3);
    // Only actors that still run are under "Live actors"; the cancelled one is listed as finished.
    await page.waitForSelector(`#actor-list a[data-actor-id="${taskActorId('task-pr')}"]`);
    expect(await page.$$(`#actor-list a[data-actor-id="${taskActorId('task-cancel')}"]`)).toHaveLength(0);
    expect(await page.$$(`#finished-actor-list a[data-actor-id="${taskActorId('task-cancel')}"]`)).toHaveLength(1);
    await page.click('#finished-actors summary');
    await page.screenshot({ path: join(SHOTS, 'visualizer-end-states.png') });
    expect(consoleErrors).toEqual([]);
  });
});
