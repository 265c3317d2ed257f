// What GET /security-events shows of a stored record: only the known sample fields, every value
// bounded and printable, also for a record the current writers would never store (an older
// version's, or a future writer's field).
import { describe, expect, it } from 'vitest';
import { SecurityEventsQuery } from '../../src/api/control-schemas.js';
import { securityEventsPage } from '../../src/api/security-event-queries.js';
import type { SecurityEventRecord } from '../../src/intake/security-events.js';

const NOW = Date.parse('2026-03-01T12:05:00.000Z');

function record(over: Partial<SecurityEventRecord>): SecurityEventRecord {
  return {
    key: `2026-03-01T12:00:00.000Z:${over.kind ?? 'invalid_signature'}:${over.source ?? '10.0.0.1'}`,
    kind: 'invalid_signature',
    source: '10.0.0.1',
    windowStart: '2026-03-01T12:00:00.000Z',
    windowEnd: '2026-03-01T12:10:00.000Z',
    count: 1,
    firstAt: '2026-03-01T12:01:00.000Z',
    lastAt: '2026-03-01T12:01:00.000Z',
    sample: {},
    expiresAt: '2026-03-31T12:10:00.000Z',
    ...over,
  };
}

describe('securityEventsPage', () => {
  it('keeps only the known sample fields, bounded and printable', () => {
    const hostile = record({
      source: `10.0.0.9 \u0000${'y'.repeat(500)}`,
      sample: { authorization: 'Bearer s3cret', 'x-gitea-signature': 'abc', body: 'comment text', userAgent: `ua\u0007${'z'.repeat(500)}`, bodyBytes: 42, path: { toString: () => 'x' } as never },
    });
    const page = securityEventsPage([hostile], [], SecurityEventsQuery.parse({}), NOW);
    const [v] = page.items;
    expect(Object.keys(v!.sample).sort()).toEqual(['bodyBytes', 'path', 'userAgent']);
    expect(v!.sample).toMatchObject({ bodyBytes: 42, path: null });
    expect(String(v!.sample['userAgent'])).toMatch(/^ua\?z+$/);
    expect(String(v!.sample['userAgent']).length).toBe(128);
    expect(v!.source).toMatch(/^10\.0\.0\.9\?\?y+$/);
    expect(v!.source.length).toBe(128);
    expect(JSON.stringify(page)).not.toMatch(/s3cret|comment text|authorization|x-gitea-signature/);
  });

  it('lays the open window over the stored copy, never a smaller count over a larger one', () => {
    const stored = [record({ count: 1 }), record({ source: '10.0.0.2', count: 9 })];
    const live = [record({ count: 5 }), record({ source: '10.0.0.2', count: 3 })];
    const page = securityEventsPage(stored, live, SecurityEventsQuery.parse({}), NOW);
    expect(page.items.map((v) => [v.source, v.count, v.open])).toEqual([['10.0.0.2', 9, true], ['10.0.0.1', 5, true]]);
    expect(page.requests).toBe(14);
  });
});
