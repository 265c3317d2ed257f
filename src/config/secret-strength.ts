// Weak secrets are refused at start: the webhook secret is what stands between anyone who
// can reach the webhook URL and a task run with the bot's token, and the admin token guards the
// control API. Short values can be guessed; one value used for both means whoever configured a
// webhook (and so knows its secret) is also an operator. `--allow-weak-secrets` exists for demos.
import type { Config } from './load-config.js';

export const MIN_SECRET_LENGTH = 16;

/** One line per problem, naming the key and the fix, never the value; empty when all is well. */
export function weakSecretProblems(config: Pick<Config, 'webhookSecret' | 'adminToken' | 'giteaToken'>): string[] {
  const problems: string[] = [];
  const fix = `use at least ${MIN_SECRET_LENGTH} random characters, e.g. \`openssl rand -hex 32\` (or pass --allow-weak-secrets for a demo)`;
  config.webhookSecret.forEach((secret, i) => {
    if (secret.length < MIN_SECRET_LENGTH) {
      const which = config.webhookSecret.length > 1 ? ` (entry ${i + 1} of ${config.webhookSecret.length})` : '';
      problems.push(`CCWEB_WEBHOOK_SECRET${which} is shorter than ${MIN_SECRET_LENGTH} characters: ${fix}.`);
    }
  });
  if (config.adminToken.length < MIN_SECRET_LENGTH) {
    problems.push(`CCWEB_ADMIN_TOKEN is shorter than ${MIN_SECRET_LENGTH} characters: ${fix}.`);
  }
  if (config.webhookSecret.includes(config.adminToken)) {
    problems.push('CCWEB_ADMIN_TOKEN equals a webhook secret: every repository admin who adds the webhook would know the admin token; give each its own random value.');
  }
  if (config.webhookSecret.includes(config.giteaToken) || config.adminToken === config.giteaToken) {
    problems.push('CCWEB_GITEA_TOKEN equals the webhook secret or the admin token: give each its own value.');
  }
  return problems;
}
