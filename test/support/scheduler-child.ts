// A scheduler process for the restart tests: store + runtime + scheduler with a scripted, slow
// executor that parks each task in the state its id names, then prints `READY {json}` and waits to
// be SIGKILLed. Run with `node --import tsx` (one process: SIGKILL must hit the writer itself).
import { STORE_INDEXES } from '../../src/domain/records.js';
import { leaseOwnerId } from '../../src/leases/lease-owner.js';
import { ActorRuntime } from '../../src/runtime/actor-runtime.js';
import { createScheduler } from '../../src/scheduler/index.js';
import { createStore } from '../../src/store/index.js';
import { schedulerKinds, scriptedExecutor, submitTask, waitForTaskState, waitUntil, walkToSuccess } from './scheduler-harness.js';

const dir = process.argv[2]!;
// Keeps the event loop alive while executors hang on promises that never settle.
setInterval(() => {}, 1 << 30);

const store = createStore({ dir, indexes: STORE_INDEXES });
await store.open();
const runtime = new ActorRuntime({ store, kinds: schedulerKinds() });
const owner = leaseOwnerId('default');
const hang = () => new Promise<void>(() => {});

/** taskId → [repoKey, the state it must be parked in]. */
const PLAN: Record<string, [string, string]> = {
  prep: ['default:org/p', 'preparing'],
  'prep-next': ['default:org/p', 'queued'],
  run: ['default:org/r', 'running'],
  'run-exhausted': ['default:org/x', 'running'],
  abort: ['default:org/a', 'aborting'],
  retry: ['default:org/t', 'retry_wait'],
  wait: ['default:org/w', 'waiting_user'],
  verify: ['default:org/v', 'verifying_reply'],
  done: ['default:org/d', 'succeeded'],
};

const { executor } = scriptedExecutor(runtime, async (call) => {
  switch (call.taskId) {
    case 'prep':
      return hang();
    case 'run':
      await call.send({ type: 'WORKSPACE_READY' });
      return hang();
    case 'run-exhausted':
      if (call.run === 0) {
        // Spend the one execution retry before the crash, so the restart finds it over the limit.
        await call.send({ type: 'PREPARE_FAILED', errorCode: 'auth_failed', retryable: true, retryAt: Date.now() });
        return;
      }
      await call.send({ type: 'WORKSPACE_READY' });
      return hang();
    case 'abort':
      await call.send({ type: 'WORKSPACE_READY' });
      await call.send({ type: 'ABORT', by: 'admin:test' });
      return hang();
    case 'retry':
      await call.send({ type: 'PREPARE_FAILED', errorCode: 'auth_failed', retryable: true, retryAt: Date.now() + 10 * 60_000 });
      return;
    case 'wait':
      await call.send({ type: 'WORKSPACE_READY' });
      await call.send({ type: 'TURN_WAITING_USER' });
      await call.send({ type: 'REPLY_CONFIRMED' }); // its question is on Gitea
      return;
    case 'verify':
      await call.send({ type: 'WORKSPACE_READY' });
      await call.send({ type: 'TURN_REPLIED' });
      return hang();
    default:
      return walkToSuccess(call);
  }
});

const scheduler = createScheduler({ store, runtime, executor, owner, maxConcurrentTasks: 16 });
for (const [taskId, [repoKey]] of Object.entries(PLAN)) await submitTask(store, runtime, taskId, repoKey);
scheduler.start();
await Promise.all(Object.entries(PLAN).map(([taskId, [, state]]) => waitForTaskState(store, runtime, taskId, [state])));
// Executors that returned give their lease back right after; wait for that so the kill finds
// exactly the leases of parked tasks.
const RETURNED = ['retry', 'wait', 'done'];
await waitUntil(
  async () => (await Promise.all(RETURNED.map((id) => store.get<{ state: string }>('leases', PLAN[id]![0])))).every((lease) => lease?.state === 'free'),
  'returned leases',
);
await scheduler.settled();
await runtime.settled();
process.stdout.write(`READY ${JSON.stringify({ owner, pid: process.pid })}\n`);
