// A surviving mutant's identity in test/mutation/survivors.json, independent of line numbers: the file,
// the mutator, the source text it replaces, its replacement and the source line it starts on (each with
// whitespace collapsed, long text shortened in the middle), plus " #n" for the n-th such mutant in the
// file (n ≥ 2, only when the same line occurs twice). Code added, removed or moved elsewhere in the
// file keeps every key; only an edit of the mutant's own line (or of an identical line earlier in the
// file) changes it.
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';

const MAX = 72;
const shorten = (text) => {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length <= MAX ? flat : `${flat.slice(0, 48)} … ${flat.slice(-20)}`;
};

/** Offset in `text` of a 1-based { line, column } (Stryker's report positions). */
function offsetOf(lineStarts, { line, column }) {
  return lineStarts[line - 1] + column - 1;
}

function lineStartsOf(text) {
  const starts = [0];
  for (let i = 0; i < text.length; i++) if (text[i] === '\n') starts.push(i + 1);
  return starts;
}

/**
 * Keys for Stryker mutant results (`fileName`, `mutatorName`, `replacement`, 1-based `location`).
 * Pass every mutant of a file (not only the survivors): the occurrence index counts them all.
 * `textOf(fileName)` reads the mutated file as it was when Stryker ran (default: from disk).
 * Returns a Map from mutant object to key.
 */
export function mutantKeys(mutants, { cwd = process.cwd(), textOf = (f) => readFileSync(f, 'utf8') } = {}) {
  const keys = new Map();
  const byFile = new Map();
  for (const m of mutants) {
    if (!byFile.has(m.fileName)) byFile.set(m.fileName, []);
    byFile.get(m.fileName).push(m);
  }
  for (const [fileName, list] of byFile) {
    const text = textOf(fileName);
    const starts = lineStartsOf(text);
    const file = relative(cwd, fileName);
    const seen = new Map();
    const ordered = [...list].sort(
      (a, b) =>
        a.location.start.line - b.location.start.line ||
        a.location.start.column - b.location.start.column ||
        a.location.end.line - b.location.end.line ||
        a.location.end.column - b.location.end.column,
    );
    for (const m of ordered) {
      const original = text.slice(offsetOf(starts, m.location.start), offsetOf(starts, m.location.end));
      const line = text.slice(starts[m.location.start.line - 1], starts[m.location.start.line] ?? text.length);
      const base = `${file} ${m.mutatorName}: ${shorten(original)} → ${shorten(m.replacement ?? '')} @ ${shorten(line)}`;
      const n = (seen.get(base) ?? 0) + 1;
      seen.set(base, n);
      keys.set(m, n === 1 ? base : `${base} #${n}`);
    }
  }
  return keys;
}
