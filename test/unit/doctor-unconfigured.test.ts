// `doctor` before anything is configured (issue 32): it says what to configure first and blames nothing
// else — it used to report the bundled Codex as broken ("app-server exited (code 1) → reinstall").
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runDoctor } from '../../src/cli/doctor.js';

const home = mkdtempSync(join(tmpdir(), 'ccweb-doctor-fresh-'));
afterAll(() => rmSync(home, { recursive: true, force: true }));

describe('doctor on a fresh machine', () => {
  it('without configuration: names the keys to set, fails nothing but config, skips codex', async () => {
    const results = await runDoctor({ env: { PATH: process.env.PATH, HOME: home }, cwd: home });
    const failed = results.filter((r) => r.status === 'fail');
    expect(new Set(failed.map((r) => r.check))).toEqual(new Set(['config']));
    for (const key of ['CCWEB_GITEA_URL', 'CCWEB_GITEA_TOKEN', 'CCWEB_WEBHOOK_SECRET', 'CCWEB_ADMIN_TOKEN']) {
      expect(failed.map((r) => r.detail).join('\n')).toContain(key);
    }
    for (const check of ['codex', 'codex-account']) {
      const r = results.find((x) => x.check === check)!;
      expect(r.status).toBe('skip');
      expect(r.fix).toMatch(/configure first/);
    }
    expect(results.map((r) => r.check)[0]).toBe('config'); // the first thing it says
  });

  it('configured but CODEX_HOME missing: the codex check names the folder, not the binary', async () => {
    const codexHome = join(home, 'no-such-codex-home');
    const results = await runDoctor({
      env: {
        PATH: process.env.PATH,
        HOME: home,
        CODEX_HOME: codexHome,
        CCWEB_GITEA_URL: 'http://127.0.0.1:9',
        CCWEB_GITEA_TOKEN: 'a-token-of-some-length-0001',
        CCWEB_WEBHOOK_SECRET: 'a-webhook-secret-of-length-0002',
        CCWEB_ADMIN_TOKEN: 'an-admin-token-of-length-0003',
        CCWEB_DATA_DIR: join(home, 'data'),
      },
      cwd: home,
      skip: new Set(['codex-account', 'agent-isolation', 'gitea-mcp', 'gitea', 'token-scope', 'token-scopes']),
    });
    const codex = results.find((r) => r.check === 'codex')!;
    expect(codex.status).toBe('fail');
    expect(codex.detail).toBe(`CODEX_HOME ${codexHome} does not exist`);
    expect(codex.fix).toContain(`mkdir -m 700 ${codexHome}`);
  });
});
