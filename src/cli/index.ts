// The `ccweb-gitea` command line (bin/ccweb-gitea.js runs this file through tsx). Parsing is
// node:util's parseArgs, strict: an unknown option or command is a usage error (exit 2 + help).
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { resolve } from 'node:path';
import { nearestName } from '../config/nearest-name.js';
import { configReferenceTable } from './config-reference.js';
import { DEMO_ARG_OPTIONS, parseDemoArgs } from './demo-args.js';
import { DOCTOR_CHECKS, formatCheck, runDoctor } from './doctor.js';
import { exportAudit } from './export-audit.js';
import { COMMAND_HELP, COMMANDS, MAIN_HELP } from './help.js';
import { serve } from './serve.js';
import { UsageError } from './usage-error.js';
import { VERSION } from './version.js';

export interface CliIo {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  env: Readonly<Record<string, string | undefined>>;
  cwd: string;
}

/** Exit code, or null for a command that keeps running (serve, demo). */
export type CliResult = number | null;

type Options = NonNullable<ParseArgsConfig['options']>;

function parse(command: string, args: readonly string[], options: Options, positionals = 0) {
  let parsed;
  try {
    parsed = parseArgs({ args: [...args], options: { ...options, help: { type: 'boolean', short: 'h' } }, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError(`${command}: ${(err as Error).message}`);
  }
  if (parsed.positionals.length > positionals) throw new UsageError(`${command}: unexpected argument ${parsed.positionals[positionals]!}`);
  return parsed as { values: Record<string, string | boolean | undefined>; positionals: string[] };
}

const str = (v: string | boolean | undefined): string | undefined => (typeof v === 'string' ? v : undefined);

/** `unknown command docter: did you mean doctor?` */
function unknownCommand(command: string): string {
  const near = nearestName(command, [...COMMANDS, 'version']);
  return `unknown command ${command}${near ? `: did you mean ${near}?` : ''}`;
}

async function dispatch(command: string, args: readonly string[], io: CliIo): Promise<CliResult> {
  const out = (s: string) => io.stdout.write(s.endsWith('\n') ? s : `${s}\n`);
  switch (command) {
    case 'serve': {
      const p = parse(command, args, { config: { type: 'string' }, 'allow-weak-secrets': { type: 'boolean' } });
      if (p.values['help']) return out(COMMAND_HELP['serve']!), 0;
      await serve(args);
      return null;
    }
    case 'demo': {
      const p = parse(command, args, { ...DEMO_ARG_OPTIONS });
      if (p.values['help']) return out(COMMAND_HELP['demo']!), 0;
      const options = parseDemoArgs(args.filter((a) => a !== '-h' && a !== '--help'), io.env);
      const { runDemo } = await import('./demo.js');
      await runDemo(options);
      return null;
    }
    case 'doctor': {
      const p = parse(command, args, {
        config: { type: 'string' },
        repo: { type: 'string' },
        skip: { type: 'string' },
        only: { type: 'string' },
        json: { type: 'boolean' },
        'allow-weak-secrets': { type: 'boolean' },
      });
      if (p.values['help']) return out(COMMAND_HELP['doctor']!), 0;
      const json = p.values['json'] === true;
      const repo = str(p.values['repo']);
      const list = (key: 'skip' | 'only') => (str(p.values[key]) ?? '').split(',').map((s) => s.trim()).filter(Boolean);
      // --only: the checks a unit's ExecStartPre may stop a start for (configuration, data directory),
      // written as what to keep, so a check added later is left out rather than suddenly blocking starts.
      const only = list('only');
      for (const key of ['only', 'skip'] as const) {
        const unknown = list(key).filter((c) => !(DOCTOR_CHECKS as readonly string[]).includes(c));
        const near = unknown.length === 1 ? nearestName(unknown[0]!, DOCTOR_CHECKS) : undefined;
        if (unknown.length > 0) throw new UsageError(`doctor: --${key} ${unknown.join(',')}: no such check${near ? ` (did you mean ${near}?)` : ''} (checks: ${DOCTOR_CHECKS.join(', ')})`);
      }
      const skip = new Set([...list('skip'), ...(only.length > 0 ? DOCTOR_CHECKS.filter((c) => !only.includes(c)) : [])]);
      const results = await runDoctor({
        env: io.env,
        argv: args,
        cwd: io.cwd,
        ...(repo ? { repo } : {}),
        skip,
        allowWeakSecrets: p.values['allow-weak-secrets'] === true,
        onResult: (r) => out(json ? JSON.stringify(r) : formatCheck(r)),
      });
      const failed = results.filter((r) => r.status === 'fail').length;
      if (!json) out(failed === 0 ? '\nno failed checks' : `\n${failed} check(s) failed`);
      return failed === 0 ? 0 : 1;
    }
    case 'visualize': {
      const p = parse(command, args, {}, 1);
      if (p.values['help']) return out(COMMAND_HELP['visualize']!), 0;
      const { writeExports } = await import('../../visualizer/export-machines.js');
      const dir = resolve(io.cwd, p.positionals[0] ?? resolve(import.meta.dirname, '../../visualizer/exports'));
      for (const file of await writeExports(dir)) out(file);
      return 0;
    }
    case 'export-audit': {
      const p = parse(command, args, {
        'data-dir': { type: 'string' },
        task: { type: 'string' },
        from: { type: 'string' },
        to: { type: 'string' },
        out: { type: 'string' },
      });
      if (p.values['help']) return out(COMMAND_HELP['export-audit']!), 0;
      const dataDir = resolve(io.cwd, str(p.values['data-dir']) ?? io.env['CCWEB_DATA_DIR'] ?? './data');
      const o = (k: string) => str(p.values[k]);
      const n = await exportAudit(
        {
          dataDir,
          ...(o('task') ? { taskId: o('task')! } : {}),
          ...(o('from') ? { from: o('from')! } : {}),
          ...(o('to') ? { to: o('to')! } : {}),
          ...(o('out') ? { out: resolve(io.cwd, o('out')!) } : {}),
        },
        io.stdout,
      );
      io.stderr.write(`${n} audit event(s)\n`);
      return 0;
    }
    case 'migrate-store': {
      const p = parse(command, args, { config: { type: 'string' } });
      if (p.values['help']) return out(COMMAND_HELP['migrate-store']!), 0;
      const { migrateStore } = await import('./migrate-store.js');
      return migrateStore({ env: io.env, argv: args, cwd: io.cwd, out, err: (s) => io.stderr.write(`${s}\n`) });
    }
    case 'config-reference': {
      const p = parse(command, args, {});
      if (p.values['help']) return out(COMMAND_HELP['config-reference']!), 0;
      out(configReferenceTable());
      return 0;
    }
    case 'help': {
      const topic = args[0];
      if (topic === undefined) return out(MAIN_HELP), 0;
      if (topic === '--help' || topic === '-h') return out(COMMAND_HELP['help']!), 0;
      if (!COMMAND_HELP[topic]) throw new UsageError(`help: ${unknownCommand(topic)}`);
      return out(COMMAND_HELP[topic]), 0;
    }
    default:
      throw new UsageError(unknownCommand(command));
  }
}

/** Runs one command line (without `node` and the script). Never exits the process itself. */
export async function runCli(argv: readonly string[], io: CliIo): Promise<CliResult> {
  const [first, ...rest] = argv;
  if (first === undefined) {
    io.stderr.write(MAIN_HELP);
    return 2;
  }
  if (first === '--help' || first === '-h') {
    io.stdout.write(MAIN_HELP);
    return 0;
  }
  if (first === '--version' || first === '-V' || first === 'version') {
    io.stdout.write(`ccweb-gitea ${VERSION}\n`);
    return 0;
  }
  try {
    return await dispatch(first, rest, io);
  } catch (err) {
    if (!(err instanceof UsageError)) {
      io.stderr.write(`ccweb-gitea ${first}: ${err instanceof Error ? err.message : String(err)}\n`);
      return 1;
    }
    io.stderr.write(`ccweb-gitea: ${err.message}\n\n`);
    io.stderr.write(COMMANDS.includes(first) ? COMMAND_HELP[first]! : MAIN_HELP);
    return 2;
  }
}

/** The process entry point (bin/ccweb-gitea.js). */
export async function main(argv: readonly string[]): Promise<void> {
  const code = await runCli(argv, { stdout: process.stdout, stderr: process.stderr, env: process.env, cwd: process.cwd() });
  if (code === null) return;
  // Flush first: a doctor run may leave an idle socket or child handle behind for a moment.
  process.stdout.write('', () => process.exit(code));
}
