#!/usr/bin/env node
// Mutation testing with StrykerJS and its vitest runner, one run per folder so each folder is
// mutated against only the tests that cover it (the fast unit/model tests, never e2e or chaos).
//
//   npm run test:mutation                 all five folders (long: see docs/testing.md)
//   npm run test:mutation -- machines     one or more folders by name
//   npm run test:mutation -- machines --incremental
//                                         Stryker's incremental mode against the checked-in result of
//                                         the last full run (test/mutation/incremental/<folder>.json):
//                                         only mutants whose code or tests changed run again (a mutant
//                                         that survived runs again when a test was added), the rest keep
//                                         their result; the file is rewritten. What CI runs (.ci/run).
//   … --incremental --force               run every mutant and rewrite the file (a full run)
//
// Prints the mutation score per folder; exits non-zero when a folder is under its threshold or a
// surviving mutant is not listed with a reason in test/mutation/survivors.json. Reports (HTML and
// JSON, per folder) go to test-artifacts/mutation/. MUTATION_CONCURRENCY (default 2) sets Stryker's
// worker count: the machines this runs on have two shared cores.
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { relative } from 'node:path';
import { Stryker } from '@stryker-mutator/core';
import { mutantKeys } from './mutant-key.mjs';

const FOLDERS = {
  machines: {
    mutate: ['machines/**/*.ts'],
    // Not test/model/machines.model.test.ts: every machine mutant is "static" (the machine is built
    // at import), so Stryker runs the whole set once per mutant, and that file's durable runtime
    // replay (≈ 15 s) would make a run take hours on two shared cores. The oracle comparison below
    // checks the same (state, event) → state relation purely, in well under a second.
    tests: [
      'test/model/machines.oracle.test.ts',
      'test/unit/machines-*.test.ts',
      'test/unit/app-server-machine.test.ts',
      'test/unit/task-lifecycle-table.test.ts',
    ],
  },
  executor: {
    mutate: ['src/executor/**/*.ts'],
    tests: ['test/unit/executor-*.test.ts'],
  },
  verification: {
    mutate: ['src/verification/**/*.ts'],
    // bot-comments.test.ts: the only test of reply-exists.ts (restart recovery's replyExists).
    tests: [
      'test/unit/verification-*.test.ts',
      'test/integration/verification.test.ts',
      'test/integration/verification-failure-paths.test.ts',
      'test/integration/verification-rest-double.test.ts',
      'test/integration/bot-comments.test.ts',
    ],
  },
  scheduler: {
    mutate: ['src/scheduler/**/*.ts'],
    // scheduler-recover.test.ts (in the unit glob) covers recover.ts in-process; scheduler-restart.test.ts
    // (SIGKILLed child processes) and scheduler-load.test.ts are too slow to rerun for every static mutant.
    tests: ['test/unit/scheduler-*.test.ts', 'test/integration/scheduler-leases.test.ts'],
  },
  webhook: {
    // The webhook's Koa route lives in intake/ (no folder cycle) and is mutated with
    // the rest of the webhook path, against the same tests (intake-http.test.ts covers it).
    mutate: ['src/webhook/**/*.ts', 'src/intake/webhook-route.ts'],
    tests: ['test/unit/webhook-*.test.ts', 'test/unit/intake-*.test.ts', 'test/integration/intake.test.ts'],
  },
};
const THRESHOLD = 80;
const SURVIVORS_FILE = 'test/mutation/survivors.json';

const flags = process.argv.slice(2).filter((a) => a.startsWith('-'));
const badFlags = flags.filter((f) => f !== '--incremental' && f !== '--force');
if (badFlags.length) {
  console.error(`unknown option(s): ${badFlags.join(', ')} — options: --incremental, --force`);
  process.exit(2);
}
const incremental = flags.includes('--incremental');
const force = flags.includes('--force');
if (force && !incremental) {
  console.error('--force goes with --incremental (without it every run is a full run)');
  process.exit(2);
}
const requested = process.argv.slice(2).filter((a) => !a.startsWith('-'));
const unknown = requested.filter((f) => !(f in FOLDERS));
if (unknown.length) {
  console.error(`unknown folder(s): ${unknown.join(', ')} — choose from ${Object.keys(FOLDERS).join(', ')}`);
  process.exit(2);
}
const folders = requested.length ? requested : Object.keys(FOLDERS);
const concurrency = Number(process.env.MUTATION_CONCURRENCY ?? 2);
const { _about, ...listed } = JSON.parse(readFileSync(SURVIVORS_FILE, 'utf8'));


const rows = [];
let failed = false;
for (const folder of folders) {
  const { mutate, tests } = FOLDERS[folder];
  process.env.MUTATION_TESTS = tests.join(',');
  mkdirSync('test-artifacts/mutation', { recursive: true });
  const started = Date.now();
  const stryker = new Stryker({
    testRunner: 'vitest',
    plugins: ['@stryker-mutator/vitest-runner', './test/mutation/ignore-test-support.mjs'],
    ignorers: ['ccweb-test-support'],
    vitest: { configFile: 'vitest.mutation.config.ts', related: false },
    mutate,
    coverageAnalysis: 'perTest',
    concurrency,
    timeoutMS: 30_000,
    reporters: ['clear-text', 'html', 'json', 'progress-append-only'],
    htmlReporter: { fileName: `test-artifacts/mutation/${folder}.html` },
    jsonReporter: { fileName: `test-artifacts/mutation/${folder}.json` },
    clearTextReporter: { reportTests: false, reportMutants: false, reportScoreTable: true },
    tempDirName: `.stryker-tmp/${folder}`,
    // Never copy another run's sandbox (runs of two folders may overlap) or build/test output.
    ignorePatterns: ['/.stryker-tmp', '/test-artifacts', '/dist', '/dist-test', '/data', '/.tools'],
    cleanTempDir: true,
    incremental,
    incrementalFile: `test/mutation/incremental/${folder}.json`,
    force,
    thresholds: { high: 90, low: THRESHOLD, break: null },
  });
  let results;
  try {
    results = await stryker.runMutationTest();
  } catch (err) {
    // Most often: a test fails without any mutant (Stryker's dry run); the suite says which.
    console.error(`\n${folder}: Stryker could not run: ${err instanceof Error ? err.message : String(err)}`);
    rows.push({ folder, mutants: 0, detected: 0, undetected: 0, score: 0, unlisted: 0, stale: 0, minutes: (Date.now() - started) / 60_000 });
    failed = true;
    continue;
  }
  const count = (...s) => results.filter((r) => s.includes(r.status)).length;
  const detected = count('Killed', 'Timeout');
  const undetected = count('Survived', 'NoCoverage');
  const score = detected + undetected === 0 ? 100 : (100 * detected) / (detected + undetected);
  const survivors = results.filter((r) => r.status === 'Survived' || r.status === 'NoCoverage');
  const keys = mutantKeys(results);
  const mutantKey = (m) => keys.get(m);
  const unlisted = survivors.filter((m) => !listed[mutantKey(m)]);
  // Entries for this folder's files that match no survivor any more (killed, or the line was edited).
  const files = new Set(results.map((m) => relative(process.cwd(), m.fileName)));
  const surviving = new Set(survivors.map(mutantKey));
  const stale = Object.keys(listed).filter((k) => files.has(k.slice(0, k.indexOf(' '))) && !surviving.has(k));
  rows.push({ folder, mutants: results.length, detected, undetected, score, unlisted: unlisted.length, stale: stale.length, minutes: (Date.now() - started) / 60_000 });
  writeFileSync(
    `test-artifacts/mutation/${folder}-survivors.json`,
    JSON.stringify(Object.fromEntries(survivors.map((m) => [mutantKey(m), listed[mutantKey(m)] ?? 'UNLISTED'])), null, 2) + '\n',
  );
  if (unlisted.length) {
    console.log(`\n${folder}: ${unlisted.length} surviving mutant(s) not listed in ${SURVIVORS_FILE}:`);
    for (const m of unlisted) console.log(`  ${m.status.padEnd(10)} ${relative(process.cwd(), m.fileName)}:${m.location.start.line}:${m.location.start.column}  ${JSON.stringify(mutantKey(m))}`);
  }
  if (stale.length) {
    console.log(`\n${folder}: ${stale.length} entr(y/ies) in ${SURVIVORS_FILE} match no surviving mutant now (killed, or its line changed): remove them`);
    for (const k of stale) console.log(`  ${JSON.stringify(k)}`);
  }
  if (score < THRESHOLD || unlisted.length) failed = true;
}

console.log('\nmutation score per folder (Stryker: detected = killed + timeout; undetected = survived + no coverage)');
console.log('folder        mutants  detected  undetected  score    unlisted survivors  minutes');
for (const r of rows) {
  console.log(
    `${r.folder.padEnd(13)} ${String(r.mutants).padStart(7)}  ${String(r.detected).padStart(8)}  ${String(r.undetected).padStart(10)}  ${r.score.toFixed(1).padStart(5)} %  ${String(r.unlisted).padStart(17)}  ${r.minutes.toFixed(1).padStart(7)}`,
  );
}
console.log(`threshold: ${THRESHOLD} % per folder`);
process.exit(failed ? 1 : 0);
