// The store-on-postgres project's PostgreSQL: one throwaway server for the run (its own data
// directory and port on 127.0.0.1, torn down at the end); each store test makes its own database.
import type { TestProject } from 'vitest/node';
import { startThrowawayPostgres } from './postgres-server.js';

declare module 'vitest' {
  export interface ProvidedContext {
    postgresUrl: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const server = await startThrowawayPostgres();
  project.provide('postgresUrl', server.url);
  return () => server.stop();
}
