// Only the coordination part of bench:cluster (bench/cluster-tasks.ts): completed tasks per minute of
// three nodes × 2 slots against one node × 6 on one throwaway PostgreSQL, with what each round cost in CPU.
// Run: npm run bench:coordination
import { cpus, loadavg } from 'node:os';
import { startThrowawayPostgres } from '../src/cli/throwaway-postgres.js';
import { measureClusterTasks } from './cluster-tasks.js';

console.log(`node ${process.version}, ${cpus().length} cpus, load average ${loadavg().map((l) => l.toFixed(1)).join(' ')}`);
const postgres = await startThrowawayPostgres();
try {
  await measureClusterTasks(postgres);
} finally {
  await postgres.stop();
}
