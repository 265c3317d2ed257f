// The configuration reference table of docs/configuration.md, generated from src/config/keys.ts
// (`ccweb-gitea config-reference`); a unit test keeps the document equal to this output.
import { CONFIG_KEYS, DEFAULTS, KEYS, type KeySpec } from '../config/keys.js';

const DERIVED_DEFAULTS: Record<string, string> = {
  workspaceRoot: '`<dataDir>/workspaces`',
  codexCommand: 'the bundled `@openai/codex` binary',
  botLogin: 'learned from `GET /api/v1/user`',
  codexModel: 'Codex’s own (CODEX_HOME/config.toml)',
  agentPath: 'the running node\'s directory, then /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
  taskRetentionDays: 'keep forever',
  limitTaskTokens: 'no limit',
  limitTaskTurns: 'no limit',
  limitTaskWallMinutes: 'no limit',
  limitUserTasksPerDay: 'no limit',
  limitRepoTokensPerDay: 'no limit',
};

function defaultOf(key: string, spec: KeySpec): string {
  if (spec.required) return '**required**';
  if (key in DERIVED_DEFAULTS) return DERIVED_DEFAULTS[key]!;
  const v = (DEFAULTS as Record<string, unknown>)[key];
  if (v === undefined) return '—';
  if (Array.isArray(v)) return v.length === 0 ? '(empty)' : `\`${v.join(',')}\``;
  return `\`${String(v)}\``;
}

const cell = (s: string) => s.replace(/\|/g, '\\|').replace(/\n/g, ' ');

export function configReferenceTable(): string {
  const rows = CONFIG_KEYS.map((key) => {
    const spec: KeySpec = KEYS[key];
    return `| \`${spec.env}\` | \`${key}\` | ${defaultOf(key, spec)} | ${cell(spec.expect)}${spec.secret ? ' (secret)' : ''} | ${cell(spec.fix)} |`;
  });
  return ['| Environment | File key | Default | Value | Notes |', '|---|---|---|---|---|', ...rows].join('\n');
}
