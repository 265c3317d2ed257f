// Chaos: the real service process (`src/main.ts`) under a steady stream of signed comment
// webhooks across four repositories, the real Codex app-server driven by the scripted model, and
// SIGKILL at random moments (CHAOS_KILLS, default 20), restarting each time. Deliveries sent while it
// is down fail the way Gitea's do (no retry). At the end: every 202 has a task, no delivery made two,
// every task ends terminal, no repository ever ran two tasks at once (audit replay, with the lease
// each claim names), one `已收到` receipt and at most one answer per task on the sandbox, every
// restart loaded the store and listened, and nothing on disk holds a secret.
//
// The schedule (kill times, comment targets and texts) comes from a seed printed at the start:
// CHAOS_SEED=<n> replays it (process timing still varies; the schedule does not).
// The deliveries come from the Gitea stand-in's sender, not a real Gitea: the test must know each
// delivery's outcome the moment it is answered (Gitea records it asynchronously) and send them over four
// repositories at a steady rate. Kill -9 mid-turn against a real Gitea: real-gitea.e2e.test.ts.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { STORE_INDEXES } from '../../src/domain/records.js';
import { createStore } from '../../src/store/index.js';
import type { SentDelivery } from '../support/chaos-checks.js';
import { seededRandom, startChaosWorld, type ChaosWorld } from '../support/chaos-world.js';
import { startServiceProcess, type ServiceProcess } from '../support/sandbox/service-process.js';
import { formatScan, scanForSecrets } from '../../scripts/secret-scan.js';

const SEED = Number(process.env['CHAOS_SEED'] ?? 20_250_917);
const KILLS = Math.max(1, Number(process.env['CHAOS_KILLS'] ?? 20));
const WEBHOOK_PATH = '/api/gitea/webhook';
const SETTLE_MS = 150_000;

const INSTRUCTIONS = [
  '@ccweb-bot please check why the build is red',
  '@ccweb-bot summarise the README',
  '@ccweb-bot which commit is the head of the workspace?',
  '@ccweb-bot forget to post at first, then answer',
  '@ccweb-bot add a changelog entry',
];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('chaos: SIGKILL under load [real gitea-mcp]', () => {
  const root = mkdtempSync(join(tmpdir(), 'ccweb-chaos-'));
  let world: ChaosWorld | null = null;
  let current: ServiceProcess | null = null;

  afterAll(async () => {
    await current?.kill9().catch(() => undefined);
    await world?.close();
    if (!process.env['CHAOS_KEEP']) rmSync(root, { recursive: true, force: true });
  });

  it(`keeps every promise across ${KILLS} SIGKILLs`, { timeout: 420_000 }, async () => {
    console.log(`chaos: seed ${SEED}, ${KILLS} kills (replay: CHAOS_SEED=${SEED} npx vitest run test/chaos), files under ${root}`);
    const killRand = seededRandom(SEED);
    const trafficRand = seededRandom(SEED ^ 0x5bd1e995);
    world = await startChaosWorld(root, { extraRepos: 3, issuesPerRepo: 2 });
    const w = world;
    const env: Record<string, string> = { ...w.env.env, CCWEB_MAX_CONCURRENT_TASKS: '4', CCWEB_LOG_LEVEL: 'info' };
    const logDir = join(root, 'logs');
    mkdirSync(logDir, { recursive: true });

    let starts = 0;
    let listened = 0;
    const startFailures: string[] = [];
    const start = async (): Promise<ServiceProcess> => {
      starts += 1;
      try {
        const p = await startServiceProcess(env, { timeoutMs: 90_000 });
        listened += 1;
        current = p;
        w.connect(`${p.url}${WEBHOOK_PATH}`);
        return p;
      } catch (err) {
        startFailures.push((err as Error).message.slice(0, 2000));
        throw err;
      }
    };
    const saveLog = (p: ServiceProcess, n: number) => writeFileSync(join(logDir, `service-${n}.log`), `${p.lines.join('\n')}\n`);

    // The comment stream: runs through starts, kills and restarts alike.
    const sent: SentDelivery[] = [];
    let producing = true;
    const producer = (async () => {
      while (listened === 0) await sleep(50);
      while (producing) {
        const issue = w.issues[Math.floor(trafficRand() * w.issues.length)]!;
        const text = INSTRUCTIONS[Math.floor(trafficRand() * INSTRUCTIONS.length)]!;
        const r = await w.comment('alice', issue, `${text} (#${sent.length + 1})`);
        sent.push({ deliveryId: r.delivery.deliveryId, status: r.delivery.status });
        await sleep(300 + trafficRand() * 700);
      }
    })();

    const t0 = Date.now();
    for (let k = 1; k <= KILLS; k++) {
      const p = await start();
      // Mostly mid-work; now and then right after start-up, while recovery and the app-server boot.
      const uptime = killRand() < 0.2 ? killRand() * 300 : 800 + killRand() * 4_000;
      await sleep(uptime);
      await p.kill9();
      current = null;
      saveLog(p, k);
      await sleep(killRand() * 800);
    }
    producing = false;
    await producer;
    const final = await start();
    const chaosSeconds = (Date.now() - t0) / 1000;

    // Settle: every task terminal and every receipt it is owed on the sandbox.
    const settleStart = Date.now();
    const settled = await w.settle(final.url, SETTLE_MS);
    await sleep(1_500); // failure receipts of the last tasks
    await final.stop();
    current = null;
    saveLog(final, KILLS + 1);
    const settleSeconds = (Date.now() - settleStart) / 1000;

    // What the store holds, opened as the next start would.
    const verdict = await w.judge(createStore({ dir: join(env.CCWEB_DATA_DIR!, 'store'), indexes: STORE_INDEXES }), sent);
    const { deliveries, runs, comments, open } = verdict;
    const scan = scanForSecrets([env.CCWEB_DATA_DIR!, w.env.codexHome, logDir], {
      giteaToken: env.CCWEB_GITEA_TOKEN!,
      webhookSecret: env.CCWEB_WEBHOOK_SECRET!,
      adminToken: env.CCWEB_ADMIN_TOKEN!,
    });

    console.log(
      [
        `== chaos summary (seed ${SEED}) ==`,
        `service starts ${starts}, reached "listening" ${listened}, SIGKILLs ${KILLS}; chaos phase ${chaosSeconds.toFixed(0)} s, settle ${settleSeconds.toFixed(0)} s (${settled ? 'settled' : 'NOT settled'})`,
        ...verdict.lines,
        formatScan(scan),
      ].join('\n'),
    );

    expect(startFailures).toEqual([]);
    expect(listened).toBe(KILLS + 1);
    expect(deliveries.got202).toBeGreaterThan(KILLS);
    expect(deliveries.failed).toBeGreaterThan(0); // the kills did land while Gitea was sending
    expect(deliveries.missing).toEqual([]);
    expect(deliveries.doubled).toEqual([]);
    expect(open).toEqual([]);
    expect(runs.overlaps).toEqual([]);
    expect(runs.claimsWithoutLease).toEqual([]);
    expect(runs.doubleAcquires).toEqual([]);
    expect(comments.receiptProblems).toEqual([]);
    expect(comments.repeatedFailureReceipts).toEqual([]);
    expect(comments.answerProblems).toEqual([]);
    expect(scan.findings).toEqual([]);
    expect(scan.files).toBeGreaterThan(0);
  });
});
