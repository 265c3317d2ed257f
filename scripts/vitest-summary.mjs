#!/usr/bin/env node
// CI's closing lines: one `vitest: N passed, N failed, N skipped (<label>)` per test run, read from
// vitest's JSON reports, then the total over all runs as the very last line (what CI's log readers
// take as the result). Before them, one line counting the tests tagged `[real gitea-mcp]` in their
// describe or test title (those that run the official gitea-mcp binary), over all reports, each test
// once even when several runs ran it:
//   real gitea-mcp: N tests in M files (test/a.test.ts, test/b.test.ts)
//
//   node scripts/vitest-summary.mjs "node 20=test-artifacts/a.json" "node 24=test-artifacts/b.json"
//
// A run without a readable report (vitest crashed, or never started) counts as one failed test, so
// the total can never look clean when a run is missing.
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';

const REAL_MCP_TAG = '[real gitea-mcp]';

const runs = process.argv.slice(2).map((arg) => {
  const at = arg.indexOf('=');
  if (at <= 0) {
    process.stderr.write(`vitest-summary: "${arg}" is not <label>=<report.json>\n`);
    process.exit(2);
  }
  return { label: arg.slice(0, at), file: arg.slice(at + 1) };
});

/** `file → Set(full test names)` of the tagged tests in a vitest JSON report (nothing if unreadable). */
function taggedTests(report, into) {
  for (const f of Array.isArray(report?.testResults) ? report.testResults : []) {
    const name = typeof f?.name === 'string' ? relative(process.cwd(), f.name) || f.name : '?';
    for (const a of Array.isArray(f?.assertionResults) ? f.assertionResults : []) {
      const full = typeof a?.fullName === 'string' ? a.fullName : [...(a?.ancestorTitles ?? []), a?.title ?? ''].join(' ');
      if (!full.includes(REAL_MCP_TAG)) continue;
      if (!into.has(name)) into.set(name, new Set());
      into.get(name).add(full);
    }
  }
}

const reports = runs.map(({ file }) => {
  try {
    return JSON.parse(readFileSync(file, 'utf8'));
  } catch {
    return null;
  }
});
const tagged = new Map();
for (const r of reports) taggedTests(r, tagged);
const files = [...tagged.keys()].sort();
const taggedCount = files.reduce((n, f) => n + tagged.get(f).size, 0);
console.log(`real gitea-mcp: ${taggedCount} tests in ${files.length} files${files.length ? ` (${files.join(', ')})` : ''}`);

const line = (c) => `vitest: ${c.passed} passed, ${c.failed} failed, ${c.skipped} skipped`;
const total = { passed: 0, failed: 0, skipped: 0 };
for (const { label, file } of runs) {
  let counts;
  try {
    const r = JSON.parse(readFileSync(file, 'utf8'));
    counts = { passed: r.numPassedTests, failed: r.numFailedTests, skipped: r.numPendingTests + r.numTodoTests };
    if (!Object.values(counts).every(Number.isInteger)) throw new Error('not a vitest JSON report');
  } catch (err) {
    console.log(`vitest: no report from ${label} (${file}: ${err instanceof Error ? err.message : err}); counted as 1 failed`);
    counts = { passed: 0, failed: 1, skipped: 0 };
  }
  console.log(`${line(counts)} (${label})`);
  for (const k of Object.keys(total)) total[k] += counts[k];
}
console.log(line(total));
