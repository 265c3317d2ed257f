// Secret scan: looks through everything the service leaves on disk — the data directory
// (store journal and checkpoints), workspaces (including `.git/config` and packed refs), captured
// logs and CODEX_HOME (Codex's own session logs record whatever the agent saw) — for the Gitea token,
// the webhook secret and the admin token. Besides the raw bytes it looks for the base64 forms a
// secret takes inside an HTTP Basic/extraheader credential (`user:token`), at all three alignments.
//
// Used by the abuse and chaos tests, and by hand:
//   CCWEB_GITEA_TOKEN=… CCWEB_WEBHOOK_SECRET=… CCWEB_ADMIN_TOKEN=… npx tsx scripts/secret-scan.ts <dir|file>…
// Prints what it scanned and the secret NAMES it found (never a value); exits 1 on a finding.
import { lstatSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface SecretFinding {
  file: string;
  /** The secret's name (`giteaToken`, …), never its value. */
  secret: string;
  /** `raw` or `base64`. */
  form: string;
  offset: number;
}

export interface SecretScanResult {
  roots: string[];
  files: number;
  bytes: number;
  findings: SecretFinding[];
}

/** The byte patterns that reveal `secret`: itself, and its base64 core at each of the 3 alignments. */
export function secretPatterns(secret: string): Array<{ form: string; bytes: Buffer }> {
  const raw = Buffer.from(secret, 'utf8');
  const out = [{ form: 'raw', bytes: raw }];
  for (let shift = 0; shift < 3; shift++) {
    const encoded = Buffer.concat([Buffer.alloc(shift), raw]).toString('base64');
    // Characters touched by the padding bytes or by whatever follows the secret vary: drop them.
    const start = Math.ceil((shift * 4) / 3);
    const core = encoded.slice(start, encoded.length - 4);
    if (core.length >= 12) out.push({ form: 'base64', bytes: Buffer.from(core, 'ascii') });
  }
  return out;
}

function* walk(path: string): Generator<string> {
  let st;
  try {
    st = lstatSync(path);
  } catch {
    return;
  }
  // Symlinks are not followed: a workspace could point anywhere on the machine.
  if (st.isSymbolicLink()) return;
  if (st.isFile()) {
    yield path;
    return;
  }
  if (!st.isDirectory()) return;
  for (const name of readdirSync(path).sort()) yield* walk(join(path, name));
}

/** Scans every regular file under `roots` for every secret (secrets shorter than 8 characters are refused). */
export function scanForSecrets(roots: readonly string[], secrets: Readonly<Record<string, string>>): SecretScanResult {
  const patterns: Array<{ secret: string; form: string; bytes: Buffer }> = [];
  for (const [name, value] of Object.entries(secrets)) {
    if (value.length < 8) throw new Error(`secret ${name} is too short to scan for meaningfully`);
    for (const p of secretPatterns(value)) patterns.push({ secret: name, ...p });
  }
  const result: SecretScanResult = { roots: roots.map((r) => resolve(r)), files: 0, bytes: 0, findings: [] };
  const seen = new Set<string>();
  for (const root of result.roots) {
    for (const file of walk(root)) {
      if (seen.has(file)) continue;
      seen.add(file);
      let data: Buffer;
      try {
        data = readFileSync(file);
      } catch {
        continue; // vanished (a process still running) or unreadable
      }
      result.files += 1;
      result.bytes += data.length;
      for (const p of patterns) {
        const offset = data.indexOf(p.bytes);
        if (offset >= 0) result.findings.push({ file, secret: p.secret, form: p.form, offset });
      }
    }
  }
  return result;
}

export function formatScan(result: SecretScanResult): string {
  const lines = [
    `secret scan: ${result.files} files, ${(result.bytes / 2 ** 20).toFixed(2)} MiB under ${result.roots.length} roots`,
    ...result.roots.map((r) => `  scanned ${r}`),
  ];
  if (result.findings.length === 0) lines.push('  no secret found');
  for (const f of result.findings) lines.push(`  FOUND ${f.secret} (${f.form}) in ${f.file} at byte ${f.offset}`);
  return lines.join('\n');
}

function main(): void {
  const env = process.env;
  const secrets: Record<string, string> = {};
  if (env['CCWEB_GITEA_TOKEN']) secrets['giteaToken'] = env['CCWEB_GITEA_TOKEN'];
  if (env['CCWEB_WEBHOOK_SECRET']) {
    env['CCWEB_WEBHOOK_SECRET'].split(',').forEach((s, i) => s.trim() && (secrets[`webhookSecret${i || ''}`] = s.trim()));
  }
  if (env['CCWEB_ADMIN_TOKEN']) secrets['adminToken'] = env['CCWEB_ADMIN_TOKEN'];
  const roots = process.argv.slice(2);
  if (roots.length === 0) {
    if (env['CCWEB_DATA_DIR']) roots.push(env['CCWEB_DATA_DIR']);
    if (env['CODEX_HOME']) roots.push(env['CODEX_HOME']);
  }
  if (Object.keys(secrets).length === 0 || roots.length === 0) {
    process.stderr.write('usage: CCWEB_GITEA_TOKEN=… CCWEB_WEBHOOK_SECRET=… CCWEB_ADMIN_TOKEN=… tsx scripts/secret-scan.ts <dir|file>…\n');
    process.exit(2);
  }
  const result = scanForSecrets(roots, secrets);
  process.stdout.write(`${formatScan(result)}\n`);
  process.exit(result.findings.length === 0 ? 0 : 1);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main();
