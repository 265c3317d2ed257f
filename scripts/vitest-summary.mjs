#!/usr/bin/env node
// CI's closing lines: one `vitest: N passed, N failed, N skipped (<label>)` per test run, read from
// vitest's JSON reports, then the total over all runs as the very last line (what CI's log readers
// take as the result).
//
//   node scripts/vitest-summary.mjs "node 20=test-artifacts/a.json" "node 24=test-artifacts/b.json"
//
// A run without a readable report (vitest crashed, or never started) counts as one failed test, so
// the total can never look clean when a run is missing.
import { readFileSync } from 'node:fs';

const runs = process.argv.slice(2).map((arg) => {
  const at = arg.indexOf('=');
  if (at <= 0) {
    process.stderr.write(`vitest-summary: "${arg}" is not <label>=<report.json>\n`);
    process.exit(2);
  }
  return { label: arg.slice(0, at), file: arg.slice(at + 1) };
});

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
