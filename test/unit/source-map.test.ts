// src/README.md is the map of the source tree (issue 21): every folder of src/ has its row, and the map
// names no folder that is gone, so the map cannot drift from the tree unnoticed.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = join(import.meta.dirname, '../../src');

function foldersInMap(markdown: string): string[] {
  return [...markdown.matchAll(/^\| `([a-z][a-z0-9-]*)\/` \|/gm)].map((m) => m[1]!);
}

describe('src/README.md', () => {
  it('has one row per folder of src/, and no row for a folder that does not exist', () => {
    const tree = readdirSync(SRC, { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name).sort();
    const rows = foldersInMap(readFileSync(join(SRC, 'README.md'), 'utf8'));
    expect(new Set(rows).size, 'a folder has two rows').toBe(rows.length);
    expect([...rows].sort()).toEqual(tree);
  });
});
