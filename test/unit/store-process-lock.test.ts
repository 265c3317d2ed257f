import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createStore } from '../../src/store/index.js';

describe('store process lock', () => {
  const dirs: string[] = [];
  afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

  it('refuses a directory held by another live process, takes over one left by a dead process', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ccweb-lock-'));
    dirs.push(dir);
    const holder = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' });
    writeFileSync(join(dir, 'LOCK'), String(holder.pid));
    await expect(createStore({ dir }).open()).rejects.toMatchObject({ code: 'store_locked' });
    holder.kill('SIGKILL');
    await new Promise((r) => holder.once('exit', r));
    const store = createStore({ dir });
    await store.open();
    await store.transact((tx) => tx.insert('control', 'global', { globalPaused: false }));
    await store.close();
    const again = createStore({ dir });
    await again.open();
    expect(await again.get('control', 'global')).toMatchObject({ globalPaused: false });
    await again.close();
  });
});
