import { pino, type Logger } from 'pino';

export type { Logger };

/**
 * Structured logs (pino) with secrets redacted by path, plus a value scrubber for free text: a token
 * can hide in an error message from git or Gitea, where a path-based redaction never looks.
 */
export function createLogger(options: { level?: string; secrets?: readonly string[]; destination?: NodeJS.WritableStream } = {}): Logger {
  const secrets = (options.secrets ?? []).filter((s) => s.length >= 4);
  return pino(
    {
      level: options.level ?? 'info',
      base: { service: 'ccweb-gitea' },
      redact: {
        paths: [
          'token',
          '*.token',
          'secret',
          '*.secret',
          'authorization',
          '*.authorization',
          'headers.authorization',
          'req.headers.authorization',
          'giteaToken',
          'webhookSecret',
          'adminToken',
          'config.giteaToken',
          'config.webhookSecret',
          'config.adminToken',
          'env.GITEA_ACCESS_TOKEN',
        ],
        censor: '[redacted]',
      },
      hooks: {
        logMethod(args, method) {
          if (secrets.length === 0) return method.apply(this, args);
          return method.apply(this, args.map((a) => scrub(a, secrets)) as Parameters<typeof method>);
        },
      },
    },
    options.destination as never,
  );
}

function scrub(value: unknown, secrets: readonly string[], depth = 0): unknown {
  if (typeof value === 'string') return secrets.reduce((s, secret) => s.split(secret).join('[redacted]'), value);
  if (depth > 4 || value === null || typeof value !== 'object') return value;
  if (value instanceof Error) return { name: value.name, message: scrub(value.message, secrets, depth + 1) };
  if (Array.isArray(value)) return value.map((v) => scrub(v, secrets, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = scrub(v, secrets, depth + 1);
  return out;
}
