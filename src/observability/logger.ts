import { pino, type Logger } from 'pino';

export type { Logger };

/**
 * How a log line about a task learns its delivery. Filled in once the store is open (the logger
 * exists before it); a lookup that throws (store closed) just leaves the field out.
 */
export interface LogCorrelation {
  deliveryIdOf?: (taskId: string) => string | null | undefined;
}

export interface CreateLoggerOptions {
  level?: string;
  secrets?: readonly string[];
  destination?: NodeJS.WritableStream;
  correlation?: LogCorrelation;
}

const TASK_ID = /gitea-task-[0-9a-f]{24}/;
/** Fields whose value names the task without saying `taskId`: `<taskId>:…` keys and `task:<taskId>` actor ids. */
const TASK_CARRIERS = ['turnKey', 'commentKey', 'actorId'] as const;

/** `taskId` (and `deliveryId`) for a line that names a task only through another field. */
export function correlationFields(fields: unknown, correlation: LogCorrelation = {}): Record<string, string> {
  if (fields === null || typeof fields !== 'object') return {};
  const f = fields as Record<string, unknown>;
  let taskId = typeof f['taskId'] === 'string' ? f['taskId'] : undefined;
  const out: Record<string, string> = {};
  // Runtime alerts log the whole audit event, which names its task.
  const nested = (f['audit'] as { taskId?: unknown } | undefined)?.taskId;
  if (taskId === undefined && typeof nested === 'string') {
    taskId = nested;
    out['taskId'] = taskId;
  }
  if (taskId === undefined) {
    for (const name of TASK_CARRIERS) {
      const v = f[name];
      const m = typeof v === 'string' ? TASK_ID.exec(v) : null;
      if (m) {
        taskId = m[0];
        out['taskId'] = taskId;
        break;
      }
    }
  }
  if (taskId !== undefined && f['deliveryId'] === undefined && correlation.deliveryIdOf) {
    try {
      const deliveryId = correlation.deliveryIdOf(taskId);
      if (deliveryId) out['deliveryId'] = deliveryId;
    } catch {
      // the store is closed or not open yet: the line goes out without it
    }
  }
  return out;
}

/**
 * Structured logs (pino) with secrets redacted by path, plus a value scrubber for free text: a token
 * can hide in an error message from git or Gitea, where a path-based redaction never looks.
 */
export function createLogger(options: CreateLoggerOptions = {}): Logger {
  const secrets = (options.secrets ?? []).filter((s) => s.length >= 4);
  const correlation = options.correlation ?? {};
  return pino(
    {
      level: options.level ?? 'info',
      base: { service: 'ccweb-gitea' },
      // Every line about a task carries its taskId/deliveryId, whichever module wrote it.
      mixin: (mergeObject) => correlationFields(mergeObject, correlation),
      redact: {
        paths: [
          'token',
          '*.token',
          'secret',
          '*.secret',
          'password',
          '*.password',
          'authorization',
          '*.authorization',
          'headers.authorization',
          'req.headers.authorization',
          'headers["x-gitea-signature"]',
          'headers["x-hub-signature-256"]',
          'giteaToken',
          'webhookSecret',
          'adminToken',
          'config.giteaToken',
          'config.webhookSecret',
          'config.adminToken',
          'env.GITEA_ACCESS_TOKEN',
          'env.CCWEB_GITEA_TOKEN',
          'env.CCWEB_WEBHOOK_SECRET',
          'env.CCWEB_ADMIN_TOKEN',
          'env.OPENAI_API_KEY',
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

/** Replaces every occurrence of a secret in a string. */
export function scrubText(text: string, secrets: readonly string[]): string {
  return secrets.filter((s) => s.length >= 4).reduce((s, secret) => s.split(secret).join('[redacted]'), text);
}

function scrub(value: unknown, secrets: readonly string[], depth = 0): unknown {
  if (typeof value === 'string') return scrubText(value, secrets);
  if (depth > 4 || value === null || typeof value !== 'object') return value;
  if (value instanceof Error) return { name: value.name, message: scrub(value.message, secrets, depth + 1) };
  if (Array.isArray(value)) return value.map((v) => scrub(v, secrets, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = scrub(v, secrets, depth + 1);
  return out;
}
