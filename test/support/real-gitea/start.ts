/**
 * Starts the same throwaway, seeded Gitea the tests use, to poke at it by hand:
 *
 *   node --import tsx test/support/real-gitea/start.ts [--port 3000] [--keep] [--hook URL --secret S]
 *
 * Prints the URL and every user's password and token, then runs until Ctrl-C (which stops Gitea
 * and removes its folder unless --keep).
 */
import { parseArgs } from 'node:util';
import { startSeededGitea } from './seed.js';

const { values } = parseArgs({
  options: {
    port: { type: 'string' },
    keep: { type: 'boolean', default: false },
    hook: { type: 'string' },
    secret: { type: 'string', default: 'test-secret' },
    'log-level': { type: 'string', default: 'warn' },
  },
});

const g = await startSeededGitea({ port: values.port ? Number(values.port) : undefined, keep: values.keep, logLevel: values['log-level'] });
let hookId: number | null = null;
if (values.hook) hookId = await g.addWebhook(values.hook, values.secret!);

console.log(`Gitea ${g.version} at ${g.url}  (folder ${g.gitea.root})`);
console.log(`repository ${g.url}/${g.owner}/${g.repo} (private): issue #${g.issueNumber}, PR #${g.prNumber} (same repo, ${g.prHeadRef}), PR #${g.forkPrNumber} (from bob's fork)`);
for (const [role, u] of Object.entries(g.users)) {
  console.log(`  ${role.padEnd(6)} ${u.login.padEnd(12)} password ${u.password}  token ${u.token}`);
}
if (hookId !== null) console.log(`webhook #${hookId} → ${values.hook} (secret ${values.secret})`);
console.log(`e.g. curl -H 'Authorization: token ${g.users.writer.token}' ${g.url}/api/v1/repos/${g.owner}/${g.repo}/issues`);
console.log('Ctrl-C to stop.');

let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  await g.close();
  process.exit(0);
};
process.on('SIGINT', () => void stop());
process.on('SIGTERM', () => void stop());
setInterval(() => undefined, 1 << 30);
