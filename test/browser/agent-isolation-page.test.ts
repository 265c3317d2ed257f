// The admin page says when the agent runs without isolation (CCWEB_AGENT_ISOLATION=off),
// in real Chromium against the real operator routers; and says nothing when isolation is on.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import { ADMIN_TOKEN, startApiHarness, type ApiHarness } from '../support/api-harness.js';
import { ISOLATION_OFF_WARNING } from '../../src/isolation/service-isolation.js';

const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
let browser: Browser;
const harnesses: ApiHarness[] = [];

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`Chromium not found at ${CHROMIUM}: install it (apt-get install -y chromium) or set CHROMIUM_PATH. The browser tests do not skip.`);
  }
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--headless=new'] });
});

afterAll(async () => {
  await browser?.close();
  for (const h of harnesses) await h.close();
});

async function headerOf(mode: 'on' | 'off'): Promise<{ pill: string | null; title: string | null; header: string }> {
  const h = await startApiHarness(undefined, { agentIsolation: { mode, network: 'off', warning: mode === 'off' ? ISOLATION_OFF_WARNING : null } });
  harnesses.push(h);
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  try {
    await page.goto(`${h.url}/admin`);
    await page.fill('#token', ADMIN_TOKEN);
    await page.fill('#operator', 'alice');
    await page.click('#sign-in');
    await page.waitForSelector('#pause-state');
    const pill = await page.$('#isolation-state');
    return {
      pill: pill ? await pill.textContent() : null,
      title: pill ? await pill.getAttribute('title') : null,
      header: (await page.textContent('header')) ?? '',
    };
  } finally {
    await page.close();
  }
}

describe('admin page: agent isolation', () => {
  it('off: a red "agent isolation OFF" next to the service state, the warning on hover', async () => {
    const r = await headerOf('off');
    expect(r.pill).toBe('agent isolation OFF');
    expect(r.title).toBe(ISOLATION_OFF_WARNING);
  }, 60_000);

  it('on: nothing to say', async () => {
    const r = await headerOf('on');
    expect(r.pill).toBeNull();
    expect(r.header).not.toMatch(/isolation/i);
  }, 60_000);
});
