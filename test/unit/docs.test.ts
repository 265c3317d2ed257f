// The documents: the README stays a short front page (the manual is docs/), and every relative link and
// anchor in README.md and docs/*.md leads somewhere: the file exists, and a `#anchor` is the slug of one of
// its headings (GitHub's and Gitea's rule: lower case, punctuation dropped, spaces to hyphens, repeats
// numbered). Links are read with markdown-it, the parser the service itself uses, so code is not mistaken
// for a link.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import MarkdownIt from 'markdown-it';
import { describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..', '..');
const md = new MarkdownIt({ html: true });
type Token = ReturnType<typeof md.parse>[number];

const DOCUMENTS = ['README.md', ...readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];

/** The text a heading shows: its inline content without markup. */
function shownText(inline: Token): string {
  return (inline.children ?? []).map((c: Token) => (c.type === 'text' || c.type === 'code_inline' ? c.content : '')).join('');
}

/** GitHub's heading slug (github-slugger): what `#…` links to. */
function slugsOf(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const slugs = new Set<string>();
  const tokens = md.parse(markdown, {});
  tokens.forEach((t, i) => {
    if (t.type !== 'heading_open') return;
    const base = shownText(tokens[i + 1]!)
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
      .replace(/ /g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    slugs.add(n === 0 ? base : `${base}-${n}`);
  });
  return slugs;
}

/** Every link and image target of a Markdown text, with the line it is on. */
function targetsOf(markdown: string): Array<{ target: string; line: number }> {
  const out: Array<{ target: string; line: number }> = [];
  for (const block of md.parse(markdown, {})) {
    for (const t of block.children ?? []) {
      const target = t.type === 'link_open' ? t.attrGet('href') : t.type === 'image' ? t.attrGet('src') : null;
      if (typeof target === 'string') out.push({ target, line: (block.map?.[0] ?? 0) + 1 });
    }
  }
  return out;
}

/** What is wrong with each relative link of `file` (repository-relative), as `file:line → target: why`. */
function brokenLinks(file: string): string[] {
  const text = readFileSync(join(root, file), 'utf8');
  const broken: string[] = [];
  for (const { target, line } of targetsOf(text)) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // http:, https:, mailto:, file: …
    const [pathPart, anchor] = target.split('#', 2) as [string, string | undefined];
    const resolved = pathPart === '' ? join(root, file) : join(root, dirname(file), decodeURIComponent(pathPart));
    const where = `${file}:${line} → ${target}`;
    if (!existsSync(resolved)) {
      broken.push(`${where}: no such file (${relative(root, resolved)})`);
      continue;
    }
    if (anchor === undefined) continue;
    if (statSync(resolved).isDirectory() || !resolved.endsWith('.md')) {
      broken.push(`${where}: an anchor into something that is not a Markdown file`);
      continue;
    }
    if (!slugsOf(readFileSync(resolved, 'utf8')).has(anchor)) broken.push(`${where}: no heading with the slug #${anchor}`);
  }
  return broken;
}

describe('the documents', () => {
  it('the README is a front page: at most 150 lines', () => {
    const lines = readFileSync(join(root, 'README.md'), 'utf8').trimEnd().split('\n').length;
    expect(lines).toBeLessThanOrEqual(150);
  });

  it('read links and headings as a Markdown renderer does (the check is not blind)', () => {
    expect([...slugsOf("# A `b`: c's d\n## Again\n## Again\n### 1. Install it (Gitea 1.26.3)\n")]).toEqual([
      'a-b-cs-d',
      'again',
      'again-1',
      '1-install-it-gitea-1263',
    ]);
    expect(targetsOf('See [x](a.md#b) and ![i](p.png).\n\n```\n[not](a link)\n```\n`[nor](this)`\n').map((t) => t.target)).toEqual(['a.md#b', 'p.png']);
  });

  it('every relative link and anchor in README.md and docs/*.md resolves', () => {
    expect(DOCUMENTS).toContain('docs/getting-started.md');
    const links = DOCUMENTS.flatMap((f) => targetsOf(readFileSync(join(root, f), 'utf8')));
    expect(links.length).toBeGreaterThan(50);
    expect(DOCUMENTS.flatMap(brokenLinks)).toEqual([]);
  });
});
