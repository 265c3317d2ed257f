// Chaos on three nodes: three real service processes on one real PostgreSQL behind a
// round-robin relay (the load balancer), a steady stream of signed comment webhooks across six
// repositories, the real Codex app-server driven by the scripted model, the real gitea-mcp; a random
// node is killed with SIGKILL CHAOS_NODE_KILLS times (default 20) and started again, and PostgreSQL
// itself is killed once (a power cut as far as it can tell) and brought back. Every node is alike:
// each accepts webhooks and runs tasks, the database's lease row allowing one task per repository at a
// time. Whichever node is killed — one running a turn, one accepting a webhook, one still starting —
// the promises hold, read from the database afterwards: every 202 has a task, no delivery made two,
// every task ends terminal, no repository ever ran two tasks at once (audit replay, with the lease
// each claim names) nor two under leases that overlapped on the database's clock (history-check.ts),
// one receipt and at most one answer per task on the sandbox, and nothing on disk holds a secret.
//
// The schedule (which node, when) comes from a seed printed at the start: CHAOS_SEED=<n> replays it.
// As in test/chaos/chaos.test.ts, the deliveries come from the Gitea stand-in's sender (the one
// double here): the test must know each delivery's answer the moment it is given. In test/cluster/:
// CI runs it on Node 24 only.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { STORE_INDEXES } from '../../src/domain/records.js';
import { createStore } from '../../src/store/index.js';
import type { SentDelivery } from '../support/chaos-checks.js';
import { seededRandom, startChaosWorld, type ChaosWorld } from '../support/chaos-world.js';
import { startThrowawayPostgres, type ThrowawayPostgres } from '../support/postgres-server.js';
import { freePort } from '../support/real-gitea/index.js';
import { startRoundRobinRelay, type RoundRobinRelay } from '../support/round-robin-relay.js';
import { startServiceProcess } from '../support/sandbox/service-process.js';
import { writeCodexHome } from '../../src/demo/scripted-model.js';
import { formatScan, scanForSecrets } from '../../scripts/secret-scan.js';

const SEED = Number(process.env['CHAOS_SEED'] ?? 20_261_202);
const KILLS = Math.max(1, Number(process.env['CHAOS_NODE_KILLS'] ?? 20));
const NODES = 3;
const WEBHOOK_PATH = '/api/gitea/webhook';
const SETTLE_MS = 180_000;

const INSTRUCTIONS = [
  '@ccweb-bot please check why the build is red',
  '@ccweb-bot summarise the README',
  '@ccweb-bot which commit is the head of the workspace?',
  '@ccweb-bot forget to post at first, then answer',
];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Node {
  name: string;
  port: number;
  env: Record<string, string>;
  child: ChildProcess | null;
  exited: Promise<void>;
  lines: string[];
  /** Set once it serves (its "ccweb-gitea listening" line). */
  writing: boolean;
  starts: number;
  /** This test killed or stopped it (any other exit is a finding). */
  ending: boolean;
}

describe('chaos: three nodes alike on one PostgreSQL, SIGKILL of any node and of the database [real gitea-mcp]', () => {
  const root = mkdtempSync(join(tmpdir(), 'ccweb-chaos-nodes-'));
  let world: ChaosWorld | null = null;
  let postgres: ThrowawayPostgres | null = null;
  let relay: RoundRobinRelay | null = null;
  const nodes: Node[] = [];

  afterAll(async () => {
    for (const n of nodes) {
      n.ending = true;
      n.child?.kill('SIGKILL');
    }
    await Promise.all(nodes.map((n) => n.exited));
    await relay?.close();
    await postgres?.stop();
    await world?.close();
    if (!process.env['CHAOS_KEEP']) rmSync(root, { recursive: true, force: true });
  });

  it(`keeps every promise across ${KILLS} node kills and one database kill`, { timeout: 600_000 }, async () => {
    console.log(`chaos-nodes: seed ${SEED}, ${KILLS} kills (replay: CHAOS_SEED=${SEED}), files under ${root}`);
    const killRand = seededRandom(SEED);
    const trafficRand = seededRandom(SEED ^ 0x5bd1e995);
    world = await startChaosWorld(root, { extraRepos: 5, issuesPerRepo: 2 });
    const w = world;
    postgres = await startThrowawayPostgres({ parentDir: root });
    const databaseUrl = await postgres.createDatabase('ccweb');
    const logDir = join(root, 'logs');
    mkdirSync(logDir, { recursive: true });

    for (let i = 0; i < NODES; i++) {
      const name = `node-${i}`;
      const codexHome = join(root, `codex-home-${i}`);
      writeCodexHome(codexHome, { port: w.env.model.port, model: 'fake-model' });
      const port = await freePort();
      nodes.push({
        name,
        port,
        env: {
          ...w.env.env,
          CODEX_HOME: codexHome,
          CCWEB_PORT: String(port),
          CCWEB_DATA_DIR: join(root, name),
          CCWEB_DATABASE_URL: databaseUrl,
          CCWEB_NODE_ID: name,
          CCWEB_MAX_CONCURRENT_TASKS: '4',
          // Short, so a killed node's repositories are free again within seconds.
          CCWEB_LEASE_TTL_MS: '6000',
          CCWEB_NODE_HEARTBEAT_SECONDS: '1',
        },
        child: null,
        exited: Promise.resolve(),
        lines: [],
        writing: false,
        starts: 0,
        ending: false,
      });
    }
    relay = await startRoundRobinRelay(await freePort(), () => nodes.map((n) => `http://127.0.0.1:${n.port}`));
    w.connect(`${relay.url}${WEBHOOK_PATH}`);

    let listened = 0;
    const startFailures: string[] = [];
    // While PostgreSQL is down (and for a few seconds after), a node that has to open the store exits 75
    // naming CCWEB_DATABASE_URL, and a running node whose store stopped mid-way exits 75
    // saying the store stopped: the documented ends, after which a supervisor (systemd's
    // Restart=on-failure, compose's restart policy) starts it again. The test is that supervisor then.
    let databaseDown: { from: number; until: number } | null = null;
    let supervisorRestarts = 0;
    const restartedBySupervisor = (code: number | null, lines: readonly string[]): boolean =>
      code === 75 &&
      databaseDown !== null &&
      Date.now() >= databaseDown.from &&
      Date.now() <= databaseDown.until &&
      lines.some((l) => (l.includes('[CCWEB_DATABASE_URL]') && l.includes('cannot reach postgres')) || l.includes('the store stopped: store unavailable'));
    const start = (n: Node) => {
      n.starts += 1;
      n.writing = false;
      n.ending = false;
      const run = n.starts;
      let exited!: () => void;
      n.exited = new Promise<void>((resolve) => (exited = resolve));
      void startServiceProcess(n.env, {
        timeoutMs: 600_000,
        onSpawn: (child) => {
          n.child = child;
          child.once('exit', (code, signal) => {
            const supervised = !n.ending && restartedBySupervisor(code, n.lines);
            if (!n.ending && !supervised) startFailures.push(`${n.name} (start ${run}) exited by itself (${code ?? signal}):\n${n.lines.slice(-20).join('\n')}`);
            writeFileSync(join(logDir, `${n.name}-${run}.log`), `${n.lines.join('\n')}\n`);
            n.lines = [];
            exited();
            if (supervised) {
              supervisorRestarts += 1;
              setTimeout(() => {
                if (!n.ending && n.child === child) start(n);
              }, 1_000);
            }
          });
        },
        onLine: (line) => void n.lines.push(line),
      }).then(
        () => {
          n.writing = true;
          listened += 1;
        },
        (err: Error) => {
          // Killed or stopped before it listened (a node still starting): expected. Exits of its own are caught above.
          if (!/^service exited/.test(err.message)) startFailures.push(`${n.name}: ${err.message.slice(0, 2000)}`);
        },
      );
    };
    const kill = async (n: Node) => {
      n.ending = true;
      n.child?.kill('SIGKILL');
      await n.exited;
      n.child = null;
      n.writing = false;
    };

    for (const n of nodes) start(n);
    const t0 = Date.now();
    while (!nodes.some((n) => n.writing)) {
      if (Date.now() - t0 > 180_000) throw new Error(`no node came to serve:\n${startFailures.join('\n')}`);
      await sleep(100);
    }

    const sent: SentDelivery[] = [];
    let producing = true;
    const producer = (async () => {
      while (producing) {
        const issue = w.issues[Math.floor(trafficRand() * w.issues.length)]!;
        const text = INSTRUCTIONS[Math.floor(trafficRand() * INSTRUCTIONS.length)]!;
        const r = await w.comment('alice', issue, `${text} (#${sent.length + 1})`);
        sent.push({ deliveryId: r.delivery.deliveryId, status: r.delivery.status });
        await sleep(200 + trafficRand() * 500);
      }
    })();

    const databaseKillAt = 1 + Math.floor(killRand() * KILLS);
    /** Kills of a node while it served (not while it was still starting). */
    let writerKills = 0;
    for (let k = 1; k <= KILLS; k++) {
      await sleep(killRand() < 0.2 ? killRand() * 500 : 1_000 + killRand() * 3_000);
      const victim = nodes[Math.floor(killRand() * nodes.length)]!;
      if (victim.writing) writerKills += 1;
      await kill(victim);
      if (k === databaseKillAt) {
        // Every node waits for the database meanwhile (CCWEB_DATABASE_OUTAGE_SECONDS, 120 s).
        databaseDown = { from: Date.now(), until: Number.POSITIVE_INFINITY };
        await postgres.crash();
        await sleep(1_000 + killRand() * 2_000);
        await postgres.restart();
        databaseDown.until = Date.now() + 10_000;
      }
      await sleep(killRand() * 800);
      start(victim);
    }
    producing = false;
    await producer;
    const chaosSeconds = (Date.now() - t0) / 1000;

    // Settle through whichever node answers (the relay): every task terminal, every receipt on the sandbox.
    const settleStart = Date.now();
    const settled = await w.settle(relay!.url, SETTLE_MS, { askAgainOnError: true });
    await sleep(1_500); // failure receipts of the last tasks
    for (const n of nodes) {
      n.ending = true;
      n.child?.kill('SIGTERM');
      await n.exited;
    }
    const settleSeconds = (Date.now() - settleStart) / 1000;

    // What the database holds, read as a new node would.
    const verdict = await w.judge(createStore({ url: databaseUrl, indexes: STORE_INDEXES }), sent);
    const { deliveries, runs, comments, open } = verdict;
    const served = [0, 1, 2].map((i) => relay!.served.filter((x) => x === i).length);
    const scan = scanForSecrets([...nodes.map((n) => n.env['CCWEB_DATA_DIR']!), ...nodes.map((n) => n.env['CODEX_HOME']!), logDir], {
      giteaToken: w.env.env['CCWEB_GITEA_TOKEN']!,
      webhookSecret: w.env.env['CCWEB_WEBHOOK_SECRET']!,
      adminToken: w.env.env['CCWEB_ADMIN_TOKEN']!,
    });

    console.log(
      [
        `== chaos-nodes summary (seed ${SEED}) ==`,
        `node starts ${nodes.map((n) => `${n.name} ${n.starts}`).join(', ')}; came to serve ${listened} times; SIGKILLs ${KILLS} (of a serving node ${writerKills}); PostgreSQL killed after kill ${databaseKillAt} (${supervisorRestarts} supervisor restarts of a node refused or stopped while it was down); chaos phase ${chaosSeconds.toFixed(0)} s, settle ${settleSeconds.toFixed(0)} s (${settled ? 'settled' : 'NOT settled'})`,
        `requests answered per node (relay) ${served.join(' / ')}`,
        ...verdict.lines,
        formatScan(scan),
      ].join('\n'),
    );
    if (startFailures.length) console.log('start failures:', startFailures.join('\n---\n'));

    expect(startFailures).toEqual([]);
    // Before `settled`: a failure names the tasks that never ended and their states.
    expect(open).toEqual([]);
    expect(settled).toBe(true);
    expect(writerKills).toBeGreaterThan(0);
    expect(served.every((x) => x > 0)).toBe(true);
    expect(deliveries.got202).toBeGreaterThan(KILLS);
    expect(deliveries.missing).toEqual([]);
    expect(deliveries.doubled).toEqual([]);
    expect(verdict.repositories).toBeGreaterThanOrEqual(6);
    expect(runs.overlaps).toEqual([]);
    expect(runs.claimsWithoutLease).toEqual([]);
    expect(runs.doubleAcquires).toEqual([]);
    expect(runs.epochProblems).toEqual([]);
    // The epochs were checked: the database granted a lease for every run.
    expect(runs.leaseGrants).toBeGreaterThan(0);
    // On the database's clock: no two runs of a repository under overlapping leases, every run under a granted one.
    expect(verdict.leases.leaseProblems).toEqual([]);
    expect(verdict.leases.overlappingRuns).toEqual([]);
    expect(verdict.leases.runsWithoutGrant).toEqual([]);
    expect(verdict.leases.runs).toBe(runs.runs);
    expect(verdict.history).toEqual([]);
    expect(comments.receiptProblems).toEqual([]);
    expect(comments.repeatedFailureReceipts).toEqual([]);
    expect(comments.answerProblems).toEqual([]);
    expect(scan.findings).toEqual([]);
    expect(scan.files).toBeGreaterThan(0);
  });
});
