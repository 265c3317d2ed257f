/**
 * The service's surroundings on a real Gitea for the tests: src/demo/real-environment.ts with the real
 * gitea-mcp through a wrapper (test/support/real-gitea-mcp.ts, no fallback: the installed binary, whatever
 * CCWEB_GITEA_MCP_COMMAND says), bob's fork pull request seeded, and the webhook's delivery history and
 * Replay (seed.ts) that tests read.
 */
import { join } from 'node:path';
import { startRealGiteaEnvironment, type RealGiteaEnvironment } from '../../../src/demo/real-environment.js';
import { writeRealGiteaMcpWrapper } from '../real-gitea-mcp.js';
import { withHookHistory, type SeededGitea } from './seed.js';

export interface RealServiceEnvironment extends Omit<RealGiteaEnvironment, 'gitea'> {
  gitea: SeededGitea;
}

export async function startRealServiceEnvironment(root: string): Promise<RealServiceEnvironment> {
  // Before Gitea starts: a missing binary is a set-up error, said with the command to run.
  const giteaMcpCommand = writeRealGiteaMcpWrapper(join(root, 'bin', 'gitea-mcp'));
  const env = await startRealGiteaEnvironment(root, { giteaMcpCommand, forkPullRequest: true });
  return { ...env, gitea: withHookHistory(env.gitea) };
}
