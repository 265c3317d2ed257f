// A database URL carries a password: only this description of it ever reaches a log or an error.

/** `postgres://host:port/db` without user or password; `a PostgreSQL database` when unparsable. */
export function describeDatabase(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.hostname}${u.port ? `:${u.port}` : ''}${u.pathname}`;
  } catch {
    return 'a PostgreSQL database';
  }
}

/** Whether a configured value is a URL this engine takes. */
export function isPostgresUrl(value: string): boolean {
  return /^postgres(ql)?:\/\//i.test(value);
}
