// The admin page and the visualizer in real Chromium (Debian's package, driven by playwright-core)
// against a real HTTP server on 127.0.0.1 with a real store and runtime.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import type { TaskRecord } from '../../src/domain/records.js';
import { sendStops, stopTargets } from '../../src/intake/stop-tasks.js';
import { taskActorId } from '../../src/tasks/task-actor.js';
import { ADMIN_TOKEN, createQueuedTask, driveTask, insertRepository, startApiHarness, type ApiHarness } from '../support/api-harness.js';

const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
const SHOTS = join(import.meta.dirname, '../../test-artifacts/screenshots');

let h: ApiHarness;
let browser: Browser;
let page: Page;
const consoleErrors: string[] = [];

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`Chromium not found at ${CHROMIUM}: install it (apt-get install -y chromium) or set CHROMIUM_PATH. The browser tests do not skip.`);
  }
  mkdirSync(SHOTS, { recursive: true });
  h = await startApiHarness();
  await insertRepository(h.store, 'default:acme/widget');
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--headless=new'] });
  page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  page.on('console', (m) => {
    if (m.type() === 'error') consoleErrors.push(m.text());
  });
  page.on('pageerror', (e) => consoleErrors.push(e.message));
});

afterAll(async () => {
  await browser?.close();
  await h?.close();
});

describe('admin page', () => {
  it('signs in, shows a task created after load (live), opens it, cancels it with a reason', async () => {
    await page.goto(`${h.url}/admin`);
    await page.fill('#token', ADMIN_TOKEN);
    await page.fill('#operator', 'alice');
    await page.click('#sign-in');
    await page.waitForSelector('#tasks');
    await page.waitForSelector('#live[data-status="live"]');
    expect(await page.$$('tr[data-testid="task-row"]')).toHaveLength(0);

    // A webhook arrives: intake's transaction creates the task; the page learns of it over SSE.
    await createQueuedTask(h.store, h.runtime, { taskId: 'task-browser-1', instruction: '@ccweb-bot fix <b>bold</b> <img src=x onerror=alert(1)>' });
    const row = await page.waitForSelector('tr[data-task-id="task-browser-1"][data-state="queued"]');
    // Untrusted comment text is shown as text, never parsed as HTML.
    expect(await page.$$('td.instruction b, td.instruction img')).toHaveLength(0);
    expect(await row.$eval('td.instruction', (td) => td.textContent)).toContain('<b>bold</b>');
    await page.screenshot({ path: join(SHOTS, 'admin-task-list.png'), fullPage: true });

    await page.click('a[href="#/tasks/task-browser-1"]');
    await page.waitForSelector('#task-state[data-state="queued"]');
    await page.waitForSelector('#timeline tbody tr');
    expect(await page.textContent('#correlation')).toContain('default:delivery-task-browser-1');
    // Still at work: nothing published *yet*.
    expect(await page.textContent('#change')).toBe('Nothing published yet.');

    const dialogs: string[] = [];
    page.once('dialog', (d) => {
      dialogs.push(d.message());
      void d.accept('duplicate request from the browser test');
    });
    await page.click('#task-cancel');
    await page.waitForSelector('#task-state[data-state="cancelled"]');
    expect(dialogs[0]).toContain('Reason to cancel task task-browser-1');
    await page.waitForSelector('#timeline tr[data-action="control.task_cancel"]');
    // Why it ended, and that it will publish nothing: no "(yet)" for a finished task.
    await page.waitForSelector('#task-stop[data-kind="operator"][data-outcome="stopped"]');
    expect(await page.textContent('#task-stop')).toMatch(/^Stopped by operator alice: “duplicate request from the browser test” at \d{4}-\d\d-\d\dT[\d:]+Z\.$/);
    expect(await page.textContent('#change')).toBe('Nothing was published.');
    await page.screenshot({ path: join(SHOTS, 'admin-task-cancelled.png'), fullPage: true });

    expect(await h.store.get<TaskRecord>('tasks', 'task-browser-1')).toMatchObject({ state: 'cancelled', stoppedBy: 'admin:alice' });
    const control = (await h.store.audit({ taskId: 'task-browser-1' })).filter((e) => e.action === 'control.task_cancel');
    expect(control).toHaveLength(1);
    expect(control[0]).toMatchObject({ actor: 'admin:alice', metadata: { reason: 'duplicate request from the browser test' } });
    expect(page.url()).not.toContain(ADMIN_TOKEN);
  });

  it('pauses and resumes the service with a reason', async () => {
    await page.goto(`${h.url}/admin#/`);
    await page.waitForSelector('#pause');
    page.once('dialog', (d) => void d.accept('deploying'));
    await page.click('#pause');
    await page.waitForSelector('#resume');
    expect(await h.store.get<{ globalPaused: boolean; pauseReason: string }>('control', 'global')).toMatchObject({ globalPaused: true, pauseReason: 'deploying' });
    page.once('dialog', (d) => void d.accept('deployed'));
    await page.click('#resume');
    await page.waitForSelector('#pause');
    expect((await h.store.get<{ globalPaused: boolean }>('control', 'global'))!.globalPaused).toBe(false);
  });

  it('an archived task leaves the list, is counted, and still opens by id', async () => {
    // What the archiver does to a finished task (the cancelled one above), at the store level.
    await h.store.transact((tx) => tx.archive('tasks', 'task-browser-1'));
    await page.goto(`${h.url}/admin#/`);
    await page.reload();
    await page.waitForSelector('#tasks');
    expect(await page.$$('tr[data-task-id="task-browser-1"]')).toHaveLength(0);
    expect(await page.textContent('#task-count')).toContain('1 archived');
    await page.fill('#open-task input[name="taskId"]', 'task-browser-1');
    await page.press('#open-task input[name="taskId"]', 'Enter');
    await page.waitForSelector('#task-state[data-state="cancelled"]');
    await page.waitForSelector('#timeline tr[data-action="control.task_cancel"]');
  });

  it('an aborted task says in the list and in its detail who stopped it; the list shows an operator\'s reason', async () => {
    // A stop comment on the thread while the agent runs (intake's stop path), confirmed by the work in flight.
    const t = await createQueuedTask(h.store, h.runtime, { taskId: 'task-browser-stopped' });
    await driveTask(h.runtime, t.taskId, 'running');
    await sendStops(h.runtime, await stopTargets(h.store, t.resourceKey), 'gitea:user:bob');
    expect((await h.runtime.send(taskActorId(t.taskId), { type: 'ABORT_CONFIRMED' })).ok).toBe(true);
    // An operator's abort with a reason.
    const u = await createQueuedTask(h.store, h.runtime, { taskId: 'task-browser-aborted' });
    await driveTask(h.runtime, u.taskId, 'running');
    const res = await h.call('POST', `/api/gitea-workflow/tasks/${u.taskId}/abort`, { requestId: 'req-browser-abort-1', operator: 'carol', reason: 'the agent is looping' });
    expect(res.status).toBe(200);
    expect((await h.runtime.send(taskActorId(u.taskId), { type: 'ABORT_CONFIRMED' })).ok).toBe(true);

    await page.goto(`${h.url}/admin#/`);
    await page.reload();
    await page.waitForSelector('tr[data-task-id="task-browser-stopped"][data-state="aborted"]');
    expect(await page.textContent('tr[data-task-id="task-browser-stopped"] td.error-code')).toBe('Stopped by a stop comment by @bob.');
    expect(await page.textContent('tr[data-task-id="task-browser-aborted"] td.error-code')).toBe('Stopped by operator carol: “the agent is looping”.');
    await page.screenshot({ path: join(SHOTS, 'admin-task-list-stopped.png'), fullPage: true });

    await page.click('a[href="#/tasks/task-browser-stopped"]');
    await page.waitForSelector('#task-stop[data-kind="stop_comment"][data-outcome="stopped"]');
    expect(await page.textContent('#task-stop')).toMatch(/^Stopped by a stop comment by @bob at \S+Z\.$/);
    expect(await page.textContent('#change')).toBe('Nothing was published.');
  });

  it('a task detail shows the pull request and branch it delivered, and links only http(s) urls', async () => {
    const t = await createQueuedTask(h.store, h.runtime, { taskId: 'task-browser-pr' });
    const publish = {
      status: 'published', mode: 'pull_request', branch: 'ccweb/issue-7', headSha: 'a1b2c3d4e5f60718293a4b5c6d7e8f9012345678',
      commits: ['a1b2c3d4e5f60718293a4b5c6d7e8f9012345678'], pullRequest: { number: 12, url: 'http://127.0.0.1:3000/acme/widget/pulls/12' },
      diff: { bytes: 1_178, files: 1, added: 3, removed: 1 },
      kept: null, errorCode: null, message: null, updatedAt: new Date().toISOString(),
    };
    await h.store.transact((tx) => tx.put('tasks', t.taskId, { ...t, publish }));
    await page.goto(`${h.url}/admin#/tasks/task-browser-pr`);
    await page.waitForSelector('#change[data-status="published"]');
    expect(await page.getAttribute('#change a', 'href')).toBe(publish.pullRequest.url);
    expect(await page.textContent('#change a')).toBe('#12');
    expect(await page.textContent('#change')).toContain('ccweb/issue-7');
    // What it published: the size of the change.
    expect(await page.textContent('#change-diff')).toBe('1 file · +3 −1 · 1,178 B');
    await page.screenshot({ path: join(SHOTS, 'admin-task-change.png'), fullPage: true });

    // A stored url that is not http(s) is shown as text, never as a link.
    await h.store.transact((tx) => tx.put('tasks', t.taskId, { ...t, publish: { ...publish, pullRequest: { number: 12, url: 'javascript:alert(1)' } } }));
    await page.reload();
    await page.waitForSelector('#change[data-status="published"]');
    expect(await page.$$('#change a')).toHaveLength(0);
    expect(await page.textContent('#change')).toContain('#12');

    // A task that left no change says so, without "(yet)".
    const none = { status: 'nothing_to_publish', mode: 'pull_request', branch: null, headSha: null, commits: [], pullRequest: null, kept: null, errorCode: null, message: null, updatedAt: new Date().toISOString() };
    await h.store.transact((tx) => tx.put('tasks', t.taskId, { ...t, publish: none }));
    await page.reload();
    await page.waitForSelector('#change[data-status="nothing_to_publish"]');
    expect(await page.textContent('#change')).toBe('Nothing was published: the task left no change.');
  });
});

describe('visualizer', () => {
  it('draws every machine, highlights the selected actor’s current state and path, and follows it live', async () => {
    await createQueuedTask(h.store, h.runtime, { taskId: 'task-browser-2' });
    await driveTask(h.runtime, 'task-browser-2', 'running');

    await page.goto(`${h.url}/visualizer`);
    await page.waitForSelector('#chart svg[data-machine]');
    await page.waitForSelector('#live[data-status="live"]');
    const machineButtons = await page.$$eval('.machines button', (bs) => bs.map((b) => b.getAttribute('data-machine')));
    expect(machineButtons).toEqual(expect.arrayContaining(['task', 'repoLock', 'session', 'replyVerifier']));

    await page.selectOption('#actor-kind', 'task');
    await page.click(`#actor-list a[data-actor-id="${taskActorId('task-browser-2')}"]`);
    await page.waitForSelector('#chart svg[data-machine="task"] g.state.current[data-state="running"]');
    const visited = await page.$$eval('#chart g.state.visited', (gs) => gs.map((g) => g.getAttribute('data-state')).sort());
    expect(visited).toEqual(['preparing', 'queued', 'received']);
    const taken = await page.$$eval('#chart g.edge.taken', (gs) => gs.map((g) => `${g.getAttribute('data-source')}>${g.getAttribute('data-target')}`).sort());
    expect(taken).toEqual(['preparing>running', 'queued>preparing', 'received>queued']);
    expect(await page.$$('#chart g.state.current')).toHaveLength(1);

    // The executor reports a turn that needs the user: the chart follows over SSE, no reload.
    // Its question is verified on Gitea first (verifying_reply), then the task waits.
    await h.runtime.send(taskActorId('task-browser-2'), { type: 'TURN_WAITING_USER' });
    await h.runtime.send(taskActorId('task-browser-2'), { type: 'REPLY_CONFIRMED' });
    await page.waitForSelector('#chart g.state.current[data-state="waiting_user"]');
    await page.waitForSelector('#chart g.edge.taken[data-source="verifying_reply"][data-target="waiting_user"]');
    expect(await page.textContent('#current-state')).toBe('waiting_user');
    await page.screenshot({ path: join(SHOTS, 'visualizer-task-actor.png'), fullPage: true });

    // Another machine's drawing.
    await page.click('.machines button[data-machine="replyVerifier"]');
    await page.waitForSelector('#chart svg[data-machine="replyVerifier"] g.state[data-state="fallback_posting"]');
    await page.screenshot({ path: join(SHOTS, 'visualizer-reply-verifier.png'), fullPage: true });
    expect(consoleErrors).toEqual([]);
  });
});
