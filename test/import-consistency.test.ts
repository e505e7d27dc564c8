import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, call, importCsv, register, type TestApp } from './helpers.ts';

const pgUrl = process.env.TEST_DATABASE_URL;

/**
 * A synchronous PostgreSQL import commits its rows with their `voters.imported` audit entry, in one
 * transaction, and answers without waiting for the VACUUM (ANALYZE) after it. Before, the VACUUM of the whole
 * table ran inside the request after COMMIT and the audit entry after that: a shutdown (or a crash) in
 * between left every row committed, no audit entry and a client that never got an answer. Here the VACUUM
 * never ends, which stands for that cut.
 */
describe.skipIf(!pgUrl)(
  'PostgreSQL import: rows and their audit entry together; VACUUM after the answer',
  () => {
    let t: TestApp;
    let unblock!: () => void;
    const blocked = new Promise<void>((resolve) => (unblock = resolve));
    beforeAll(async () => {
      t = await buildTestApp('postgres');
      const raw = t.db.raw;
      if (raw.dialect !== 'postgres') throw new Error('postgres only');
      const connect = raw.bulk.connect.bind(raw.bulk) as () => Promise<pg.PoolClient>;
      (raw.bulk as unknown as { connect: () => Promise<pg.PoolClient> }).connect = async () => {
        const client = await connect();
        const query = client.query.bind(client) as (...args: unknown[]) => Promise<unknown>;
        (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) =>
          typeof args[0] === 'string' && args[0].startsWith('VACUUM')
            ? blocked.then(() => query(...args))
            : query(...args);
        return client;
      };
    });
    afterAll(async () => {
      unblock();
      await t.close();
    });

    it('answers with the audit entry written while the VACUUM has not finished', async () => {
      const owner = await register(t.app);
      const rows = 10_500;
      let csv = 'name,phone\n';
      for (let i = 0; i < rows; i++) csv += `Voter ${i},+9196${String(i).padStart(8, '0')}\n`;
      const answer = await Promise.race([
        importCsv(t.app, owner.token, csv),
        new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 20_000)),
      ]);
      expect(answer?.status, 'the import answered').toBe(200);
      expect(answer!.body.data.imported).toBe(rows);
      const audit = await call(t.app, 'GET', '/api/audit-log?action=voters.imported', { token: owner.token });
      expect(audit.body.data.data).toHaveLength(1);
      expect(audit.body.data.data[0].details).toMatchObject({ imported: rows, updated: 0, failed: 0 });
    }, 60_000);
  },
);
