// The throwaway PostgreSQL server of the tests. Its core is src/cli/throwaway-postgres.ts,
// so that the demo can start the same one; tests import it from here.
export { postgresBinDir, startThrowawayPostgres, type ThrowawayPostgres, type ThrowawayPostgresOptions } from '../../src/cli/throwaway-postgres.js';
