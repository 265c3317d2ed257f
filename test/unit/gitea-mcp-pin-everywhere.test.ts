// One gitea-mcp version everywhere: the guide, the README, the configuration reference, the
// doctor's warning, the install script, the image and the compose file all name the revision pinned in
// src/config/gitea-mcp-pin.json, or none. A second version named anywhere (a `go install …@v1.1.0` left
// in a doc) is what sent an operator to install another gitea-mcp than the one the service is tested with.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import PIN from '../../src/config/gitea-mcp-pin.json' with { type: 'json' };

const root = join(import.meta.dirname, '..', '..');

function files(dir: string, keep: (p: string) => boolean): string[] {
  const out: string[] = [];
  for (const name of readdirSync(join(root, dir))) {
    const rel = join(dir, name);
    if (statSync(join(root, rel)).isDirectory()) out.push(...files(rel, keep));
    else if (keep(rel)) out.push(rel);
  }
  return out;
}

/** Every file an operator or the build reads: docs, sources, scripts, the deployment files. */
const SCANNED = [
  'README.md',
  'Dockerfile',
  'compose.yaml',
  '.ci/run',
  ...files('docs', (p) => p.endsWith('.md')),
  ...files('src', (p) => /\.(ts|json)$/.test(p)),
  ...files('scripts', (p) => /\.(mjs|ts|sh)$/.test(p)),
  ...files('deploy', (p) => !p.endsWith('.tar.gz')),
];

/** Each way a text can name a gitea-mcp version or revision, with the part that names it. */
const NAMINGS: RegExp[] = [
  /gitea-mcp@(v?[\w.-]+)/g, // go install …/gitea-mcp@<version>
  /gitea-mcp-src-([0-9a-f]+)\.tar\.gz/g, // the source archive's name
  /\b0\.0\.0-([0-9a-f]{7,40})\b/g, // the version a build from a revision reports
  /gitea-mcp\W{1,3}(?:version\s+|revision\s+|at revision\s+)?`?(v?\d+\.\d+\.\d+[\w.-]*|[0-9a-f]{12})\b/gi, // "gitea-mcp 1.2.3", "gitea-mcp (`a5dd…`"
  /\b(?:revision|pinned to|reporting)\s+`?([0-9a-f]{12})\b/g, // "at revision a5dd…", "pinned to `a5dd…`"
];

function namedVersions(text: string): string[] {
  const found: string[] = [];
  // One naming may match two patterns (`gitea-mcp@v1.1.0`): count each spot once.
  const at = new Map<number, string>();
  for (const re of NAMINGS) for (const m of text.matchAll(re)) at.set(m.index + m[0].lastIndexOf(m[1]!), m[1]!);
  for (const v of at.values()) found.push(v);
  return found;
}

const accepted = new Set([PIN.revision, PIN.version, `v${PIN.version}`, '<revision>', '<version>']);

describe('the pinned gitea-mcp', () => {
  it('finds the namings it looks for (the scan is not blind)', () => {
    expect(namedVersions('go install gitea.com/gitea/gitea-mcp@v1.1.0')).toEqual(['v1.1.0']);
    expect(namedVersions('/usr/local/bin/gitea-mcp 0.0.0-a5dd03c7f0d8 behind the gate')).toContain('a5dd03c7f0d8');
    expect(namedVersions('gitea-mcp-src-0123456789ab.tar.gz')).toEqual(['0123456789ab']);
    expect(namedVersions('the gitea-mcp v1.2.0 binary')).toEqual(['v1.2.0']);
  });

  it('every file that names a gitea-mcp version names the pinned one', () => {
    const stray: string[] = [];
    let named = 0;
    for (const file of SCANNED) {
      let text: string;
      try {
        text = readFileSync(join(root, file), 'utf8');
      } catch {
        continue; // compose.yaml etc. may be absent on an older checkout; the list names what exists
      }
      for (const v of namedVersions(text)) {
        named++;
        if (!accepted.has(v) && !v.startsWith('$')) stray.push(`${relative(root, join(root, file))}: ${v}`);
      }
    }
    expect(stray).toEqual([]);
    expect(named).toBeGreaterThan(5); // the guide, the README, keys.ts and the pin itself do name it
  });
});
