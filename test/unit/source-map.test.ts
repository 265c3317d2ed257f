// src/README.md is the map of the source tree: every folder of src/ has its row and its place
// in the sketch, and the map names no folder that is gone, so the map cannot drift from the tree
// unnoticed; nor can README.md's sketch name a folder that is gone. That the map's arrows
// hold is the wall test's (scripts/folder-walls.mjs).
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = join(import.meta.dirname, '../../src');
const ROOT = join(SRC, '..');

/** The folders a Markdown file's sketch (its first code block drawn with arrows, `──▶`) names, as `name/`. */
function foldersInSketch(markdown: string): string[] {
  const blocks: string[] = [];
  let open: string[] | null = null;
  for (const line of markdown.split('\n')) {
    if (line.startsWith('```')) {
      if (open) blocks.push(open.join('\n'));
      open = open ? null : [];
    } else open?.push(line);
  }
  const sketch = blocks.find((block) => block.includes('──▶'));
  if (!sketch) throw new Error('no sketch (a ``` code block drawn with ──▶) found');
  return [...new Set([...sketch.matchAll(/(?<![\w./-])([a-z][a-z0-9-]*)\//g)].map((m) => m[1]!))].sort();
}

function srcFolders(): string[] {
  return readdirSync(SRC, { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name).sort();
}

function foldersInMap(markdown: string): string[] {
  return [...markdown.matchAll(/^\| `([a-z][a-z0-9-]*)\/` \|/gm)].map((m) => m[1]!);
}

describe('src/README.md', () => {
  it('has one row per folder of src/, and no row for a folder that does not exist', () => {
    const tree = srcFolders();
    const rows = foldersInMap(readFileSync(join(SRC, 'README.md'), 'utf8'));
    expect(new Set(rows).size, 'a folder has two rows').toBe(rows.length);
    expect([...rows].sort()).toEqual(tree);
  });

  it('its sketch places every folder of src/ and names no other', () => {
    expect(foldersInSketch(readFileSync(join(SRC, 'README.md'), 'utf8'))).toEqual(srcFolders());
  });
});

describe("README.md's sketch", () => {
  it('names only folders that exist (in src/, or at the top like visualizer/)', () => {
    const named = foldersInSketch(readFileSync(join(ROOT, 'README.md'), 'utf8'));
    const tree = new Set([...srcFolders(), ...readdirSync(ROOT, { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name)]);
    expect(named.length).toBeGreaterThan(10);
    expect(named.filter((f) => !tree.has(f))).toEqual([]);
  });
});
