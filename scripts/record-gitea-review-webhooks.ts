/**
 * Records the review webhook fixtures (test/fixtures/gitea/webhooks/review_*) from a real Gitea:
 * the scenario of test/support/real-gitea/review-scenario.ts (a line comment through the web UI's "Add
 * single comment", a reply in its thread, a line comment through the API, a review with a body and three
 * line comments, a request-changes review), each delivery byte for byte (`<name>.json`) with the headers
 * Gitea sent (`<name>.headers.json`) and what Gitea's review API answered for it (`<name>.readback.json`),
 * signed with the secret `test-secret`. Gitea runs with ROOT_URL https://gitea.example.com/, so no URL
 * names the test's port; the recorder's Host header is left out.
 *
 *   node --import tsx scripts/record-gitea-review-webhooks.ts [--out DIR]
 */
import { createHash } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { REVIEW_FIXTURE_SECRET, recordReviewDeliveries } from '../test/support/real-gitea/review-scenario.js';

const { values } = parseArgs({ options: { out: { type: 'string' } } });
const outDir = values.out ?? fileURLToPath(new URL('../test/fixtures/gitea/webhooks/', import.meta.url));

const rec = await recordReviewDeliveries();
mkdirSync(outDir, { recursive: true });
for (const [name, r] of rec.deliveries) {
  writeFileSync(join(outDir, `${name}.json`), r.body);
  const headers = Object.fromEntries(r.rawHeaders.filter(([k]) => k.toLowerCase() !== 'host'));
  const meta = {
    recorded_from: `Gitea ${rec.version} (code.gitea.io/gitea built by scripts/install-gitea.mjs), repo webhook subscribed to issue_comment, pull_request_comment, pull_request_review; type gitea, POST, content type json; recorded by scripts/record-gitea-review-webhooks.ts (scenario: test/support/real-gitea/review-scenario.ts)`,
    method: r.method,
    body_file: `${name}.json`,
    body_bytes: r.body.length,
    body_sha256: createHash('sha256').update(r.body).digest('hex'),
    secret: REVIEW_FIXTURE_SECRET,
    headers,
    notes: [
      'Body file is byte-exact as Gitea sent it; sign/verify over these exact bytes.',
      "A review delivery carries no review id and no line comment: the service reads them back (<name>.readback.json is Gitea's answer).",
    ],
  };
  writeFileSync(join(outDir, `${name}.headers.json`), `${JSON.stringify(meta, null, 2)}\n`);
  writeFileSync(join(outDir, `${name}.readback.json`), `${JSON.stringify(rec.readBack[name] ?? null, null, 2)}\n`);
  console.log(`${name}: ${r.body.length} bytes, ${String(r.headers['x-gitea-event'])}/${String(r.headers['x-gitea-event-type'])}`);
}
