// The logger shape the session modules take: pino-compatible, so the service passes its redacting
// pino logger; tests pass a collector. Callers never log thread params or MCP env (they hold the token).
export interface SessionLogger {
  info(obj: Record<string, unknown>, msg?: string): void;
  warn(obj: Record<string, unknown>, msg?: string): void;
  error(obj: Record<string, unknown>, msg?: string): void;
}

export const silentLogger: SessionLogger = { info: () => undefined, warn: () => undefined, error: () => undefined };

/** Removes every occurrence of the given secrets from free text (error messages from Codex/MCP). */
export function redactText(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const s of secrets) if (s.length >= 4) out = out.split(s).join('***');
  return out;
}
