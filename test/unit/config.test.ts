import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, bundledCodexCommand, defaultNodeId, loadConfig, redactConfig } from '../../src/config/index.js';

const SECRET = 'wh-secret-DO-NOT-PRINT';
const TOKEN = 'gitea-token-DO-NOT-PRINT';
const ADMIN = 'admin-token-DO-NOT-PRINT';

const REQUIRED = {
  CCWEB_WEBHOOK_SECRET: SECRET,
  CCWEB_GITEA_URL: 'https://gitea.example.com/',
  CCWEB_GITEA_TOKEN: TOKEN,
  CCWEB_ADMIN_TOKEN: ADMIN,
};

let cwd: string;
beforeEach(() => {
  cwd = mkdtempSync(path.join(tmpdir(), 'ccweb-config-'));
});
afterEach(() => {
  rmSync(cwd, { recursive: true, force: true });
});

function load(env: Record<string, string | undefined>, extra: { argv?: string[]; configPath?: string } = {}) {
  return loadConfig({ env, cwd, argv: extra.argv ?? [], configPath: extra.configPath, resolveCodexCommand: () => '/bundled/codex' });
}

function configError(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return error as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

function writeFile(name: string, data: unknown): string {
  const file = path.join(cwd, name);
  writeFileSync(file, typeof data === 'string' ? data : JSON.stringify(data));
  return file;
}

describe('loadConfig: the store on PostgreSQL', () => {
  it('takes a postgres:// URL from the environment or a file, keeps it out of the redacted copy, and names the key for anything else', () => {
    const url = 'postgres://ccweb:pw-123@db.example.com:5432/ccweb';
    const config = load({ ...REQUIRED, CCWEB_DATABASE_URL: url, CCWEB_NODE_ID: 'node-1', CCWEB_DATABASE_OUTAGE_SECONDS: '30' });
    expect(config).toMatchObject({ databaseUrl: url, nodeId: 'node-1', databaseOutageSeconds: 30 });
    expect(JSON.stringify(redactConfig(config))).not.toContain('pw-123');
    const file = writeFile('database_url', `${url}\n`);
    expect(load({ ...REQUIRED, CCWEB_DATABASE_URL_FILE: file }).databaseUrl).toBe(url);
    expect(configError(() => load({ ...REQUIRED, CCWEB_DATABASE_URL: 'mysql://x' })).message).toMatch(/CCWEB_DATABASE_URL .* is invalid .*expected a postgres:\/\/ URL/);
    expect(configError(() => load({ ...REQUIRED, CCWEB_NODE_ID: 'a/b' })).message).toMatch(/CCWEB_NODE_ID .* is invalid/);
    expect(configError(() => load({ ...REQUIRED, CCWEB_DATABASE_URL: url, CCWEB_DATABASE_URL_FILE: file })).message).toMatch(/CCWEB_DATABASE_URL .*and CCWEB_DATABASE_URL_FILE .*are both set/);
  });

  it('CCWEB_CLUSTER_MODE: refused, whatever its value, with the one line that says to remove it', () => {
    const url = 'postgres://ccweb:pw-123@db.example.com:5432/ccweb';
    expect(load({ ...REQUIRED, CCWEB_DATABASE_URL: url, CCWEB_NODE_HEARTBEAT_SECONDS: '2' })).toMatchObject({ nodeHeartbeatSeconds: 2 });
    for (const value of ['active', 'standby', 'anything']) {
      const error = configError(() => load({ ...REQUIRED, CCWEB_DATABASE_URL: url, CCWEB_CLUSTER_MODE: value }));
      expect(error.message).toBe('Invalid configuration: CCWEB_CLUSTER_MODE is gone: every node is alike; remove it');
    }
    expect(configError(() => load({ ...REQUIRED, CCWEB_NODE_HEARTBEAT_SECONDS: '0' })).message).toMatch(/CCWEB_NODE_HEARTBEAT_SECONDS .* is invalid/);
  });
});

describe('loadConfig', () => {
  it('defaults', () => {
    const config = load(REQUIRED);
    expect(config).toEqual({
      host: '127.0.0.1',
      port: 8080,
      dataDir: path.join(cwd, 'data'),
      webhookSecret: [SECRET],
      giteaUrl: 'https://gitea.example.com',
      giteaToken: TOKEN,
      adminToken: ADMIN,
      workspaceRoot: path.join(cwd, 'data', 'workspaces'),
      codexCommand: '/bundled/codex',
      giteaMcpCommand: 'gitea-mcp',
      webhookPath: '/api/gitea/webhook',
      webhookMaxBytes: 2 * 1024 * 1024,
      maxConcurrentTasks: 2,
      allowUsers: [],
      denyUsers: [],
      leaseTtlMs: 60_000,
      turnTimeoutMs: 1_800_000,
      workspaceTimeoutMs: 120_000,
      logLevel: 'info',
      configFile: null,
      agentIsolation: 'on',
      agentNetwork: 'off',
      agentHidePaths: [],
      secretFiles: [],
      // The host name and a hash of the data directory: two data directories on one host differ.
      nodeId: defaultNodeId(path.join(cwd, 'data')),
    });
    expect(config.nodeId).toMatch(/^[A-Za-z0-9_.:-]+-[0-9a-f]{8}$/);
    expect(defaultNodeId('/srv/a')).not.toBe(defaultNodeId('/srv/b'));
    expect(config.databaseUrl).toBeUndefined();
    expect(config.botLogin).toBeUndefined();
    expect(config.codexModel).toBeUndefined();
  });

  it('reads every key from the environment', () => {
    const config = load({
      ...REQUIRED,
      CCWEB_HOST: '0.0.0.0',
      CCWEB_PORT: '9090',
      CCWEB_DATA_DIR: 'var/ccweb',
      CCWEB_WEBHOOK_SECRET: 'new-secret, old-secret,',
      CCWEB_BOT_LOGIN: 'ccweb-bot',
      CCWEB_WORKSPACE_ROOT: '/srv/ws',
      CCWEB_CODEX_COMMAND: '/usr/local/bin/codex',
      CCWEB_GITEA_MCP_COMMAND: '/usr/local/bin/gitea-mcp',
      CCWEB_WEBHOOK_PATH: '/hooks/gitea',
      CCWEB_WEBHOOK_MAX_BYTES: '4096',
      CCWEB_MAX_CONCURRENT_TASKS: '8',
      CCWEB_CODEX_MODEL: 'gpt-5-codex',
      CCWEB_ALLOW_USERS: 'alice, bob',
      CCWEB_DENY_USERS: 'mallory',
      CCWEB_LEASE_TTL_MS: '30000',
      CCWEB_TURN_TIMEOUT_MS: '600000',
      CCWEB_WORKSPACE_TIMEOUT_MS: '900000',
      CCWEB_LOG_LEVEL: 'DEBUG',
    });
    expect(config).toMatchObject({
      host: '0.0.0.0',
      port: 9090,
      dataDir: path.join(cwd, 'var/ccweb'),
      webhookSecret: ['new-secret', 'old-secret'],
      botLogin: 'ccweb-bot',
      workspaceRoot: '/srv/ws',
      codexCommand: '/usr/local/bin/codex',
      giteaMcpCommand: '/usr/local/bin/gitea-mcp',
      webhookPath: '/hooks/gitea',
      webhookMaxBytes: 4096,
      maxConcurrentTasks: 8,
      codexModel: 'gpt-5-codex',
      allowUsers: ['alice', 'bob'],
      denyUsers: ['mallory'],
      leaseTtlMs: 30000,
      turnTimeoutMs: 600000,
      workspaceTimeoutMs: 900000,
      logLevel: 'debug',
    });
  });

  it('CCWEB_WORKSPACE_TIMEOUT_MS out of range names the key and the fix', () => {
    expect(() => load({ ...REQUIRED, CCWEB_WORKSPACE_TIMEOUT_MS: '10' })).toThrow(/CCWEB_WORKSPACE_TIMEOUT_MS[\s\S]*120000/);
  });

  it('workspace root follows a configured data dir', () => {
    expect(load({ ...REQUIRED, CCWEB_DATA_DIR: '/var/lib/ccweb' }).workspaceRoot).toBe('/var/lib/ccweb/workspaces');
  });

  it('an empty environment variable counts as unset', () => {
    expect(load({ ...REQUIRED, CCWEB_PORT: '', CCWEB_BOT_LOGIN: '' })).toMatchObject({ port: 8080 });
    expect(load({ ...REQUIRED, CCWEB_BOT_LOGIN: '' }).botLogin).toBeUndefined();
  });

  it('reads ccweb.config.json from cwd; the environment wins', () => {
    const file = writeFile('ccweb.config.json', {
      port: 7000,
      host: '::1',
      webhookSecret: ['file-secret-1', 'file-secret-2'],
      giteaUrl: 'http://gitea.local:3000',
      giteaToken: 'file-token',
      adminToken: 'file-admin',
      allowUsers: 'carol,dave',
    });
    const fromFile = load({});
    expect(fromFile).toMatchObject({
      port: 7000,
      host: '::1',
      webhookSecret: ['file-secret-1', 'file-secret-2'],
      giteaUrl: 'http://gitea.local:3000',
      allowUsers: ['carol', 'dave'],
      configFile: file,
    });
    const envWins = load({ CCWEB_PORT: '9000', CCWEB_WEBHOOK_SECRET: 'env-secret' });
    expect(envWins).toMatchObject({ port: 9000, host: '::1', webhookSecret: ['env-secret'], giteaToken: 'file-token' });
  });

  it('--config PATH and --config=PATH select another file', () => {
    writeFile('ccweb.config.json', { port: 1111 });
    const other = writeFile('other.json', { port: 2222 });
    expect(load(REQUIRED, { argv: ['serve', '--config', 'other.json'] })).toMatchObject({ port: 2222, configFile: other });
    expect(load(REQUIRED, { argv: ['--config=other.json'] })).toMatchObject({ port: 2222 });
    expect(load(REQUIRED, { configPath: other })).toMatchObject({ port: 2222 });
    expect(load(REQUIRED)).toMatchObject({ port: 1111 });
  });

  it('a missing explicit config file is an error', () => {
    const e = configError(() => load(REQUIRED, { argv: ['--config', 'nope.json'] }));
    expect(e.message).toContain('nope.json');
    expect(e.message).toContain('ENOENT');
    configError(() => load(REQUIRED, { argv: ['--config'] }));
  });
});

describe('ConfigError', () => {
  it('a bad port names CCWEB_PORT and its file key, and says how to fix it', () => {
    for (const port of ['eighty', '-1', '65536', '80.5']) {
      const e = configError(() => load({ ...REQUIRED, CCWEB_PORT: port }));
      expect(e.message).toContain('CCWEB_PORT');
      expect(e.message).toContain('"port"');
      expect(e.message).toMatch(/0 to 65535/);
      expect(e.message).toMatch(/Set it to/);
      expect(e.problems).toHaveLength(1);
    }
    const fromFile = writeFile('ccweb.config.json', { port: 'eighty' });
    const e = configError(() => load(REQUIRED, { configPath: fromFile }));
    expect(e.message).toContain('CCWEB_PORT');
    expect(e.message).toContain('from the config file');
  });

  it('the HTTP limits: seconds and a connection count, read when set, refused naming the key', () => {
    expect(load({ ...REQUIRED, CCWEB_HTTP_HEADERS_TIMEOUT_SECONDS: '5', CCWEB_HTTP_BODY_TIMEOUT_SECONDS: '60', CCWEB_HTTP_MAX_CONNECTIONS: '1000' })).toMatchObject({
      httpHeadersTimeoutSeconds: 5,
      httpBodyTimeoutSeconds: 60,
      httpMaxConnections: 1000,
    });
    for (const [key, bad, range] of [
      ['CCWEB_HTTP_HEADERS_TIMEOUT_SECONDS', '0', /1 to 600/],
      ['CCWEB_HTTP_BODY_TIMEOUT_SECONDS', '1.5', /1 to 3600/],
      ['CCWEB_HTTP_MAX_CONNECTIONS', 'many', /1 to 100000/],
    ] as const) {
      const e = configError(() => load({ ...REQUIRED, [key]: bad }));
      expect(e.message).toContain(key);
      expect(e.message).toMatch(range);
      expect(e.message).toMatch(/Set it to/);
    }
  });

  it('required keys are named when missing, all at once', () => {
    const e = configError(() => load({}));
    for (const name of ['CCWEB_WEBHOOK_SECRET', 'CCWEB_GITEA_URL', 'CCWEB_GITEA_TOKEN', 'CCWEB_ADMIN_TOKEN']) {
      expect(e.message).toContain(name);
    }
    expect(e.problems).toHaveLength(4);
    const blank = configError(() => load({ ...REQUIRED, CCWEB_WEBHOOK_SECRET: ' , ' }));
    expect(blank.message).toContain('CCWEB_WEBHOOK_SECRET');
  });

  it('unknown keys in the file are an error naming the key (with a hint)', () => {
    writeFile('ccweb.config.json', { webhookSecrets: ['x'], CCWEB_PORT: 1, frobnicate: true });
    const e = configError(() => load(REQUIRED));
    expect(e.message).toContain('"webhookSecrets"');
    expect(e.message).toContain('did you mean "webhookSecret"');
    expect(e.message).toContain('"CCWEB_PORT"');
    expect(e.message).toContain('did you mean "port"');
    expect(e.message).toContain('"frobnicate"');
  });

  it('bad URLs, log levels, paths and logins are named', () => {
    const cases: Array<[Record<string, string>, string]> = [
      [{ CCWEB_GITEA_URL: 'gitea.example.com' }, 'CCWEB_GITEA_URL'],
      [{ CCWEB_GITEA_URL: 'ftp://gitea.example.com' }, 'CCWEB_GITEA_URL'],
      [{ CCWEB_GITEA_URL: `https://bot:${TOKEN}@gitea.example.com` }, 'CCWEB_GITEA_URL'],
      [{ CCWEB_LOG_LEVEL: 'loud' }, 'CCWEB_LOG_LEVEL'],
      [{ CCWEB_WEBHOOK_PATH: 'api/gitea' }, 'CCWEB_WEBHOOK_PATH'],
      [{ CCWEB_MAX_CONCURRENT_TASKS: '0' }, 'CCWEB_MAX_CONCURRENT_TASKS'],
      [{ CCWEB_ALLOW_USERS: 'alice,b/ob' }, 'CCWEB_ALLOW_USERS'],
      [{ CCWEB_BOT_LOGIN: 'bot login' }, 'CCWEB_BOT_LOGIN'],
    ];
    for (const [env, name] of cases) {
      const e = configError(() => load({ ...REQUIRED, ...env }));
      expect(e.message).toContain(name);
      expect(e.message).not.toContain(TOKEN);
    }
  });

  it('never echoes a secret, from the environment or the file', () => {
    // Wrong types/shapes for secret keys in the file.
    writeFile('ccweb.config.json', { webhookSecret: { value: SECRET }, giteaToken: [TOKEN, 5], adminToken: 42 });
    const e = configError(() => load({ CCWEB_GITEA_URL: 'https://gitea.example.com' }));
    expect(e.message).toContain('CCWEB_WEBHOOK_SECRET');
    expect(e.message).toContain('CCWEB_GITEA_TOKEN');
    expect(e.message).toContain('CCWEB_ADMIN_TOKEN');
    for (const secret of [SECRET, TOKEN]) expect(e.message).not.toContain(secret);

    // A syntax error in a file holding secrets: JSON.parse's message would quote the text.
    writeFile('ccweb.config.json', `{"webhookSecret": "${SECRET}", "giteaToken": "${TOKEN}" oops}`);
    const syntax = configError(() => load({}));
    expect(syntax.message).toContain('not valid JSON');
    for (const secret of [SECRET, TOKEN]) expect(syntax.message).not.toContain(secret);

    // Other errors while secrets are set: still not printed.
    const other = configError(() => load({ ...REQUIRED, CCWEB_PORT: 'x' }));
    for (const secret of [SECRET, TOKEN, ADMIN]) expect(other.message).not.toContain(secret);
  });
});

describe('redactConfig', () => {
  it('replaces every secret and keeps the rest', () => {
    const config = load({ ...REQUIRED, CCWEB_WEBHOOK_SECRET: `${SECRET},old` });
    const redacted = redactConfig(config);
    const text = JSON.stringify(redacted);
    for (const secret of [SECRET, 'old', TOKEN, ADMIN]) expect(text).not.toContain(`"${secret}"`);
    expect(text).not.toContain(SECRET);
    expect(redacted.webhookSecret).toEqual(['[redacted]', '[redacted]']);
    expect(redacted.giteaToken).toBe('[redacted]');
    expect(redacted.adminToken).toBe('[redacted]');
    expect(redacted.port).toBe(config.port);
    // The original is untouched.
    expect(config.giteaToken).toBe(TOKEN);
  });
});

describe('bundledCodexCommand', () => {
  it('resolves the @openai/codex bin entry', () => {
    const command = bundledCodexCommand();
    expect(path.isAbsolute(command)).toBe(true);
    expect(command).toMatch(/@openai[\\/]codex[\\/]bin[\\/]codex\.js$/);
  });
});

// A misspelled environment key must not be silently ignored.
describe('unknown CCWEB_* environment variables', () => {
  it('are an error naming the variable, with "did you mean" for a near miss', () => {
    const e = configError(() => load({ ...REQUIRED, CCWEB_PROT: '9000' }));
    expect(e.problems).toEqual(['unknown environment variable CCWEB_PROT: did you mean CCWEB_PORT? Rename it.']);
    const far = configError(() => load({ ...REQUIRED, CCWEB_SOMETHING_ELSE_ENTIRELY: 'x' }));
    expect(far.message).toContain('CCWEB_SOMETHING_ELSE_ENTIRELY');
    expect(far.message).toContain('config-reference');
  });

  it('tooling variables (CCWEB_BUILD_DIR, CCWEB_CHROMIUM, CCWEB_GITEA_FIXTURES, CCWEB_TEST_*) and empty ones are not', () => {
    expect(() => load({ ...REQUIRED, CCWEB_BUILD_DIR: 'dist-test', CCWEB_CHROMIUM: '/usr/bin/chromium', CCWEB_GITEA_FIXTURES: '/x', CCWEB_TEST_SLOW_PROFILE: '30', CCWEB_UNSET: undefined })).not.toThrow();
  });
});
