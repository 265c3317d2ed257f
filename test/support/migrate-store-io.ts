// The input and output of the `migrate-store` command in tests: a data directory, the other keys
// only valid (nothing is reached through them), and the lines it printed (errors prefixed `ERR `).
export function commandIo(dataDir: string, extra: Record<string, string> = {}) {
  const lines: string[] = [];
  const io = {
    env: {
      CCWEB_DATA_DIR: dataDir,
      CCWEB_WEBHOOK_SECRET: 'a-webhook-secret-of-enough-length-0123456789',
      CCWEB_GITEA_URL: 'http://127.0.0.1:1',
      CCWEB_GITEA_TOKEN: 'token',
      CCWEB_ADMIN_TOKEN: 'admin-token-of-enough-length-0123456789',
      ...extra,
    },
    argv: [],
    cwd: dataDir,
    out: (l: string) => void lines.push(l),
    err: (l: string) => void lines.push(`ERR ${l}`),
  };
  return { io, lines };
}
