// Can an operator read the admin page and the visualizer at a glance? Real Chromium (Debian's
// package through playwright-core) at 1280×800 and 1920×1080 against a real HTTP server, store and
// runtime on 127.0.0.1. Every check measures the rendered page (bounding boxes, scroll widths), so
// it fails on what a person would see: sideways scrolling, cut text, labels drawn over each other,
// an empty error column, another task's events in a timeline. Screenshots go to
// test-artifacts/screenshots/.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { newSessionRecord, sessionActorId, sessionKind } from '../../src/sessions/session-actor.js';
import type { TaskRecord, TurnRecord } from '../../src/domain/records.js';
import { taskActorId, taskKind } from '../../src/tasks/task-actor.js';
import { TASK_STATES } from '../../machines/task-lifecycle.js';
import {
  ADMIN_TOKEN,
  createQueuedTask,
  createRejectedTask,
  driveTask,
  insertRepository,
  startApiHarness,
  type ApiHarness,
} from '../support/api-harness.js';

const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
const SHOTS = join(import.meta.dirname, '../../test-artifacts/screenshots');
const VIEWPORTS = [
  { width: 1280, height: 800 },
  { width: 1920, height: 1080 },
];
const RESOURCE = 'default:acme/widget:issue:1';
const WORKED = 'task-ran-and-asked';
const REJECTED = 'task-rejected-mallory';
const FAILED = 'task-failed-no-mcp';

let h: ApiHarness;
let browser: Browser;

async function send(actorId: string, event: { type: string; [k: string]: unknown }): Promise<void> {
  const r = await h.runtime.send(actorId, event as never);
  if (!r.ok) throw new Error(`${event.type} rejected in ${r.state}`);
}

/**
 * The scenario of the issue: alice's task ran a turn on the resource's shared session and asked
 * her something; then mallory, who may not write, mentioned the bot on the same issue (rejected);
 * another task failed before it ran. Plus filler tasks with long instructions for the list.
 */
async function seed(): Promise<void> {
  await insertRepository(h.store, 'default:acme/widget');
  const worked = await createQueuedTask(h.store, h.runtime, {
    taskId: WORKED,
    resource: { kind: 'issue', number: 1 },
    resourceKey: RESOURCE,
    sessionKey: RESOURCE,
    instruction: '@ccweb-bot please look into the flaky login test; it fails about one run in ten on the CI runners since the retry was added',
  });
  await driveTask(h.runtime, WORKED, 'running');
  const created = await h.store.transact(async (tx) => {
    await tx.insert('sessions', RESOURCE, newSessionRecord(worked as TaskRecord, 'gitea-main', new Date().toISOString()));
    return h.runtime.createInTx(tx, 'session', sessionActorId(RESOURCE), { sessionKey: RESOURCE }, { by: 'system:session_manager' });
  });
  created.start();
  await send(sessionActorId(RESOURCE), { type: 'START_THREAD' });
  await send(sessionActorId(RESOURCE), { type: 'THREAD_STARTED', threadId: 'thread-1' });
  await send(sessionActorId(RESOURCE), { type: 'TURN_STARTED', turnId: 'turn-1', taskId: WORKED });
  await send(sessionActorId(RESOURCE), { type: 'TURN_WAITING_USER', turnId: 'turn-1' });
  // The question is verified on Gitea (verifying_reply) before the task waits.
  await send(taskActorId(WORKED), { type: 'TURN_WAITING_USER' });
  await send(taskActorId(WORKED), { type: 'REPLY_CONFIRMED' });

  // What usage accounting (src/usage/) records for the turn that ran: on the turn and summed on the task.
  const turnUsage = { inputTokens: 12_345, cachedInputTokens: 4_096, outputTokens: 1_234, reasoningOutputTokens: 0, totalTokens: 13_579, model: 'gpt-test-model', wallMs: 42_500, diff: { bytes: 2_048, files: 3, added: 40, removed: 7 } };
  await h.store.transact(async (tx) => {
    await tx.insert('turns', `${WORKED}:1`, {
      turnKey: `${WORKED}:1`, turnId: 'turn-1', taskId: WORKED, threadId: 'thread-1', kind: 'normal', status: 'completed', eventSeq: 1,
      marker: '', finalMessage: null, commentCall: null, startedAt: new Date(Date.now() - 42_500).toISOString(), completedAt: new Date().toISOString(), usage: turnUsage,
    } satisfies TurnRecord);
    const t = (await tx.get<TaskRecord>('tasks', WORKED))!;
    await tx.put('tasks', WORKED, { ...t, usage: { inputTokens: 12_345, cachedInputTokens: 4_096, outputTokens: 1_234, reasoningOutputTokens: 0, totalTokens: 13_579, turns: 1, wallMs: 42_500, diffBytes: 2_048, model: 'gpt-test-model' } });
  });

  await createRejectedTask(h.store, h.runtime, { taskId: REJECTED, resource: { kind: 'issue', number: 1 }, resourceKey: RESOURCE, sessionKey: RESOURCE });

  await createQueuedTask(h.store, h.runtime, { taskId: FAILED, instruction: '@ccweb-bot run the linter' });
  await send(taskActorId(FAILED), { type: 'CLAIM', leaseId: 'lease-failed' });
  await send(taskActorId(FAILED), { type: 'FAIL', errorCode: 'mcp_command_missing' });

  for (let i = 0; i < 6; i++) {
    await createQueuedTask(h.store, h.runtime, {
      taskId: `gitea-task-${String(i).padStart(2, '0')}a7289be0ad9fb2ef336f7ec`,
      instruction: `@ccweb-bot ${'explain why the deployment pipeline rebuilds every container image from scratch '.repeat(2)}#${i}`,
    });
  }
}

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`Chromium not found at ${CHROMIUM}: install it (apt-get install -y chromium) or set CHROMIUM_PATH. The browser tests do not skip.`);
  }
  mkdirSync(SHOTS, { recursive: true });
  h = await startApiHarness([taskKind(), sessionKind()]);
  await seed();
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--headless=new'] });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await h?.close();
});

/** A fresh tab signed in (sessionStorage is per tab), with console errors collected. */
async function signedIn(viewport: { width: number; height: number }, path: string): Promise<{ page: Page; errors: string[] }> {
  const page = await browser.newPage({ viewport });
  const errors: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error' && !m.text().includes('401')) errors.push(m.text());
  });
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(`${h.url}/admin`);
  await page.fill('#token', ADMIN_TOKEN);
  await page.fill('#operator', 'alice');
  await page.click('#sign-in');
  await page.waitForSelector('#tasks');
  if (path !== '/admin') await page.goto(`${h.url}${path}`);
  return { page, errors };
}

/** How far the page scrolls sideways (0 when it fits the window). */
function horizontalOverflow(page: Page): Promise<number> {
  return page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
}

/** Elements under `selector` whose content is wider or taller than their box (cut or hidden text). */
function clipped(page: Page, selector: string): Promise<string[]> {
  return page.$$eval(selector, (roots) => {
    const out: string[] = [];
    for (const root of roots) {
      for (const node of [root, ...root.querySelectorAll('*')] as HTMLElement[]) {
        if (!node.textContent?.trim()) continue;
        if (node.scrollWidth > node.clientWidth + 1 && getComputedStyle(node).display !== 'inline') {
          out.push(`${node.tagName.toLowerCase()}.${node.className}: "${node.textContent.trim().slice(0, 60)}" ${node.scrollWidth}>${node.clientWidth}`);
        }
      }
    }
    return out;
  });
}

describe.each(VIEWPORTS)('admin page at $width×$height', (viewport) => {
  const tag = `${viewport.width}x${viewport.height}`;

  it('says so when the token is wrong, then signs in with the right one', async () => {
    const page = await browser.newPage({ viewport });
    try {
      await page.goto(`${h.url}/admin`);
      await page.fill('#token', 'not-the-token');
      await page.click('#sign-in');
      const message = await page.waitForSelector('#login-error');
      expect(await message.textContent()).toMatch(/did not accept that admin token/);
      expect(await message.isVisible()).toBe(true);
      await page.screenshot({ path: join(SHOTS, `admin-wrong-token-${tag}.png`) });
      await page.fill('#token', ADMIN_TOKEN);
      await page.click('#sign-in');
      await page.waitForSelector('#tasks');
      expect(await page.$('#login-error')).toBeNull();
    } finally {
      await page.close();
    }
  });

  it('task list: fits the window, no cut text, readable state labels, the error column filled', async () => {
    const { page, errors } = await signedIn(viewport, '/admin');
    try {
      await page.waitForSelector(`tr[data-task-id="${REJECTED}"]`);
      expect(await horizontalOverflow(page)).toBeLessThanOrEqual(0);
      expect(await clipped(page, '#tasks')).toEqual([]);
      // The code, and under it its one-line meaning.
      const errorCell = (id: string) => page.$eval(`tr[data-task-id="${id}"] td.error-code`, (td) => td.querySelector('.mono')?.textContent ?? td.textContent);
      const meaningOf = (id: string) => page.$eval(`tr[data-task-id="${id}"] td.error-code`, (td) => td.querySelector('.meaning')?.textContent ?? '');
      expect(await errorCell(REJECTED)).toBe('actor_not_authorized');
      expect(await errorCell(FAILED)).toBe('mcp_command_missing');
      expect(await meaningOf(FAILED)).toMatch(/could not be started/);
      expect(await errorCell(WORKED)).toBe('');
      // Each state label lies wholly inside its cell and inside the window.
      const labels = await page.$$eval('#tasks td .state', (spans) =>
        spans.map((s) => {
          const b = s.getBoundingClientRect();
          const c = s.closest('td')!.getBoundingClientRect();
          return { text: s.textContent, inside: b.left >= c.left && b.right <= c.right && b.right <= window.innerWidth, w: b.width };
        }),
      );
      expect(labels.length).toBeGreaterThanOrEqual(9);
      expect(labels.filter((l) => !l.inside || l.w === 0)).toEqual([]);
      await page.screenshot({ path: join(SHOTS, `admin-list-${tag}.png`) });
      expect(errors).toEqual([]);
    } finally {
      await page.close();
    }
  });

  it("a task's timeline holds only that task's events; a rejected task shows its reason", async () => {
    const { page, errors } = await signedIn(viewport, `/admin#/tasks/${REJECTED}`);
    try {
      await page.waitForSelector('#task-state[data-state="rejected"]');
      const rows = await page.$$eval('#timeline tbody tr', (trs) => trs.map((tr) => ({ ...(tr as HTMLElement).dataset })));
      expect(rows.map((r) => r.action)).toEqual(['webhook.rejected', 'task.transition', 'task.transition']);
      expect(rows.every((r) => r.taskId === REJECTED)).toBe(true);
      expect(await page.$eval('dl.facts', (dl) => dl.textContent)).toContain('actor_not_authorized');
      expect(await horizontalOverflow(page)).toBeLessThanOrEqual(0);
      await page.screenshot({ path: join(SHOTS, `admin-task-rejected-${tag}.png`), fullPage: true });

      // The task that did run keeps its own session events, and none of the rejected task's.
      await page.goto(`${h.url}/admin#/tasks/${WORKED}`);
      await page.waitForSelector('#task-state[data-state="waiting_user"]');
      const worked = await page.$$eval('#timeline tbody tr', (trs) => trs.map((tr) => ({ ...(tr as HTMLElement).dataset })));
      const session = worked.filter((r) => r.actorId === `session:${RESOURCE}`);
      expect(session.length).toBe(5); // created, START_THREAD, THREAD_STARTED, TURN_STARTED, TURN_WAITING_USER
      expect(worked.filter((r) => r.taskId && r.taskId !== WORKED)).toEqual([]);
      expect(await horizontalOverflow(page)).toBeLessThanOrEqual(0);
      await page.screenshot({ path: join(SHOTS, `admin-task-worked-${tag}.png`), fullPage: true });
      expect(errors).toEqual([]);
    } finally {
      await page.close();
    }
  });
});

describe.each(VIEWPORTS)('task usage at $width×$height', (viewport) => {
  const tag = `${viewport.width}x${viewport.height}`;

  it("a task's detail shows its usage: tokens in/cached/out, turns, agent time, diff size; none for a task that never ran", async () => {
    const { page, errors } = await signedIn(viewport, `/admin#/tasks/${WORKED}`);
    try {
      await page.waitForSelector('#task-usage tbody tr');
      const cells = (sel: string) => page.$$eval(sel, (tds) => tds.map((td) => td.textContent?.trim() ?? ''));
      expect(await cells('#task-usage thead th')).toEqual(['turn', 'status', 'model', 'input tokens', 'cached', 'output tokens', 'total tokens', 'agent time', 'diff']);
      expect(await cells('#task-usage tbody tr td')).toEqual(['turn-1', 'completed', 'gpt-test-model', '12,345', '4,096', '1,234', '13,579', '42.5 s', '2,048 B · 3 files · +40 −7']);
      expect(await cells('#task-usage tfoot tr td')).toEqual(['task total', '1 turn', 'gpt-test-model', '12,345', '4,096', '1,234', '13,579', '42.5 s', '2,048 B published']);
      expect(await clipped(page, '#task-usage')).toEqual([]);
      expect(await horizontalOverflow(page)).toBeLessThanOrEqual(0);
      await page.$eval('#task-usage', (e) => e.scrollIntoView({ block: 'center' }));
      await page.screenshot({ path: join(SHOTS, `admin-task-usage-${tag}.png`) });

      // A task refused before it ran has no usage, and says so rather than showing an empty table.
      await page.goto(`${h.url}/admin#/tasks/${REJECTED}`);
      await page.waitForSelector('#task-state[data-state="rejected"]');
      expect(await page.textContent('#task-usage')).toContain('none recorded');
      expect(await page.$$('#task-usage tbody tr')).toHaveLength(0);
      expect(errors).toEqual([]);
    } finally {
      await page.close();
    }
  });
});

/** Boxes of every text in the drawing, and pairs that overlap (by more than half a pixel). */
function labelCollisions(page: Page): Promise<{ texts: number; minFontPx: number; overlaps: string[] }> {
  return page.$eval('#chart svg', (root) => {
    const texts = [...root.querySelectorAll('text')].filter((t) => t.textContent?.trim());
    const boxes = texts.map((t) => ({ t: t.textContent!, r: t.getBoundingClientRect(), g: t.closest('g') }));
    const rects = [...root.querySelectorAll('g.state rect')].map((r) => ({ g: r.closest('g'), r: r.getBoundingClientRect() }));
    const overlap = (a: DOMRect, b: DOMRect) => Math.min(a.right, b.right) - Math.max(a.left, b.left) > 0.5 && Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 0.5;
    const overlaps: string[] = [];
    for (let i = 0; i < boxes.length; i++) {
      for (let j = i + 1; j < boxes.length; j++) if (overlap(boxes[i]!.r, boxes[j]!.r)) overlaps.push(`"${boxes[i]!.t}" × "${boxes[j]!.t}"`);
      // A label over a state box other than its own hides the state.
      for (const s of rects) if (s.g !== boxes[i]!.g && overlap(boxes[i]!.r, s.r)) overlaps.push(`"${boxes[i]!.t}" × state ${s.g!.getAttribute('data-state')}`);
    }
    const names = [...root.querySelectorAll('g.state text.name')].map((t) => t.getBoundingClientRect().height);
    return { texts: texts.length, minFontPx: Math.min(...names), overlaps };
  });
}

describe.each(VIEWPORTS)('visualizer at $width×$height', (viewport) => {
  const tag = `${viewport.width}x${viewport.height}`;

  it('landing view: the whole task machine, its full description, readable labels, nothing sideways', async () => {
    const { page, errors } = await signedIn(viewport, '/visualizer');
    try {
      await page.waitForSelector('#chart svg[data-machine="task"]');
      const description = ((await h.call('GET', '/api/gitea-workflow/machines')).body.machines as Array<{ id: string; graph: { description: string } }>).find((m) => m.id === 'task')!.graph.description;
      expect(description.length).toBeGreaterThan(20);
      expect(await page.textContent('#machine-description')).toBe(description);
      expect(await clipped(page, '.machine-head')).toEqual([]);
      expect(await horizontalOverflow(page)).toBeLessThanOrEqual(0);
      // Every state of the machine is drawn, visible inside the chart panel's width.
      const states = await page.$$eval('#chart g.state rect', (rs) => {
        const panel = document.getElementById('chart')!.getBoundingClientRect();
        return rs.map((r) => r.getBoundingClientRect()).map((b) => b.left >= panel.left - 0.5 && b.right <= panel.right + 0.5);
      });
      expect(states).toHaveLength(TASK_STATES.length); // 19 with change delivery's `publishing`
      expect(states.every(Boolean)).toBe(true);
      const c = await labelCollisions(page);
      expect(c.minFontPx).toBeGreaterThanOrEqual(9);
      expect(c.overlaps).toEqual([]);
      await page.screenshot({ path: join(SHOTS, `visualizer-landing-${tag}.png`) });
      expect(errors).toEqual([]);
    } finally {
      await page.close();
    }
  });

  it('every machine: no label drawn over another label or a state, at fit and at 100 %; no sideways page', async () => {
    const { page } = await signedIn(viewport, '/visualizer');
    try {
      await page.waitForSelector('#chart svg[data-machine]');
      const ids = await page.$$eval('.machines button', (bs) => bs.map((b) => b.getAttribute('data-machine')!));
      expect(ids.length).toBeGreaterThanOrEqual(5);
      const found: string[] = [];
      for (const zoom of ['fit', '100']) {
        for (const id of ids) {
          await page.click(`.machines button[data-machine="${id}"]`);
          await page.waitForSelector(`#chart svg[data-machine="${id}"]`);
          if (zoom === '100' && (await page.textContent('#zoom'))!.includes('fit')) await page.click('#zoom');
          await page.waitForSelector(zoom === 'fit' ? '#zoom:text("fit width")' : '#zoom:text("100 %")');
          const c = await labelCollisions(page);
          expect(c.texts, id).toBeGreaterThan(2);
          found.push(...c.overlaps.map((o) => `${id} at ${zoom}: ${o}`));
          const sideways = await horizontalOverflow(page);
          if (sideways > 0) found.push(`${id} at ${zoom}: the page scrolls ${sideways}px sideways`);
        }
        await page.screenshot({ path: join(SHOTS, `visualizer-${ids.at(-1)}-${zoom}-${tag}.png`) });
        if (zoom === 'fit') await page.click('#zoom');
      }
      expect(found).toEqual([]);
    } finally {
      await page.close();
    }
  });

  it('actor list: ids and states uncut; the kind filter follows the machine', async () => {
    const { page, errors } = await signedIn(viewport, '/visualizer');
    try {
      // Live actors first; finished ones (the rejected task) in their own list.
      await page.waitForSelector(`#finished-actor-list a[data-actor-id="${taskActorId(REJECTED)}"]`, { state: 'attached' });
      expect(await clipped(page, '#actor-list')).toEqual([]);
      const live = await page.$$eval('#actor-list .actor-id', (ss) => ss.map((s) => s.textContent));
      const finished = await page.$$eval('#finished-actor-list .actor-id', (ss) => ss.map((s) => s.textContent));
      expect(live).toContain(sessionActorId(RESOURCE));
      expect(live).not.toContain(taskActorId(REJECTED));
      expect([...live, ...finished]).toEqual(expect.arrayContaining([taskActorId(WORKED), taskActorId(REJECTED), sessionActorId(RESOURCE)]));

      await page.selectOption('#actor-kind', 'task');
      await page.waitForFunction(() => [...document.querySelectorAll('#actor-list a')].every((a) => a.getAttribute('data-actor-id')!.startsWith('task:')));
      await page.click('.machines button[data-machine="session"]');
      await page.waitForSelector('#chart svg[data-machine="session"]');
      await page.waitForFunction(() => (document.getElementById('actor-kind') as HTMLSelectElement).value === 'session');
      const after = await page.$$eval('#actor-list a', (as) => as.map((a) => a.getAttribute('data-actor-id')));
      expect(after).toEqual([sessionActorId(RESOURCE)]);

      await page.click(`#actor-list a[data-actor-id="${sessionActorId(RESOURCE)}"]`);
      await page.waitForSelector('#chart g.state.current[data-state="idle"], #chart g.state.current[data-state="waiting_user"], #chart g.state.current');
      expect(await clipped(page, '.side')).toEqual([]);
      expect(await horizontalOverflow(page)).toBeLessThanOrEqual(0);
      await page.screenshot({ path: join(SHOTS, `visualizer-session-actor-${tag}.png`) });
      expect(errors).toEqual([]);
    } finally {
      await page.close();
    }
  });
});
