// Every reason `serve` refuses to start, in one list: its exit code and the `doctor` check that fails
// for the same setup. serve's start-up checks build their errors here (`refusal`), doctor runs the
// same rule functions (startup-checks.ts, secret-strength.ts, the isolation probe, probeGitea …),
// and test/e2e/doctor-agrees-with-serve.e2e.test.ts runs each setup through both. No OperatorError
// is made anywhere else (a wall test), so a refusal cannot be added without an entry here.
import { EXIT_CODES, OperatorError } from './operator-error.js';

export interface StartRefusal {
  exitCode: number;
  /** The doctor check that fails for this setup. */
  check: string;
  /**
   * false: refused only while another instance holds what this one needs (the data directory, the
   * database's writer lock). That is not a setup: doctor is run beside the running service, so it
   * says so as a warning where it can see it (store-lock), and cannot fail for it.
   */
  setup: boolean;
}

export const START_REFUSALS = {
  /** A key is missing or its value invalid, or a key that is gone is set (CCWEB_CLUSTER_MODE) (ConfigError, load-config.ts). */
  config_invalid: { exitCode: EXIT_CODES.config, check: 'config', setup: true },
  /** weakSecretProblems (secret-strength.ts), unless --allow-weak-secrets. */
  weak_secret: { exitCode: EXIT_CODES.config, check: 'webhook-secret', setup: true },
  data_dir_not_storage: { exitCode: EXIT_CODES.config, check: 'data-dir', setup: true },
  data_dir_unusable: { exitCode: EXIT_CODES.cantCreate, check: 'data-dir', setup: true },
  /** The embedded store is an earlier version's journal (checkDataDir, startup-checks.ts): `migrate-store` moves it. */
  store_needs_migration: { exitCode: EXIT_CODES.config, check: 'data-dir', setup: true },
  /** The embedded store's file is no SQLite database, or SQLite cannot read it (sqlite-store-check.ts). */
  store_unreadable: { exitCode: EXIT_CODES.config, check: 'data-dir', setup: true },
  /** The embedded store was written by a newer version (its schema number is higher). */
  store_schema_too_new: { exitCode: EXIT_CODES.config, check: 'data-dir', setup: true },
  codex_command_missing: { exitCode: EXIT_CODES.config, check: 'codex', setup: true },
  codex_home_unusable: { exitCode: EXIT_CODES.config, check: 'codex', setup: true },
  gitea_mcp_command_missing: { exitCode: EXIT_CODES.config, check: 'gitea-mcp', setup: true },
  /** The isolation probe failed with isolation on (IsolationUnavailableError). */
  agent_isolation_unavailable: { exitCode: EXIT_CODES.isolation, check: 'agent-isolation', setup: true },
  gitea_token_rejected: { exitCode: EXIT_CODES.unavailable, check: 'gitea', setup: true },
  gitea_url_not_gitea: { exitCode: EXIT_CODES.config, check: 'gitea', setup: true },
  /** The port is taken, not allowed, or the host is not an address of this machine. */
  address_unusable: { exitCode: EXIT_CODES.config, check: 'port', setup: true },
  database_unreachable: { exitCode: EXIT_CODES.tempFail, check: 'database', setup: true },
  database_schema_too_new: { exitCode: EXIT_CODES.config, check: 'database', setup: true },
  /** The database holds an earlier version's PostgreSQL store (its ccweb_records table): `migrate-store` moves it. */
  database_needs_migration: { exitCode: EXIT_CODES.config, check: 'database', setup: true },
  store_locked: { exitCode: EXIT_CODES.tempFail, check: 'store-lock', setup: false },
  database_writer_taken: { exitCode: EXIT_CODES.tempFail, check: 'database', setup: false },
  database_migration_blocked: { exitCode: EXIT_CODES.tempFail, check: 'database', setup: false },
  /**
   * Another live process runs under this CCWEB_NODE_ID (src/store/sql/nodes.ts). A setup error (two
   * nodes given one id), so not restarted; doctor, run beside the node itself, cannot tell it apart.
   */
  node_id_in_use: { exitCode: EXIT_CODES.config, check: 'database', setup: false },
} as const satisfies Record<string, StartRefusal>;

export type RefusalId = keyof typeof START_REFUSALS;
/** The refusals a setup causes (doctor fails for each). */
export type SetupRefusalId = { [K in RefusalId]: (typeof START_REFUSALS)[K]['setup'] extends true ? K : never }[RefusalId];

/** The error serve stops with: one line naming the problem, the key to look at and the fix. */
export function refusal(id: RefusalId, problem: string, key: string, fix: string): OperatorError {
  return new OperatorError(problem, key, fix, START_REFUSALS[id].exitCode, id);
}
