// A child process for the crash test: drives task actors through lifecycles forever, printing one
// line per acknowledged (durable) transition, until the parent kills it with SIGKILL.
import { createStore } from '../../src/store/index.js';
import { ActorRuntime } from '../../src/runtime/actor-runtime.js';
import { taskActorId, taskKind } from '../../src/tasks/task-actor.js';
import type { TaskEvent } from '../../machines/task-lifecycle.js';

const dir = process.argv[2]!;
const round = process.argv[3] ?? '0';
const store = createStore({ dir });
await store.open();
const runtime = new ActorRuntime({ store, kinds: [taskKind()] });
const { restored } = await runtime.restoreAll();
process.stdout.write(`RESTORED ${restored}\n`);

function nextEvent(state: string, attempt: number): TaskEvent | null {
  switch (state) {
    case 'queued':
      return { type: 'CLAIM', leaseId: 'l1' };
    case 'preparing':
      return { type: 'WORKSPACE_READY' };
    case 'running':
      return attempt === 0
        ? { type: 'TURN_FAILED', errorCode: 'app_server_exited', retryable: true, retryAt: 0, resumeAt: 'running' }
        : { type: 'TURN_REPLIED' };
    case 'retry_wait':
      return { type: 'RETRY_DUE', leaseId: 'l2' };
    case 'verifying_reply':
      return { type: 'REPLY_CONFIRMED' };
    default:
      return null;
  }
}

async function drive(taskId: string): Promise<void> {
  const actorId = taskActorId(taskId);
  for (;;) {
    const current = await runtime.stateOf(actorId);
    if (!current || !(await runtime.has(actorId))) return;
    const event = nextEvent(current.state, (current.context as { attempt: number }).attempt);
    if (!event) return;
    const result = await runtime.send(actorId, event);
    if (!result.ok) throw new Error(`rejected ${event.type} in ${current.state}`);
    process.stdout.write(`ACK ${actorId} ${result.toState} ${result.stateVersion}\n`);
  }
}

// Restored actors continue where they were; new ones are created alongside.
const live = (await store.list<{ actorId: string; taskId: string | null; status: string }>('actors', (r) => r.status === 'active'))
  .map((r) => r.taskId!)
  .filter(Boolean);
let n = 0;
const workers = live.map((id) => drive(id));
for (;;) {
  const batch: Promise<void>[] = [];
  for (let i = 0; i < 4; i++) {
    const taskId = `crash-${round}-${n++}`;
    batch.push(
      (async () => {
        const created = await store.transact(async (tx) => {
          await tx.insert('tasks', taskId, { taskId, state: 'received', stateVersion: 0 });
          return runtime.createInTx(tx, 'task', taskActorId(taskId), { taskId }, { events: [{ type: 'ACCEPT' }], taskId });
        });
        created.start();
        process.stdout.write(`ACK ${taskActorId(taskId)} ${created.state} ${created.stateVersion}\n`);
        await drive(taskId);
      })(),
    );
  }
  await Promise.all([...batch, ...workers.splice(0)]);
}
