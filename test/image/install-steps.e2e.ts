// docs/operations.md's install steps, as written, on a fresh Debian 12 (`npm run test:install`,
// not part of `npm test`): a root filesystem from Debian's packages (debootstrap, cached by
// scripts/test-image/bases.sh), entered with bubblewrap as root (not chroot: the kernel refuses user
// namespaces to a chrooted process, and the agent's sandbox needs them), the guide's blocks run in order,
// ending with the guide's own `doctor` as the service user against a throwaway real Gitea: no check fails.
//
// Replaced, each for the reason given: `install-step=go` (go.dev is not reachable from these machines:
// this machine's /usr/local/go is copied in instead), `install-step=login` (a Codex login needs a person and
// an account: CODEX_HOME gets the scripted model's config.toml instead, as every e2e test does),
// `install-step=systemd` (no systemd runs in the root filesystem; the unit is checked by
// test/unit/deploy-systemd.test.ts). The repository is cloned from this checkout's HEAD (REPO_URL): commit before running it.
import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installStepsOf } from '../../scripts/test-install/install-steps.js';
import { startSeededGitea, SERVICE_BOT_PERMISSION, type SeededGitea } from '../support/real-gitea/seed.js';
import { startScriptedModel, writeCodexHome, type ScriptedModel } from '../../src/demo/scripted-model.js';

const repo = join(import.meta.dirname, '..', '..');
const base = join(process.env['XDG_CACHE_HOME'] || join(homedir(), '.cache'), 'ccweb-gitea', 'image-base', 'bookworm-minbase.tar');
const root = mkdtempSync(join(tmpdir(), 'ccweb-install-e2e-'));
const rootfs = join(root, 'rootfs');
let gitea: SeededGitea;
let model: ScriptedModel;

beforeAll(async () => {
  if (!existsSync(base)) throw new Error(`no Debian root filesystem at ${base}: run \`bash scripts/test-image/bases.sh\` (npm run test:install does)`);
  mkdirSync(rootfs);
  execFileSync('tar', ['-C', rootfs, '-xf', base]);
  // `/` as on any Debian (tar restores the tarball's own top folder, made by mktemp with mode 0700).
  chmodSync(rootfs, 0o755);
  // This machine's trust and name resolution (an intercepting proxy's CA where there is one): environment, not steps.
  if (existsSync('/usr/local/share/ca-certificates')) cpSync('/usr/local/share/ca-certificates', join(rootfs, 'usr/local/share/ca-certificates'), { recursive: true });
  cpSync('/etc/ssl/certs/ca-certificates.crt', join(rootfs, 'etc/ssl/certs/ca-certificates.crt'));
  cpSync('/etc/resolv.conf', join(rootfs, 'etc/resolv.conf'), { dereference: true });
  // This checkout's HEAD as the repository the guide clones (a worktree's .git points outside the folder).
  execFileSync('git', ['clone', '--quiet', '--bare', repo, join(root, 'src.git')]);
  gitea = await startSeededGitea({ root: join(root, 'gitea'), botPermission: SERVICE_BOT_PERMISSION });
  model = await startScriptedModel();
  writeCodexHome(join(root, 'codex-config'), { port: model.port, model: 'fake-model' });
}, 600_000);

afterAll(async () => {
  await model?.close();
  await gitea?.close();
  rmSync(root, { recursive: true, force: true });
});

describe("docs/operations.md's install steps on a fresh Debian 12 [real gitea-mcp]", () => {
  it('run as written, end with doctor green against a real Gitea', async () => {
    const steps = installStepsOf(join(repo, 'docs', 'operations.md'));
    expect(steps.map((s) => s.name).filter(Boolean).sort()).toEqual(['go', 'login', 'systemd']);
    const replaced: Record<string, string> = {
      go: 'rm -rf /usr/local/go && cp -a /host/go /usr/local/go',
      login: 'install -o ccweb -g ccweb -m 0600 /host/codex-config/config.toml /var/lib/ccweb-gitea/codex/config.toml',
      systemd: 'test -f /etc/systemd/system/ccweb-gitea.service',
    };
    const script = [
      'set -euo pipefail',
      ...steps.map((s) => `echo "== install-step at docs/operations.md:${s.line}${s.name ? ` (${s.name}: replaced)` : ''}"\n${s.name ? replaced[s.name] : s.script}`),
    ].join('\n');
    writeFileSync(join(root, 'steps.sh'), script);
    const archive = process.env['CCWEB_GITEA_MCP_SOURCE'];
    const args = [
      '--bind', rootfs, '/', '--dev', '/dev', '--proc', '/proc', '--ro-bind', '/sys', '/sys',
      '--ro-bind', '/usr/local/go', '/host/go', '--ro-bind', join(root, 'src.git'), '/host/src.git',
      '--ro-bind', join(root, 'codex-config'), '/host/codex-config', '--ro-bind', join(root, 'steps.sh'), '/host/steps.sh',
      ...(archive ? ['--ro-bind', archive, '/host/gitea-mcp-src.tar.gz'] : []),
      '--unshare-pid', '--die-with-parent', '--cap-add', 'ALL',
      '/usr/bin/env', '-i', 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', 'HOME=/root', 'LANG=C.UTF-8',
      'DEBIAN_FRONTEND=noninteractive',
      // This machine's trust again (see above): node's own CA list does not hold an intercepting proxy's CA.
      'NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt',
      `GITEA_URL=${gitea.url}`, `BOT_TOKEN=${gitea.users.bot.token}`, 'REPO_URL=/host/src.git',
      ...(archive ? ['CCWEB_GITEA_MCP_SOURCE=/host/gitea-mcp-src.tar.gz'] : []),
      '/bin/bash', '/host/steps.sh',
    ];
    const out = await new Promise<{ code: number | null; text: string }>((resolve) => {
      const child = spawn('bwrap', args, { stdio: ['ignore', 'pipe', 'pipe'] });
      let text = '';
      child.stdout.on('data', (d: Buffer) => (text += d.toString()));
      child.stderr.on('data', (d: Buffer) => (text += d.toString()));
      child.on('error', (err) => resolve({ code: -1, text: `${text}\nbwrap did not start: ${err.message} (apt-get install bubblewrap)` }));
      child.on('close', (code) => resolve({ code, text }));
    });
    writeFileSync(join(tmpdir(), 'ccweb-install-steps.log'), out.text);
    const doctor = out.text.split('\n').filter((l) => /^(ok|warn|fail|skip)\s{2,}/.test(l));
    expect(out.code, out.text.slice(-4000)).toBe(0);
    expect(doctor.filter((l) => l.startsWith('fail')), out.text.slice(-4000)).toEqual([]);
    for (const check of ['config', 'codex', 'codex-account', 'agent-isolation', 'gitea-mcp', 'gitea', 'data-dir']) {
      expect(doctor.some((l) => new RegExp(`^ok\\s+${check}\\s`).test(l)), `${check} ok`).toBe(true);
    }
  }, 1_800_000);
});
