// The embedded store's audit is append-only, enforced by SQLite itself (a trigger): a statement run on
// store.db by hand cannot rewrite history either. PostgreSQL's: test/integration/store-postgres-sql.test.ts.
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { sqliteBinding } from '../../src/store/sql/sqlite-driver.js';
import { SQLITE_FILE } from '../../src/store/sqlite-store.js';
import { storeDirs } from '../support/store-helpers.js';

const env = storeDirs();
afterEach(() => env.cleanup());

it('UPDATE and DELETE on the audit are refused by the database', async () => {
  const dir = await env.dir();
  const store = await env.open({ dir });
  await store.transact((tx) => tx.appendAudit({ action: 'x', actor: 'test' }));
  await store.sync();
  const db = sqliteBinding().open(join(dir, SQLITE_FILE), { readonly: false });
  try {
    expect(() => db.exec(`UPDATE audit SET level = 'alert'`)).toThrow(/audit is append-only \(UPDATE refused\)/);
    expect(() => db.exec('DELETE FROM audit')).toThrow(/audit is append-only \(DELETE refused\)/);
  } finally {
    db.close();
  }
  expect(await store.audit()).toHaveLength(1);
});
