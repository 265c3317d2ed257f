/** Environment variables never passed to the app-server process. */
export const SECRET_ENV_VARS: readonly string[] = [
  'CCWEB_GITEA_TOKEN',
  'CCWEB_WEBHOOK_SECRET',
  'CCWEB_ADMIN_TOKEN',
  'GITEA_ACCESS_TOKEN',
  'GITEA_TOKEN',
];

/** The env for the app-server: `base` minus secrets, plus `extra` (secret names are refused there too). */
export function appServerEnv(
  base: Record<string, string | undefined>,
  extra: Record<string, string> = {},
  extraSecrets: string[] = [],
): Record<string, string> {
  const secrets = new Set([...SECRET_ENV_VARS, ...extraSecrets]);
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(base)) if (v !== undefined && !secrets.has(k)) out[k] = v;
  for (const [k, v] of Object.entries(extra)) if (!secrets.has(k)) out[k] = v;
  return out;
}
