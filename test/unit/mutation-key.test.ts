// The survivors list (test/mutation/survivors.json) must stay valid while code moves: a mutant's key
// (scripts/mutant-key.mjs) must not depend on where in the file the mutated code is.
import { describe, expect, it } from 'vitest';
// @ts-expect-error — a plain .mjs script without type declarations
import { mutantKeys } from '../../scripts/mutant-key.mjs';

interface Pos { line: number; column: number }
const at = (text: string, needle: string, nth = 1): { start: Pos; end: Pos } => {
  let offset = -1;
  for (let i = 0; i < nth; i++) offset = text.indexOf(needle, offset + 1);
  if (offset < 0) throw new Error(`${needle} not in text`);
  const pos = (o: number): Pos => {
    const before = text.slice(0, o).split('\n');
    return { line: before.length, column: before.at(-1)!.length + 1 };
  };
  return { start: pos(offset), end: pos(offset + needle.length) };
};
const keysOf = (text: string, mutants: Array<{ needle: string; nth?: number; mutatorName: string; replacement: string }>) => {
  const ms = mutants.map((m) => ({ fileName: '/repo/src/a.ts', mutatorName: m.mutatorName, replacement: m.replacement, location: at(text, m.needle, m.nth) }));
  const keys: Map<unknown, string> = mutantKeys(ms, { cwd: '/repo', textOf: () => text });
  return ms.map((m) => keys.get(m)!);
};

describe('mutant keys (survivors.json)', () => {
  const file = "const a = 1;\nif (x === 'pull_request') go();\n";
  it('name the file, mutator, original text, replacement and the line, without a line number', () => {
    const [key] = keysOf(file, [{ needle: "x === 'pull_request'", mutatorName: 'ConditionalExpression', replacement: 'true' }]);
    expect(key).toBe("src/a.ts ConditionalExpression: x === 'pull_request' → true @ if (x === 'pull_request') go();");
  });

  it('stay the same when code is added above or the statement is re-indented', () => {
    const moved = "import b from 'b';\n\nconst a = 1;\nfunction f() {\n      if (x === 'pull_request') go();\n}\n";
    const m = [{ needle: "x === 'pull_request'", mutatorName: 'ConditionalExpression', replacement: 'true' }];
    expect(keysOf(moved, m)).toEqual(keysOf(file, m));
  });

  it('tell identical lines apart by occurrence, and different replacements by replacement', () => {
    const twice = "if (x === 'pull_request') go();\nif (x === 'pull_request') go();\n";
    const keys = keysOf(twice, [
      { needle: "x === 'pull_request'", nth: 2, mutatorName: 'ConditionalExpression', replacement: 'true' },
      { needle: "x === 'pull_request'", nth: 1, mutatorName: 'ConditionalExpression', replacement: 'true' },
      { needle: "x === 'pull_request'", nth: 1, mutatorName: 'ConditionalExpression', replacement: 'false' },
    ]);
    expect(keys[1]).toMatch(/go\(\);$/);
    expect(keys[0]).toBe(`${keys[1]} #2`);
    expect(new Set(keys).size).toBe(3);
  });

  it('shorten long mutated text in the middle and collapse its whitespace', () => {
    const body = `{\n  ${'doSomething();\n  '.repeat(10)}}`;
    const text = `function f() ${body}\n`;
    const [key] = keysOf(text, [{ needle: body, mutatorName: 'BlockStatement', replacement: '{}' }]);
    expect(key).toContain('BlockStatement: { doSomething(); doSomething();');
    expect(key).toContain(' … ');
    expect(key).not.toContain('\n');
  });
});
