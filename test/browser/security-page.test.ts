// The admin page's security view (`#/security`) in real Chromium (Debian's
// package, driven by playwright-core) against a real HTTP server: the operators' API and the real
// webhook intake sharing one security-event sink, a real store. Wrong admin tokens and badly signed
// webhooks are sent for real (each group from its own loopback address); a refused agent tool call
// goes the gate's way into the audit (gate file → ingestGateCalls); a pause goes through the page.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync, mkdirSync, mkdtempSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { API_PREFIX } from '../../src/api/control-router.js';
import { appendGateCall } from '../../src/mcp-gate/gate-files.js';
import { ingestGateCalls } from '../../src/sessions/gate-calls.js';
import { ADMIN_TOKEN, createQueuedTask, midWindowClock, startApiHarness, type ApiHarness } from '../support/api-harness.js';
import { FIXTURE_SECRET, loadFixture, signedHeaders } from '../support/webhook-fixtures.js';

const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
const SHOTS = join(import.meta.dirname, '../../test-artifacts/screenshots');
const GUESS = 'guessed-admin-token-7c1d2e3f4a5b';
const READER = 'rita';

let h: ApiHarness;
let browser: Browser;
let page: Page;
const consoleErrors: string[] = [];

function send(method: string, path: string, from: string, headers: Record<string, string> = {}, body?: Buffer): Promise<number> {
  return new Promise((resolve, reject) => {
    const u = new URL(`${h.url}${path}`);
    const all = { ...headers, ...(body ? { 'content-length': String(body.length) } : {}) };
    const req = httpRequest({ host: u.hostname, port: u.port, path: u.pathname, method, localAddress: from, headers: all, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end(body);
  });
}

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`Chromium not found at ${CHROMIUM}: install it (apt-get install -y chromium) or set CHROMIUM_PATH. The browser tests do not skip.`);
  }
  mkdirSync(SHOTS, { recursive: true });
  h = await startApiHarness(undefined, { webhook: true, now: midWindowClock(), permission: (login) => (login === READER ? 'read' : 'write') });
  for (let i = 0; i < 4; i++) expect(await send('GET', `${API_PREFIX}/overview`, '127.0.0.2', { authorization: `Bearer ${GUESS}`, 'user-agent': 'token-guesser/1.0' })).toBe(401);
  const fixture = loadFixture('issue_comment_created_on_issue');
  for (let i = 0; i < 3; i++) {
    const headers = signedHeaders(fixture.headers, fixture.body, 'not-the-webhook-secret', { 'X-Gitea-Delivery': `7e0b9c1d-0000-4000-8000-00000000000${i}` });
    delete headers['Content-Length'];
    expect(await send('POST', '/api/gitea/webhook', '127.0.0.3', headers, fixture.body)).toBe(401);
  }
  // A reader mentions the bot twice, correctly signed: refused, and not a failed authentication.
  for (let i = 0; i < 2; i++) {
    const p = JSON.parse(fixture.body.toString('utf8'));
    p.sender.login = READER;
    p.comment.user.login = READER;
    p.comment.id = 770_001 + i;
    delete p.repository.permissions;
    const body = Buffer.from(JSON.stringify(p));
    const headers = signedHeaders(fixture.headers, body, FIXTURE_SECRET, { 'X-Gitea-Delivery': `3c4d5e6f-0000-4000-8000-00000000000${i}` });
    delete headers['Content-Length'];
    expect(await send('POST', '/api/gitea/webhook', '127.0.0.4', headers, body)).toBe(200);
  }
  await createQueuedTask(h.store, h.runtime, { taskId: 'task-security-page' });
  const gateDir = mkdtempSync(join(tmpdir(), 'ccweb-gate-'));
  appendGateCall(gateDir, { at: new Date().toISOString(), taskId: 'task-security-page', tool: 'delete_repo', method: null, place: { owner: 'acme', repo: 'widget' }, outcome: 'refused', reason: 'not allowed: delete_repo' });
  await ingestGateCalls(h.store, gateDir);

  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--headless=new'] });
  page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  page.on('console', (m) => {
    if (m.type() === 'error') consoleErrors.push(m.text());
  });
  page.on('pageerror', (e) => consoleErrors.push(e.message));
});

afterAll(async () => {
  await browser?.close();
  await h?.close();
});

describe('admin page: security view', () => {
  it('lists the failed authentications with their counts and the refused agent call, readable', async () => {
    await page.goto(`${h.url}/admin`);
    await page.fill('#token', ADMIN_TOKEN);
    await page.fill('#operator', 'alice');
    await page.click('#sign-in');
    await page.waitForSelector('#tasks');
    await page.click('#security-link');
    await page.waitForSelector('#security-events');

    const rows = await page.$$eval('#security-events tr[data-testid="security-event"]', (trs) =>
      trs.map((tr) => [(tr as HTMLElement).dataset['kind'], (tr as HTMLElement).dataset['source'], tr.querySelector('td.count')!.textContent]));
    expect(rows).toEqual([
      ['admin_unauthorized', '127.0.0.2', '4'],
      ['invalid_signature', '127.0.0.3', '3'],
    ]);
    const table = await page.textContent('#security-events');
    expect(table).toContain('admin API: wrong or missing token');
    expect(table).toContain('webhook: bad signature');
    expect(table).toContain('GET /api/gitea-workflow/overview · user agent token-guesser/1.0');
    expect(table).toContain('delivery 7e0b9c1d-0000-4000-8000-000000000000');
    expect(table).toContain('ongoing');
    expect(await page.textContent('#security-summary')).toContain('7 failed requests in 2 source windows');
    // The heading says the window each row shows.
    const spans = await page.$$eval('#security-events tr[data-testid="security-event"] td.time:first-child', (tds) => tds.map((td) => td.firstChild!.textContent!));
    const minutes = (span: string) => {
      const [from, to] = span.split(' – ');
      return (Date.parse(to!) - Date.parse(from!)) / 60_000;
    };
    const shown = minutes(spans[0]!);
    expect(spans.map(minutes)).toEqual([shown, shown]);
    expect(await page.textContent('#security-events thead th:first-child')).toBe(`window (${shown} min)`);
    expect(await page.textContent('#security-summary')).toContain(`source and ${shown} min window`);

    // The reader's mentions: their own table, one row per author and day, never among the failures.
    expect(table).not.toContain(READER);
    const mentions = await page.$$eval('#refused-mentions tr[data-testid="refused-mention"]', (trs) =>
      trs.map((tr) => [(tr as HTMLElement).dataset['login'], (tr as HTMLElement).dataset['count']]));
    expect(mentions).toEqual([[READER, '2']]);
    expect(await page.textContent('#refused-mentions thead th:first-child')).toBe('window (1 day, UTC)');
    const daySpan = await page.$eval('#refused-mentions tr[data-testid="refused-mention"] td.time', (td) => td.firstChild!.textContent!);
    expect(minutes(daySpan)).toBe(24 * 60);
    const mentionRow = await page.textContent('#refused-mentions tr[data-testid="refused-mention"]');
    expect(mentionRow).toContain('no write access');
    expect(mentionRow).toContain('comment 770001');
    expect(mentionRow).toContain('comment 770002');
    expect(await page.textContent('#mentions-summary')).toContain('2 mentions refused.');

    const audit = await page.$$eval('#security-audit tbody tr', (trs) => trs.map((tr) => (tr as HTMLElement).dataset['action']));
    expect(audit).toEqual(['agent.gitea_refused']);
    const refused = await page.textContent('#security-audit tr[data-action="agent.gitea_refused"]');
    expect(refused).toContain('agent tool call refused by the gate');
    expect(refused).toContain('tool delete_repo');
    expect(refused).toContain('task-security-page');

    // Readable at 1280 px: no sideways scrolling, and the count column is visible.
    expect(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth)).toBe(true);
    expect(await page.isVisible('#security-events td.count')).toBe(true);
    const text = await page.textContent('main');
    expect(text).not.toContain(GUESS);
    expect(text).not.toContain('not-the-webhook-secret');
    await page.screenshot({ path: join(SHOTS, 'admin-security.png'), fullPage: true });
  });

  it('a control action made on the page appears there, newest first', async () => {
    await page.click('a[href="#/"]');
    await page.waitForSelector('#pause');
    page.once('dialog', (d) => void d.accept('checking the security view'));
    await page.click('#pause');
    await page.waitForSelector('#resume');
    await page.click('#security-link');
    await page.waitForSelector('#security-audit tr[data-action="control.pause"]');
    const audit = await page.$$eval('#security-audit tbody tr', (trs) => trs.map((tr) => (tr as HTMLElement).dataset['action']));
    expect(audit).toEqual(['control.pause', 'agent.gitea_refused']);
    expect(await page.textContent('#security-audit tr[data-action="control.pause"]')).toContain('admin:alice');
    expect(consoleErrors).toEqual([]);
  });
});
