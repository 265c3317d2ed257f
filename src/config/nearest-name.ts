// "Did you mean …?" for a mistyped name (a configuration key, a command, a doctor check): the
// nearest known name by edit distance, when it is near enough to be a typo.

/** Levenshtein distance: the fewest single-character insertions, deletions and substitutions. */
export function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = row;
  }
  return prev[b.length]!;
}

/** The known name nearest to `name`, or undefined when none is a few edits away. */
export function nearestName(name: string, known: Iterable<string>): string | undefined {
  let best: string | undefined;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const candidate of known) {
    const d = editDistance(candidate, name);
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  // A typo is a few edits away; beyond that a suggestion would only confuse.
  return bestDistance <= Math.max(2, Math.floor(name.length / 5)) ? best : undefined;
}
