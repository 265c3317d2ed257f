import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { createStore } from '../../src/store/index.js';
import { acquireProcessLock, liveLockHolder, LOCK_HEARTBEAT_MS, LOCK_STALE_AFTER_MS } from '../../src/data-dir/data-dir-lock.js';

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

  // In containers the service and a `docker compose run` beside it on the same volume are both pid 1:
  // a pid from another pid namespace or host says nothing about the processes visible here.
  it.each([
    ['another pid namespace', { host: hostname(), pidNamespace: 'pid:[1]' }],
    ['another host', { host: 'other-host.example' }],
  ])('a lock with this very pid from %s is live: refused, naming the holder', (_what, where) => {
    const dir = mkdtempSync(join(tmpdir(), 'ccweb-lock-'));
    dirs.push(dir);
    const lock = JSON.stringify({ pid: process.pid, ...where, since: '2026-12-01T10:00:00.000Z' });
    writeFileSync(join(dir, 'LOCK'), lock);
    expect(liveLockHolder(dir)).toMatchObject({ pid: process.pid, ...where });
    expect(() => acquireProcessLock(dir)).toThrow(new RegExp(`in use by process ${process.pid} on host ${where.host.replace(/\./g, '\\.')}.* since 2026-12-01T10:00:00.000Z`));
    expect(readFileSync(join(dir, 'LOCK'), 'utf8')).toBe(lock);
  });

  it('writes where its pid lives; a lock of its own pid and namespace, or an earlier version\'s pid alone, is stale', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ccweb-lock-'));
    dirs.push(dir);
    const release = acquireProcessLock(dir);
    const written = JSON.parse(readFileSync(join(dir, 'LOCK'), 'utf8')) as Record<string, unknown>;
    expect(written).toMatchObject({ pid: process.pid, host: hostname(), since: expect.stringMatching(/^\d{4}-/) });
    if (existsSync('/proc/self/ns/pid')) expect(written['pidNamespace']).toMatch(/^pid:\[\d+\]$/);
    expect(liveLockHolder(dir)).toBeNull();
    release();
    expect(existsSync(join(dir, 'LOCK'))).toBe(false);
    // An earlier version's LOCK: judged by its pid as before (our own: stale, taken over; a live one: refused).
    writeFileSync(join(dir, 'LOCK'), String(process.pid));
    acquireProcessLock(dir)();
    writeFileSync(join(dir, 'LOCK'), String(process.ppid));
    expect(liveLockHolder(dir)).toMatchObject({ pid: process.ppid });
    expect(() => acquireProcessLock(dir)).toThrow(`in use by process ${process.ppid}`);
  });

  // A container killed (or a host that lost power) leaves its LOCK; the service restarted in a new
  // container (a new pid namespace) takes it over once its holder stopped touching it.
  it('a lock from elsewhere that its holder stopped touching is taken over; the holder touches its own', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ccweb-lock-'));
    dirs.push(dir);
    const path = join(dir, 'LOCK');
    writeFileSync(path, JSON.stringify({ pid: 1, host: hostname(), pidNamespace: 'pid:[1]', since: '2026-12-01T10:00:00.000Z' }));
    const at = (msAgo: number) => new Date(Date.now() - msAgo);
    utimesSync(path, at(LOCK_STALE_AFTER_MS / 2), at(LOCK_STALE_AFTER_MS / 2));
    expect(() => acquireProcessLock(dir)).toThrow(/in use by process 1 .*its LOCK touched/);
    utimesSync(path, at(LOCK_STALE_AFTER_MS + 1000), at(LOCK_STALE_AFTER_MS + 1000));
    expect(liveLockHolder(dir)).toBeNull();
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    try {
      const release = acquireProcessLock(dir);
      expect(JSON.parse(readFileSync(path, 'utf8'))).toMatchObject({ pid: process.pid });
      utimesSync(path, at(LOCK_STALE_AFTER_MS + 1000), at(LOCK_STALE_AFTER_MS + 1000));
      vi.advanceTimersByTime(LOCK_HEARTBEAT_MS);
      expect(Date.now() - statSync(path).mtimeMs).toBeLessThan(LOCK_HEARTBEAT_MS);
      release();
    } finally {
      vi.useRealTimers();
    }
  });
});
