// Built app-server messages validated against the JSON Schema generated from the bundled binary
// (src/codex/protocol/schema, `npm run gen:codex-protocol`).
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import {
  giteaMcpServerConfig,
  plainTurnStartParams,
  threadResumeParams,
  threadStartParams,
  turnInterruptParams,
  turnStartParams,
} from '../../src/codex/thread-params.js';
import { appServerEnv, SECRET_ENV_VARS } from '../../src/codex/jsonrpc-connection.js';

// ajv is a dependency of @modelcontextprotocol/sdk (not a direct one of ours).
const require = createRequire(import.meta.url);
const AjvCtor = require('ajv').default as new (opts: Record<string, unknown>) => {
  addSchema(s: unknown, key: string): void;
  getSchema(ref: string): ((data: unknown) => boolean) & { errors?: unknown };
};
const bundle = JSON.parse(readFileSync(new URL('../../src/codex/protocol/schema/codex_app_server_protocol.schemas.json', import.meta.url), 'utf8'));
const ajv = new AjvCtor({ strict: false, allErrors: true, validateFormats: false });
ajv.addSchema(bundle, 'codex');
const clientRequest = ajv.getSchema('codex#/definitions/ClientRequest');
const v2 = (name: string) => ajv.getSchema(`codex#/definitions/v2/${name}`);

function expectValid(validate: ReturnType<typeof ajv.getSchema>, data: unknown) {
  const ok = validate(data);
  if (!ok) console.error(JSON.stringify(validate.errors, null, 2).slice(0, 3000));
  expect(ok).toBe(true);
}

const giteaMcp = { command: '/usr/local/bin/gitea-mcp', giteaUrl: 'https://gitea.example', token: 'tok-1', startupTimeoutSec: 15 };

describe('codex thread/turn params', () => {
  it('thread/start: cwd, never, danger-full-access, required gitea MCP with token in its env', () => {
    const p = threadStartParams({ cwd: '/ws/acme/widget', giteaMcp });
    expect(p).toEqual({
      cwd: '/ws/acme/widget',
      approvalPolicy: 'never',
      sandbox: 'danger-full-access',
      config: {
        mcp_servers: {
          gitea: {
            command: '/usr/local/bin/gitea-mcp',
            args: ['-t', 'stdio', '-host', 'https://gitea.example'],
            env: { GITEA_ACCESS_TOKEN: 'tok-1', GITEA_HOST: 'https://gitea.example' },
            required: true,
            startup_timeout_sec: 15,
            default_tools_approval_mode: 'approve',
          },
        },
      },
    });
    expectValid(clientRequest, { id: 1, method: 'thread/start', params: p });
    expectValid(v2('ThreadStartParams'), p);
  });

  it('thread/start|resume with the agent sandbox: the named profile instead of `sandbox`, its config merged', () => {
    const sandbox = { permissions: 'ccweb-agent', config: { permissions: { 'ccweb-agent': { filesystem: { ':root': 'read' } } } } };
    for (const p of [threadStartParams({ cwd: '/ws', giteaMcp, sandbox }), threadResumeParams({ threadId: 'thr-1', cwd: '/ws', giteaMcp, sandbox })]) {
      expect(p.permissions).toBe('ccweb-agent');
      expect('sandbox' in p).toBe(false); // Codex refuses both at once
      expect(p.config).toMatchObject({ permissions: sandbox.config.permissions, mcp_servers: { gitea: { default_tools_approval_mode: 'approve' } } });
    }
    expectValid(v2('ThreadStartParams'), threadStartParams({ cwd: '/ws', giteaMcp, sandbox }));
    expectValid(v2('ThreadResumeParams'), threadResumeParams({ threadId: 'thr-1', cwd: '/ws', giteaMcp, sandbox }));
  });

  it('thread/resume resends the same config', () => {
    const p = threadResumeParams({ threadId: 'thr-1', cwd: '/ws', giteaMcp });
    expect(p.threadId).toBe('thr-1');
    expect(p.config).toEqual(threadStartParams({ cwd: '/ws', giteaMcp }).config);
    expectValid(clientRequest, { id: 'r-2', method: 'thread/resume', params: p });
  });

  it('extra MCP env cannot override the token/host', () => {
    const c = giteaMcpServerConfig({ ...giteaMcp, extraEnv: { GITEA_ACCESS_TOKEN: 'evil', CCWEB_TASK: 't1' } });
    expect(c.env).toEqual({ CCWEB_TASK: 't1', GITEA_ACCESS_TOKEN: 'tok-1', GITEA_HOST: 'https://gitea.example' });
  });

  it('turn/start: collaborationMode default with settings, no top-level model/effort', () => {
    const p = turnStartParams({ threadId: 'thr-1', text: 'fix it', model: 'gpt-x', reasoningEffort: 'high', developerInstructions: 'rules' });
    expect(p).toEqual({
      threadId: 'thr-1',
      input: [{ type: 'text', text: 'fix it', text_elements: [] }],
      collaborationMode: { mode: 'default', settings: { model: 'gpt-x', reasoning_effort: 'high', developer_instructions: 'rules' } },
    });
    expect('model' in p).toBe(false);
    expect('effort' in p).toBe(false);
    expectValid(clientRequest, { id: 3, method: 'turn/start', params: p });
    expectValid(v2('TurnStartParams'), p);
  });

  it('plain turn fallback carries model/effort at top level and validates', () => {
    const p = plainTurnStartParams({ threadId: 'thr-1', text: 'x', model: 'gpt-x', reasoningEffort: 'low' });
    expect(p).toMatchObject({ model: 'gpt-x', effort: 'low' });
    expect(p.collaborationMode).toBeUndefined();
    expectValid(clientRequest, { id: 4, method: 'turn/start', params: p });
    const withInstr = threadStartParams({ cwd: '/ws', giteaMcp, developerInstructions: 'rules' });
    expect(withInstr.developerInstructions).toBe('rules');
    expectValid(clientRequest, { id: 5, method: 'thread/start', params: withInstr });
  });

  it('start-up chain messages and interrupt validate', () => {
    expectValid(clientRequest, {
      id: 1,
      method: 'initialize',
      params: { clientInfo: { name: 'ccweb-gitea', title: null, version: '0.1.0' }, capabilities: { experimentalApi: true, requestAttestation: false } },
    });
    expectValid(clientRequest, { id: 2, method: 'experimentalFeature/enablement/set', params: { enablement: { goals: true } } });
    expectValid(clientRequest, { id: 3, method: 'collaborationMode/list', params: {} });
    expectValid(clientRequest, { id: 4, method: 'config/read', params: {} });
    expectValid(clientRequest, { id: 5, method: 'turn/interrupt', params: turnInterruptParams('thr', 'turn') });
    // The schema does catch mistakes.
    expect(clientRequest({ id: 6, method: 'thread/start', params: { sandbox: 'yolo' } })).toBe(false);
  });

  it('the app-server env drops secrets', () => {
    const env = appServerEnv({ PATH: '/bin', CCWEB_GITEA_TOKEN: 'a', CCWEB_WEBHOOK_SECRET: 'b', CCWEB_ADMIN_TOKEN: 'c', GITEA_ACCESS_TOKEN: 'd', GITEA_TOKEN: 'e' }, { CODEX_HOME: '/h', GITEA_TOKEN: 'x' });
    expect(env).toEqual({ PATH: '/bin', CODEX_HOME: '/h' });
    expect(SECRET_ENV_VARS).toHaveLength(5);
  });
});
