// Child process for the crash test: writes transactions as fast as it can and prints the key of
// each one whose promise resolved ("ack <key>"). The parent SIGKILLs it at arbitrary points.
import { createStore } from '../../src/store/index.js';

const [dir, cycle] = process.argv.slice(2);
if (!dir || !cycle) throw new Error('usage: store-crash-child <dir> <cycle>');

const store = createStore({ dir, indexes: { tasks: ['cycle'] } });
await store.open();
process.stdout.write(`ready ${await store.count('tasks')}\n`);

let next = 0;
async function writer(): Promise<void> {
  for (;;) {
    const n = next++;
    const key = `c${cycle}-${n}`;
    await store.transact(async (tx) => {
      await tx.insert('tasks', key, { cycle, n, pad: 'p'.repeat(200) });
      const counter = await tx.get<{ version: number }>('control', 'counter');
      if (counter) await tx.put('control', 'counter', { last: key, version: 0 }, { expectVersion: counter.version });
      else await tx.insert('control', 'counter', { last: key, version: 1 });
      await tx.appendAudit({ action: 'crash.write', actor: 'system', taskId: key });
      // Every third transaction archives an earlier record: archiving is crashed in the middle of too.
      if (n % 3 === 0 && n >= 2) await tx.archive('tasks', `c${cycle}-${n - 2}`);
    });
    process.stdout.write(`ack ${key}\n`);
  }
}
await Promise.all(Array.from({ length: 16 }, writer));
