// Child process for the leftover tests of test/integration/postgres-server.test.ts: starts a
// throwaway PostgreSQL, prints `ready <postmaster pid> <data dir>`, then either exits without
// stopping it (`exit`: the 'exit' hook must clean up) or waits to be SIGKILLed (`wait`: no hook
// runs, the watchdog must).
import { startThrowawayPostgres } from './postgres-server.js';

const mode = process.argv[2];
if (mode !== 'exit' && mode !== 'wait') throw new Error('usage: postgres-server-child exit|wait');
const server = await startThrowawayPostgres();
process.stdout.write(`ready ${server.pid} ${server.dataDir}\n`);
if (mode === 'exit') process.exit(0);
setInterval(() => {}, 60_000);
