// Re-records test/fixtures/mentions/gitea-<version>-rendered.json: every comment of the mention corpus
// rendered by a real Gitea (POST /api/v1/markdown, Mode "comment"). The Gitea needs a user named
// ccweb-bot (mentions of unknown users are not linked). Usage:
//   node scripts/record-mention-corpus.mjs http://127.0.0.1:3000 <token>
import { readFileSync, writeFileSync } from 'node:fs';

const [base, token] = process.argv.slice(2);
if (!base || !token) {
  console.error('usage: node scripts/record-mention-corpus.mjs <gitea url> <token>');
  process.exit(2);
}
const file = new URL('../test/fixtures/mentions/gitea-1.26.3-rendered.json', import.meta.url);
const fixture = JSON.parse(readFileSync(file, 'utf8'));
const api = `${base.replace(/\/+$/, '')}/api/v1`;
const version = (await (await fetch(`${api}/version`, { headers: { Authorization: `token ${token}` } })).json()).version;
for (const c of fixture.cases) {
  const res = await fetch(`${api}/markdown`, {
    method: 'POST',
    headers: { Authorization: `token ${token}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ Text: c.body, Mode: 'comment' }),
  });
  if (!res.ok) throw new Error(`${c.name}: HTTP ${res.status}`);
  c.html = await res.text();
}
fixture.source = `Gitea ${version}, POST /api/v1/markdown {Mode:'comment'}, user ccweb-bot exists; recorded by scripts/record-mention-corpus.mjs`;
writeFileSync(file, `${JSON.stringify(fixture, null, 1)}\n`);
console.log(`${fixture.cases.length} cases rendered by Gitea ${version}`);
