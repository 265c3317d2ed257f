// Decisions moved out of the composition root (src/service/create-service.ts), tested alone:
// the bot login at start (resolve-bot-login.ts), the readiness log line (dependency-probes.ts),
// and a repository record's Gitea id (src/gitea/current-repository.ts).
import { describe, expect, it } from 'vitest';
import { botLoginDecision } from '../../src/service/resolve-bot-login.js';
import { probeChangeLog } from '../../src/service/dependency-probes.js';
import { giteaRepoIdOf } from '../../src/gitea/current-repository.js';

describe('botLoginDecision', () => {
  it('uses the token login, or the configured one, warning when they are different users', () => {
    expect(botLoginDecision({ ok: true, login: 'giteabot' }, undefined, 1)).toEqual({ kind: 'use', login: 'giteabot' });
    expect(botLoginDecision({ ok: true, login: 'GiteaBot' }, 'giteabot', 1)).toEqual({ kind: 'use', login: 'giteabot' });
    expect(botLoginDecision({ ok: true, login: 'alice' }, 'giteabot', 1)).toEqual({ kind: 'use', login: 'giteabot', warn: 'token_is_another_user' });
  });

  it('starts with the configured login when Gitea does not answer', () => {
    expect(botLoginDecision({ ok: false, reason: 'ECONNREFUSED' }, 'giteabot', 3)).toEqual({ kind: 'use', login: 'giteabot', warn: 'gitea_unreachable' });
  });

  it('without one, retries after 1, 2, 4 … seconds, at most 30', () => {
    const delays = [1, 2, 3, 4, 5, 6, 7, 50].map((attempt) => botLoginDecision({ ok: false, reason: 'x' }, undefined, attempt));
    expect(delays.map((d) => (d.kind === 'retry' ? d.delayMs : null))).toEqual([1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]);
  });
});

describe('probeChangeLog', () => {
  it('logs a dependency that became ready at info, one that is not at warn, with its detail', () => {
    expect(probeChangeLog('gitea', { ok: true, detail: '1.26.3' })).toEqual({ level: 'info', fields: { dependency: 'gitea', ok: true, detail: '1.26.3' }, msg: 'readiness: gitea ok' });
    expect(probeChangeLog('mcp', { ok: false, detail: 'command not found' })).toEqual({ level: 'warn', fields: { dependency: 'mcp', ok: false, detail: 'command not found' }, msg: 'readiness: mcp not ok' });
  });

  it('a dependency not checked yet because the app-server is still starting is said at debug only (every start goes through it)', () => {
    expect(probeChangeLog('codexLogin', { ok: false, detail: 'waiting for the app-server', waiting: true }).level).toBe('debug');
  });
});

describe('giteaRepoIdOf', () => {
  it('is a positive safe integer id, from a number or a numeric string, else null', () => {
    expect(giteaRepoIdOf({ repoId: 7 })).toBe(7);
    expect(giteaRepoIdOf({ repoId: '12' })).toBe(12);
    for (const repoId of [0, -3, 1.5, 'x', null, undefined, 2 ** 60]) expect(giteaRepoIdOf({ repoId })).toBeNull();
  });
});
