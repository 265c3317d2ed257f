// Secrets from files (`CCWEB_*_FILE`) and the agent isolation keys.
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/index.js';

const TOKEN = 'gitea-token-FROM-FILE-6d1f';
const SECRET = 'wh-secret-FROM-FILE-a9e2';
const ADMIN = 'admin-token-FROM-FILE-33c0';

let cwd: string;
beforeEach(() => {
  cwd = mkdtempSync(path.join(tmpdir(), 'ccweb-config-files-'));
});
afterEach(() => {
  rmSync(cwd, { recursive: true, force: true });
});

function secretFile(name: string, content: string): string {
  const file = path.join(cwd, name);
  writeFileSync(file, content, { mode: 0o600 });
  return file;
}

function load(env: Record<string, string | undefined>, configPath?: string) {
  return loadConfig({ env, cwd, argv: [], ...(configPath ? { configPath } : {}), resolveCodexCommand: () => '/bundled/codex' });
}

function problems(fn: () => unknown): string[] {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as ConfigError).problems;
  }
  throw new Error('expected a ConfigError');
}

describe('secrets from files', () => {
  it('reads each secret from its _FILE (trailing newline dropped) and lists the files', () => {
    const env = {
      CCWEB_GITEA_URL: 'https://gitea.example.com',
      CCWEB_GITEA_TOKEN_FILE: secretFile('token', `${TOKEN}\n`),
      CCWEB_WEBHOOK_SECRET_FILE: secretFile('webhook', `${SECRET},old-secret-xyz\r\n`),
      CCWEB_ADMIN_TOKEN_FILE: 'admin', // relative to cwd
    };
    secretFile('admin', ADMIN);
    const config = load(env);
    expect(config.giteaToken).toBe(TOKEN);
    expect(config.webhookSecret).toEqual([SECRET, 'old-secret-xyz']);
    expect(config.adminToken).toBe(ADMIN);
    expect(config.secretFiles.sort()).toEqual([path.join(cwd, 'admin'), path.join(cwd, 'token'), path.join(cwd, 'webhook')].sort());
  });

  it('takes file paths from the config file too (giteaTokenFile …)', () => {
    const cfg = path.join(cwd, 'ccweb.config.json');
    writeFileSync(
      cfg,
      JSON.stringify({ giteaUrl: 'https://g.example', giteaTokenFile: secretFile('t', TOKEN), webhookSecretFile: secretFile('w', SECRET), adminTokenFile: secretFile('a', ADMIN) }),
    );
    const config = load({}, cfg);
    expect([config.giteaToken, config.webhookSecret, config.adminToken]).toEqual([TOKEN, [SECRET], ADMIN]);
  });

  it('refuses both a value and its file, a missing file and an empty file — naming keys and paths, never values', () => {
    const p = problems(() =>
      load({
        CCWEB_GITEA_URL: 'https://gitea.example.com',
        CCWEB_GITEA_TOKEN: TOKEN,
        CCWEB_GITEA_TOKEN_FILE: secretFile('token', TOKEN),
        CCWEB_WEBHOOK_SECRET_FILE: path.join(cwd, 'missing'),
        CCWEB_ADMIN_TOKEN_FILE: secretFile('empty', '\n'),
      }),
    );
    expect(p).toHaveLength(3);
    expect(p).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/CCWEB_GITEA_TOKEN .* and CCWEB_GITEA_TOKEN_FILE .* are both set/),
        expect.stringMatching(/CCWEB_WEBHOOK_SECRET_FILE .*cannot read .*missing \(ENOENT\)/),
        expect.stringMatching(/CCWEB_ADMIN_TOKEN_FILE .*empty is empty/),
      ]),
    );
    expect(p.join('\n')).not.toContain(TOKEN);
  });

  it('an unreadable file is named with its error code', () => {
    if (process.getuid?.() === 0) return; // root reads any file: nothing to show here
    const f = secretFile('token', TOKEN);
    chmodSync(f, 0o000);
    expect(problems(() => load({ CCWEB_GITEA_URL: 'https://g.example', CCWEB_GITEA_TOKEN_FILE: f, CCWEB_WEBHOOK_SECRET: 'x', CCWEB_ADMIN_TOKEN: 'y' }))[0]).toMatch(/EACCES/);
  });

  it('a missing secret mentions its _FILE alternative', () => {
    const p = problems(() => load({ CCWEB_GITEA_URL: 'https://g.example', CCWEB_WEBHOOK_SECRET: 'x', CCWEB_ADMIN_TOKEN: 'y' }));
    expect(p[0]).toMatch(/CCWEB_GITEA_TOKEN .* is required: .*CCWEB_GITEA_TOKEN_FILE/);
  });
});

describe('agent isolation keys', () => {
  const base = { CCWEB_GITEA_URL: 'https://g.example', CCWEB_GITEA_TOKEN: 't', CCWEB_WEBHOOK_SECRET: 'w', CCWEB_ADMIN_TOKEN: 'a' };
  it('on/off in any case; hide paths must be absolute', () => {
    const c = load({ ...base, CCWEB_AGENT_ISOLATION: 'OFF', CCWEB_AGENT_NETWORK: ' on ', CCWEB_AGENT_HIDE_PATHS: '/srv/backups, /etc/gitea' });
    expect([c.agentIsolation, c.agentNetwork, c.agentHidePaths]).toEqual(['off', 'on', ['/srv/backups', '/etc/gitea']]);
    const p = problems(() => load({ ...base, CCWEB_AGENT_ISOLATION: 'maybe', CCWEB_AGENT_HIDE_PATHS: 'relative/dir' }));
    expect(p[0]).toMatch(/CCWEB_AGENT_ISOLATION .* expected on or off/);
    expect(p[1]).toMatch(/CCWEB_AGENT_HIDE_PATHS .* expected absolute paths/);
  });
});
