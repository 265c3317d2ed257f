// The wall between the machines and the code around them: what a state means lives in its machine
// (machines/), so no code in src/ decides anything by comparing a state with a state's name written
// out as a string. It reads the machine instead: a tag (`taskStateHas(state, 'stopping')`,
// `appServerStateHas`), a predicate the machine's module exports (`isLeaseHeld`, `sessionStateTakes`,
// `replyVerdictOf`), or, where display or query code names one state, the
// machine's own list (`TASK_STATE.queued`), so that a renamed or retagged state is followed everywhere.
//
// The scan parses every .ts file under src/ (src/api/ included) with TypeScript's own parser and finds
// a string literal that is the name of a state of one of the five machines compared with something
// named `state` or `…State` (`t.state`, `n.toState`, `state`): `===`, `!==`, `==`, `!=`, a `case` of a
// `switch` on it, and `.includes` on a list of state names. Records that are not machine states may
// share a name with one (a node row is `running`): those few are allowed below, each with why, and an
// allowance that no longer matches anything fails the test, so the list stays true.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { appServerMachine } from '../../machines/app-server.js';
import { replyVerifierMachine } from '../../machines/reply-verifier.js';
import { repoLockMachine } from '../../machines/repo-lock.js';
import { sessionMachine } from '../../machines/session.js';
import { TASK_STATES, taskMachine } from '../../machines/task-lifecycle.js';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** Comparisons of a record that is not a machine's with a literal that happens to name a machine state. */
const ALLOWED: { file: string; literal: string; why: string }[] = [
  {
    file: 'src/service/create-service.ts',
    literal: 'running',
    why: "a `nodes` row's state (running | stopped: whether the node's process is up), not the task machine's `running`",
  },
  {
    file: 'src/store/sql/nodes.ts',
    literal: 'running',
    why: "a `nodes` row's state (running | stopped: whether the node's process is up), not the task machine's `running`",
  },
];

const FIX =
  'read the machine instead: a tag (taskStateHas / appServerStateHas; add one to the state in machines/ if the role is missing), ' +
  'a predicate exported from machines/ (isLeaseHeld, isLockStateLeased, sessionStateTakes, isSessionClosed, taskStateTakes, ' +
  'replyVerdictOf), or, for display or query code naming one state, TASK_STATE.<name>';

interface StateNodeLike {
  key: string;
  states: Record<string, StateNodeLike>;
}

/** Every state name of the five machines, nested states included, read from the machines themselves. */
function machineStateNames(): Set<string> {
  const names = new Set<string>(TASK_STATES);
  const walk = (node: StateNodeLike) => {
    for (const child of Object.values(node.states)) {
      names.add(child.key);
      walk(child);
    }
  };
  for (const m of [taskMachine, repoLockMachine, sessionMachine, replyVerifierMachine, appServerMachine]) walk(m.root as unknown as StateNodeLike);
  return names;
}

export interface StateLiteral {
  file: string;
  line: number;
  literal: string;
  text: string;
}

const EQUALITY = new Set([
  ts.SyntaxKind.EqualsEqualsEqualsToken,
  ts.SyntaxKind.ExclamationEqualsEqualsToken,
  ts.SyntaxKind.EqualsEqualsToken,
  ts.SyntaxKind.ExclamationEqualsToken,
]);

function unwrap(e: ts.Expression): ts.Expression {
  while (ts.isParenthesizedExpression(e) || ts.isNonNullExpression(e) || ts.isAsExpression(e) || ts.isSatisfiesExpression(e)) e = e.expression;
  return e;
}

/** `state`, `toState`, `x.state`, `x?.fromState`, `(await f()).state`: something that holds a state. */
function namesState(e: ts.Expression): boolean {
  const u = unwrap(e);
  if (ts.isIdentifier(u)) return /state$/i.test(u.text);
  if (ts.isPropertyAccessExpression(u)) return /state$/i.test(u.name.text);
  return false;
}

/** A list of states: `STATES`, `x.states`, `RUNNING_STATES`. */
function namesStates(e: ts.Expression): boolean {
  const u = unwrap(e);
  if (ts.isIdentifier(u)) return /states$/i.test(u.text);
  if (ts.isPropertyAccessExpression(u)) return /states$/i.test(u.name.text);
  return false;
}

function literalOf(e: ts.Expression | undefined): string | null {
  if (!e) return null;
  const u = unwrap(e);
  return ts.isStringLiteral(u) || ts.isNoSubstitutionTemplateLiteral(u) ? u.text : null;
}

/** The comparisons of a state with a state name written out in `source`. */
export function stateLiterals(file: string, source: string, names: ReadonlySet<string>): StateLiteral[] {
  const sf = ts.createSourceFile(file, source, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const found: StateLiteral[] = [];
  const hit = (node: ts.Node, literal: string) =>
    found.push({ file, line: sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1, literal, text: node.getText(sf).split('\n')[0]!.slice(0, 100) });
  const stateName = (e: ts.Expression | undefined) => {
    const l = literalOf(e);
    return l !== null && names.has(l) ? l : null;
  };
  const visit = (node: ts.Node) => {
    if (ts.isBinaryExpression(node) && EQUALITY.has(node.operatorToken.kind)) {
      for (const [lit, other] of [
        [node.left, node.right],
        [node.right, node.left],
      ] as const) {
        const l = stateName(lit);
        if (l !== null && namesState(other)) hit(node, l);
      }
    }
    if (ts.isSwitchStatement(node) && namesState(node.expression)) {
      for (const clause of node.caseBlock.clauses) {
        const l = ts.isCaseClause(clause) ? stateName(clause.expression) : null;
        if (l !== null) hit(clause, l);
      }
    }
    if (ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression) && node.expression.name.text === 'includes') {
      const list = unwrap(node.expression.expression);
      const arg = node.arguments[0];
      // ['queued', 'retry_wait'].includes(t.state)
      if (arg && ts.isArrayLiteralExpression(list) && namesState(arg)) {
        for (const el of list.elements) {
          const l = ts.isSpreadElement(el) ? null : stateName(el);
          if (l !== null) hit(node, l);
        }
      }
      // RUNNING_STATES.includes('running')
      const l = stateName(arg);
      if (l !== null && namesStates(list)) hit(node, l);
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return found;
}

function tsFiles(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, e.name);
    if (e.isDirectory()) out.push(...tsFiles(path));
    else if (e.name.endsWith('.ts') && !e.name.endsWith('.d.ts')) out.push(path);
  }
  return out;
}

const key = (file: string, literal: string) => `${file} '${literal}'`;

describe('no state literal outside machines/', () => {
  const names = machineStateNames();
  const files = tsFiles(join(repoRoot, 'src'));
  const found = files.flatMap((path) => stateLiterals(relative(repoRoot, path), readFileSync(path, 'utf8'), names));
  const counts = new Map<string, number>();
  for (const f of found) counts.set(key(f.file, f.literal), (counts.get(key(f.file, f.literal)) ?? 0) + 1);

  it('reads the state names of all five machines, nested states included', () => {
    for (const s of TASK_STATES) expect(names).toContain(s);
    // One of each other machine, so a machine left out of the walk is seen.
    for (const s of ['held', 'free', 'turn_in_flight', 'awaiting_retry_turn', 'restarting']) expect(names).toContain(s);
    expect(files.length).toBeGreaterThan(300);
    expect(files.map((f) => relative(repoRoot, f))).toContain('src/api/task-queries.ts');
  });

  it('src/ compares no state with a state name written out (but the allowed)', () => {
    const allowed = new Set(ALLOWED.map((a) => key(a.file, a.literal)));
    const offending = found
      .filter((f) => !allowed.has(key(f.file, f.literal)))
      .map((f) => `${f.file}:${f.line}: ${f.text}`);
    expect(offending, `a state compared with its name written out; ${FIX}:\n${offending.join('\n')}`).toEqual([]);
  });

  it('every allowance still matches a comparison (the list stays true)', () => {
    const stale = ALLOWED.filter((a) => !counts.has(key(a.file, a.literal))).map((a) => key(a.file, a.literal));
    expect(stale, `allowed but no longer found: drop from ALLOWED:\n${stale.join('\n')}`).toEqual([]);
  });
});

describe('the scan fires on a deliberate breach', () => {
  const names = new Set(['queued', 'running', 'held', 'idle']);
  const scan = (source: string) => stateLiterals('src/x.ts', source, names).map((f) => `${f.line} ${f.literal}`);

  it('finds each form of comparison, on either side, through parentheses, `!`, `?.` and `as`', () => {
    const source = [
      "if (t.state === 'queued') go();",
      "if ('running' !== task.state) go();",
      "if (n.toState == 'held' || n?.fromState != 'idle') go();",
      "if ((await get()).state! === ('queued' as string)) go();",
      'switch (s.state) {',
      "  case 'idle': break;",
      "  case 'other': break;",
      '}',
      "if (['queued', 'running'].includes(state)) go();",
      "if (RUNNING_STATES.includes('running')) go();",
    ].join('\n');
    expect(scan(source)).toEqual(['1 queued', '2 running', '3 held', '3 idle', '4 queued', '6 idle', '9 queued', '9 running', '10 running']);
  });

  it('leaves alone what is not a state compared with a state name', () => {
    const source = [
      "if (pr.state === 'open') go();",
      "if (x.kind === 'queued') go();",
      "if (t.state === TASK_STATE.queued) go();",
      "const s = { state: 'queued' };",
      "switch (plan.kind) { case 'idle': break; }",
      "if (['queued'].includes(kind)) go();",
      '// t.state === \'queued\'',
    ].join('\n');
    expect(scan(source)).toEqual([]);
  });
});
