// Help texts: one per command, each with examples. `ccweb-gitea help <command>` and
// `ccweb-gitea <command> --help` print the same text.
import { doctorChecksHelp } from './doctor-checks.js';

export const MAIN_HELP = `ccweb-gitea — answers @bot comments on Gitea issues and pull requests with the Codex agent

Usage: ccweb-gitea <command> [options]

Commands:
  serve              run the service (the same as npm start)
  doctor             check the setup as serve would: Node, git, Codex, the agent sandbox, gitea-mcp, Gitea,
                     the tokens, secrets, directories, the port and the database
  demo               run the service against a local Gitea and show what happens
  visualize          write every state machine as Stately code, Mermaid and SVG
  export-audit       print the audit history as NDJSON, read offline from the data directory
  migrate-store      move an earlier version's store into this one's (SQLite; PostgreSQL with CCWEB_DATABASE_URL)
  config-reference   print the configuration reference table (Markdown)
  help [command]     show help for a command

Options:
  -h, --help         show help (also after a command)
  -V, --version      print the version

Examples:
  ccweb-gitea doctor --repo acme/widget
  ccweb-gitea serve --config /etc/ccweb-gitea/config.json
  ccweb-gitea export-audit --task gitea-task-0123456789abcdef01234567 --out task.ndjson

Configuration comes from CCWEB_* environment variables and an optional JSON file; see
docs/configuration.md. Exit codes: 0 ok, 1 failed, 2 bad command line.
`;

export const COMMAND_HELP: Record<string, string> = {
  serve: `Usage: ccweb-gitea serve [--config PATH] [--allow-weak-secrets]

Runs the service: the webhook endpoint, the scheduler and the Codex app-server, the operators'
API and page, and /healthz, /readyz, /metrics. Stops gracefully on SIGTERM or SIGINT (within 20 s).
A mistake in the setup stops it with one line (cause, key, fix) and exit code 78 (configuration),
69 (Gitea rejects the token), 73 (data directory not writable) or 75 (data directory in use).

Options:
  --config PATH          JSON file of camelCase keys (default ./ccweb.config.json if present);
                         CCWEB_* environment variables win over it
  --allow-weak-secrets   accept secrets shorter than 16 characters or equal to each other (demos)
  -h, --help             show this help

Examples:
  CCWEB_GITEA_URL=https://gitea.example.com CCWEB_GITEA_TOKEN=… CCWEB_WEBHOOK_SECRET=… \\
  CCWEB_ADMIN_TOKEN=… ccweb-gitea serve
  ccweb-gitea serve --config /etc/ccweb-gitea/config.json
`,
  doctor: `Usage: ccweb-gitea doctor [--config PATH] [--repo OWNER/NAME] [--skip CHECKS] [--only CHECKS] [--allow-weak-secrets] [--json]

Checks the setup with the same configuration and the same rules as serve, and prints one line per check:
  ok|warn|fail|skip  <check>  <detail>  → <fix>
Every setup serve refuses to start with fails a check; what serve only warns about warns. Secrets
are never printed. The checks, in order:
${doctorChecksHelp()}

Options:
  --config PATH          as for serve
  --repo OWNER/NAME      also check the token can read this repository's collaborators
  --skip CHECKS          comma-separated checks to leave out, e.g. codex,gitea-mcp
  --only CHECKS          run only these, e.g. config,data-dir (the systemd unit's ExecStartPre)
  --allow-weak-secrets   as for serve: weak secrets warn instead of failing
  --json                 one JSON object per check instead of text
  -h, --help             show this help

Exit code 0 when no check failed (warnings allowed), 1 otherwise.

Examples:
  ccweb-gitea doctor
  ccweb-gitea doctor --repo acme/widget
  ccweb-gitea doctor --skip codex --json
`,
  demo: `Usage: ccweb-gitea demo [--once] [--gitea real|double] [--port N] [--gitea-port N] [--model-port N] [--nodes 1|2|3]

Starts a world of its own on 127.0.0.1 — a real Gitea (built from its Go module once per machine,
about 4 minutes), the real Codex app-server driven by a scripted model, the official gitea-mcp — and
the service, posts a few comments as users would and prints each task's timeline, the resulting
comments and pull requests with their links, and a summary of each task's outcome. Then it keeps
running and prints a login for alice to see it all in Gitea's own pages and comment yourself.
Everything it writes goes to one temporary folder, removed when it ends (Ctrl-C too). gitea-mcp is
built once per machine with Go; where the Go module proxy does not serve it, set
CCWEB_GITEA_MCP_SOURCE to its pinned source archive.

Options:
  --once             exit after the comments were answered (exit 1 if some task did not finish)
  --gitea KIND       real (the default) or double: the Gitea double, an API without pages, chosen by
                     itself (saying so) where Go is missing and no Gitea build is cached
  --port N           the service's port (else CCWEB_PORT, else a free one)
  --gitea-port N     Gitea's port (else DEMO_GITEA_PORT, else a free one)
  --model-port N     the scripted model's port (else DEMO_MODEL_PORT, else a free one)
  --nodes N          N nodes on one throwaway PostgreSQL (Debian's postgresql package), on the Gitea
                     double, every node alike (any of them takes webhooks and runs tasks); after the
                     comments node 1 stops and node 2 answers one more (default 1: the embedded store)
  -h, --help         show this help

Examples:
  ccweb-gitea demo --once
  npm run demo -- --once --gitea double
  npm run demo -- --once --nodes 2
  npm run demo -- --port 8080 --gitea-port 3000
`,
  visualize: `Usage: ccweb-gitea visualize [OUT_DIR]

Writes every state machine (task, repository lock, session, reply verifier, app-server) as Stately
code, Mermaid and SVG into OUT_DIR (default visualizer/exports) and prints the files written.

Examples:
  ccweb-gitea visualize
  ccweb-gitea visualize /tmp/machines
`,
  'export-audit': `Usage: ccweb-gitea export-audit [--data-dir DIR] [--task ID] [--from TIME] [--to TIME] [--out FILE]

Prints the audit history (every transition, webhook decision, operator action and alert) as
NDJSON, one event per line in sequence order. Reads the store's files directly: no lock is
taken and nothing is written, so it works beside a running service or on a backup copy.

Options:
  --data-dir DIR   the service's data directory (default $CCWEB_DATA_DIR, else ./data)
  --task ID        only events of this task
  --from TIME      only events at or after TIME (ISO-8601, e.g. 2026-05-01 or 2026-05-01T12:00:00Z)
  --to TIME        only events at or before TIME
  --out FILE       write to FILE instead of standard output
  -h, --help       show this help

Examples:
  ccweb-gitea export-audit --data-dir /var/lib/ccweb-gitea > audit.ndjson
  ccweb-gitea export-audit --task gitea-task-0123456789abcdef01234567
  ccweb-gitea export-audit --from 2026-05-01 --to 2026-05-31T23:59:59Z --out may.ndjson
`,
  'migrate-store': `Usage: ccweb-gitea migrate-store [--config PATH]

Moves the store an earlier version left into this version's, every record (archived ones included)
and the whole audit history with its sequence numbers, read back and compared before it is reported
done. Stop the service first (every node of it); run it with the service's configuration.
  Without CCWEB_DATABASE_URL: the data directory's journal store into SQLite, in place (the journal's
  files are kept beside it).
  With CCWEB_DATABASE_URL (or CCWEB_DATABASE_URL_FILE), a database an earlier version used: its store
  into this version's tables, in place and in one transaction (the earlier tables are kept in the
  schema ccweb_before_sql). Otherwise the embedded store of the data directory into that database,
  which must be empty; the embedded store is left as it was.

Options:
  --config PATH    JSON file of camelCase keys, as for serve
  -h, --help       show this help

Example:
  systemctl stop ccweb-gitea
  CCWEB_DATABASE_URL_FILE=/run/secrets/database_url ccweb-gitea migrate-store
`,
  'config-reference': `Usage: ccweb-gitea config-reference

Prints every configuration key (environment name, file key, default, accepted values, notes) as
the Markdown table of docs/configuration.md.

Example:
  ccweb-gitea config-reference > /tmp/keys.md
`,
  help: `Usage: ccweb-gitea help [COMMAND]

Shows the overview, or the help of COMMAND.

Example:
  ccweb-gitea help doctor
`,
};

export const COMMANDS = Object.keys(COMMAND_HELP);
