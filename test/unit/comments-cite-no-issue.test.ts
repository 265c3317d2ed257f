// A comment says why, or states an invariant; the history of a change belongs to git. So no comment in
// src/, machines/, visualizer/, scripts/, bench/, deploy/, .ci/ or the build files at the root cites
// one of the project's own issues ("issue 30", "Issue #9", "issues 29 and 30"): a reader cannot act
// on the number, and the sentence around it is usually history. Only comments are read (Markdown
// files whole): a string the code prints, stores or matches may say anything. Generated files are
// left out. Gitea data a comment describes (the demo's seeded `issue #1`) is not a citation: each such
// mention is allowed below by file and exact text, and an allowance that matches nothing fails too.
// Other projects' issues are written `owner/repo#N` (go-gitea/gitea#36444), which is not matched.
import { readdirSync, readFileSync } from 'node:fs';
import { basename, extname, join } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '../..');

/** Where comments are read: these folders, and the files at the root that have comments. */
const FOLDERS = ['src', 'machines', 'visualizer', 'scripts', 'bench', 'deploy', '.ci'];
/** Generated: their text is the generator's, not ours. */
const GENERATED = ['src/gitea/generated/', 'src/codex/protocol/', 'visualizer/exports/'];

/** A citation of an issue by number. */
const CITATION = /\bissues?[\s_-]*#?\d+/gi;

/** Gitea data that comments describe, by file: not the project's issues. */
const GITEA_DATA: ReadonlyArray<{ file: string; text: string }> = [
  { file: 'src/api/admin-page/security-panel.js', text: '`acme/widget issue #7 · comment 123`' },
  { file: 'src/demo/demo-world.ts', text: '`acme/widget`, issue #1, pull request #2' },
  { file: 'src/demo/gitea-double/sandbox.ts', text: '`acme/widget`, issue #1 and pull request #2' },
  { file: 'src/demo/real-gitea/seed.ts', text: 'issue #1 by alice' },
  { file: 'scripts/record-gitea-webhooks.ts', text: 'opens issue #7 and pull request #8' },
];

type Kind = 'script' | 'css' | 'html' | 'hash' | 'markdown';
interface Comment {
  /** Offset of the comment in its file. */
  pos: number;
  text: string;
}
interface Citation {
  file: string;
  line: number;
  citation: string;
  comment: string;
}

/** How a file's comments are written, or null for a file without comments (JSON, SVG, …). */
function kindOf(file: string, text: string): Kind | null {
  const ext = extname(file);
  if (/^\.[cm]?[jt]s$/.test(ext)) return 'script';
  if (ext === '.css') return 'css';
  if (ext === '.html') return 'html';
  if (ext === '.md') return 'markdown';
  if (['.sh', '.yaml', '.yml', '.service'].includes(ext) || basename(file) === 'Dockerfile') return 'hash';
  if (ext === '' && text.startsWith('#!')) return 'hash';
  return null;
}

/**
 * Every comment of a JavaScript or TypeScript file, from the parse tree: the comments before and after
 * each node and token, so a `//` inside a string, a template or a regular expression is never one.
 */
function scriptComments(file: string, text: string): Comment[] {
  const ext = extname(file);
  const scriptKind = ext.endsWith('ts') ? ts.ScriptKind.TS : ts.ScriptKind.JS;
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, false, scriptKind);
  const found = new Map<number, string>();
  const take = (ranges: ts.CommentRange[] | undefined) => {
    for (const r of ranges ?? []) found.set(r.pos, text.slice(r.pos, r.end));
  };
  const visit = (node: ts.Node) => {
    take(ts.getLeadingCommentRanges(text, node.pos));
    take(ts.getTrailingCommentRanges(text, node.end));
    for (const child of node.getChildren(source)) {
      // A JSDoc node lies inside its comment, which its parent's leading comments already hold.
      if (child.kind < ts.SyntaxKind.FirstJSDocNode || child.kind > ts.SyntaxKind.LastJSDocNode) visit(child);
    }
  };
  visit(source);
  return [...found].sort(([a], [b]) => a - b).map(([pos, body]) => ({ pos, text: body }));
}

function matches(text: string, pattern: RegExp): Comment[] {
  return [...text.matchAll(pattern)].map((m) => ({ pos: m.index, text: m[0] }));
}

/** `#` at the start of a line or after a blank, to the end of the line (shell, YAML, Dockerfile, systemd). */
function hashComments(text: string): Comment[] {
  return matches(text, /(?<=^|\s)#.*$/gm);
}

function commentsOf(file: string, text: string): Comment[] {
  switch (kindOf(file, text)) {
    case 'script':
      return scriptComments(file, text);
    case 'css':
      return matches(text, /\/\*[\s\S]*?\*\//g);
    case 'html':
      return matches(text, /<!--[\s\S]*?-->/g);
    case 'hash':
      return hashComments(text);
    case 'markdown':
      return [{ pos: 0, text }];
    default:
      return [];
  }
}

/** The citations in a file's comments, minus the Gitea data listed for that file. */
function citationsIn(file: string, text: string, allowed: ReadonlyArray<{ file: string; text: string }> = []): Citation[] {
  const out: Citation[] = [];
  // Most files mention no issue at all: only those are parsed.
  if (!new RegExp(CITATION.source, 'i').test(text)) return out;
  const allowances = allowed.filter((a) => a.file === file).map((a) => a.text);
  for (const comment of commentsOf(file, text)) {
    for (const m of comment.text.matchAll(CITATION)) {
      const at = comment.pos + m.index;
      // Allowed when the match lies inside one of the file's listed Gitea-data texts.
      const inData = allowances.some((a) => {
        for (let from = text.indexOf(a); from !== -1; from = text.indexOf(a, from + 1)) {
          if (from <= at && at + m[0].length <= from + a.length) return true;
        }
        return false;
      });
      if (inData) continue;
      const line = text.slice(0, at).split('\n').length;
      out.push({ file, line, citation: m[0], comment: text.split('\n')[line - 1]!.trim() });
    }
  }
  return out;
}

/** Every file under the checked folders (generated ones left out) and the root's files, repository-relative. */
function checkedFiles(): string[] {
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
      const path = `${dir}/${entry.name}`;
      if (entry.name === 'node_modules' || GENERATED.some((g) => `${path}/`.startsWith(g))) continue;
      if (entry.isDirectory()) walk(path);
      else if (entry.isFile()) files.push(path);
    }
  };
  for (const folder of FOLDERS) walk(folder);
  for (const entry of readdirSync(ROOT, { withFileTypes: true })) {
    // README.md is the user's guide, not a comment on code.
    if (entry.isFile() && entry.name !== 'README.md') files.push(entry.name);
  }
  return files.sort();
}

describe('comments cite no issue of the project', () => {
  it('finds citations in comments of every kind, and none in code, strings, templates or regular expressions', () => {
    const script = [
      "// Cancel reaches every state (issue 29).",
      "/**",
      " * Issue #9: why this exists.",
      " */",
      "const a = 'see issue 12'; // issues 14 and 15",
      'const b = `issue 3 ${a /* issue-4 */} // issue 5`;',
      'const c = /issue 6\\/\\//.test(a);',
      "const d = { x: 1,",
      "  // issue 7 before a closing brace",
      "};",
      "export { b, c, d }; /* Issue 8",
      "   still the comment */",
    ].join('\n');
    expect(citationsIn('src/x.ts', script).map((c) => `${c.line}: ${c.citation}`)).toEqual([
      '1: issue 29',
      '3: Issue #9',
      '5: issues 14',
      '6: issue-4',
      '9: issue 7',
      '11: Issue 8',
    ]);
    expect(citationsIn('src/x.mjs', "#!/usr/bin/env node\n// issue 1\nconsole.log('issue 2');").map((c) => c.line)).toEqual([2]);
    expect(citationsIn('src/x.css', '/* issue 1 */ .issue-2 { color: red; }').map((c) => c.citation)).toEqual(['issue 1']);
    expect(citationsIn('src/x.html', '<!-- issue 1 --><p>issue 2</p>').map((c) => c.citation)).toEqual(['issue 1']);
    expect(citationsIn('scripts/x.sh', '#!/bin/sh\n# issue 1\necho "issue 2" $# # issue 3\n').map((c) => c.citation)).toEqual(['issue 1', 'issue 3']);
    expect(citationsIn('Dockerfile', 'FROM x\n# issue 1\nRUN echo issue 2\n').map((c) => c.citation)).toEqual(['issue 1']);
    expect(citationsIn('src/NOTES.md', 'Since issue 30 the worker …').map((c) => c.citation)).toEqual(['issue 30']);
    expect(citationsIn('src/x.json', '{"note": "issue 1"}')).toEqual([]);
  });

  it('lets a listed Gitea-data mention through in its own file only, and nothing else in the same comment', () => {
    const allowed = [{ file: 'src/demo/x.ts', text: 'issue #1 by alice' }];
    const text = '// Seeded: issue #1 by alice (issue 30).\n';
    expect(citationsIn('src/demo/x.ts', text, allowed).map((c) => c.citation)).toEqual(['issue 30']);
    expect(citationsIn('src/demo/y.ts', text, allowed).map((c) => c.citation)).toEqual(['issue #1', 'issue 30']);
  });

  it('no comment in the checked files cites one', () => {
    const files = checkedFiles();
    expect(files.length).toBeGreaterThan(300);
    expect(files).toContain('src/main.ts');
    expect(files).toContain('.ci/run');
    const citations = files.flatMap((file) => citationsIn(file, readFileSync(join(ROOT, file), 'utf8'), GITEA_DATA));
    expect(citations.map((c) => `${c.file}:${c.line}: "${c.citation}" in: ${c.comment}`)).toEqual([]);
  });

  it('every allowed Gitea-data mention is still in a comment of its file', () => {
    for (const a of GITEA_DATA) {
      const text = readFileSync(join(ROOT, a.file), 'utf8');
      const cites = new RegExp(CITATION.source, 'i').test(a.text);
      const inComment = commentsOf(a.file, text).some((c) => c.text.includes(a.text));
      expect(cites, `${a.file}: "${a.text}" cites nothing; remove it from GITEA_DATA`).toBe(true);
      expect(inComment, `${a.file}: "${a.text}" is no longer in a comment; remove it from GITEA_DATA`).toBe(true);
    }
  });
});
