import { Migrator, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect } from '../src/db/connect.ts';
import { migrateToLatest, migrations } from '../src/db/migrate.ts';
import {
  buildTestApp,
  call,
  dialects,
  importCsv,
  register,
  type Account,
  type TestApp,
  voterIds,
} from './helpers.ts';

const header = 'name,phone,booth';

function roll(prefix: string, from: number, count: number): string {
  const lines = [header];
  for (let i = from; i < from + count; i += 1)
    lines.push(`${prefix} ${i},+9194${String(i).padStart(8, '0')},${i % 5}`);
  return lines.join('\n');
}

for (const dialect of dialects) {
  describe(`voter blocks (${dialect})`, () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await buildTestApp(dialect);
    });
    afterAll(async () => {
      await t.close();
    });

    /** voter_blocks against the voters themselves, for one workspace. */
    async function expectBlocksTrue(workspaceId: number) {
      const kept = await t.db.kysely
        .selectFrom('voter_blocks')
        .select(['block', 'total'])
        .where('workspace_id', '=', workspaceId)
        .orderBy('block')
        .execute();
      const counted = await t.db.kysely
        .selectFrom('voters')
        .select([sql<number>`id >> 12`.as('block'), (eb) => eb.fn.countAll<number>().as('total')])
        .where('workspace_id', '=', workspaceId)
        .groupBy(sql`id >> 12`)
        .orderBy('block')
        .execute();
      const numbers = (rows: { block: number; total: number }[]) =>
        rows.map((r) => [Number(r.block), Number(r.total)]);
      expect(numbers(kept)).toEqual(numbers(counted));
      return counted.length;
    }

    async function expectPagesTrue(account: Account) {
      const ids = await voterIds(t, account.user.workspace_id);
      for (const perPage of [100, 37, 1]) {
        const last = Math.ceil(ids.length / perPage);
        const pages =
          perPage === 1
            ? [1001, 4096, 4097, ids.length - 1, ids.length]
            : [11, 12, 40, 41, 77, last - 1, last];
        for (const page of pages.filter((p) => p >= 1 && p <= last + 1)) {
          const res = await call(t.app, 'GET', `/api/voters?per_page=${perPage}&page=${page}`, {
            token: account.token,
          });
          expect(res.status).toBe(200);
          expect({ page, perPage, total: res.body.data.total }).toEqual({ page, perPage, total: ids.length });
          expect({ page, perPage, ids: res.body.data.data.map((v: { id: number }) => v.id) }).toEqual({
            page,
            perPage,
            ids: ids.slice((page - 1) * perPage, page * perPage),
          });
        }
      }
    }

    it('count voters per block of ids through imports, creates and deletes, and serve deep pages from them', async () => {
      const owner = await register(t.app);
      const other = await register(t.app);
      const ws = owner.user.workspace_id;
      // Interleaved imports: the owner's ids span several blocks of 4,096, with a gap in between.
      for (const [account, prefix, from] of [
        [owner, 'Block', 0],
        [other, 'Other', 0],
        [owner, 'Block', 4500],
      ] as const)
        expect((await importCsv(t.app, account.token, roll(prefix, from, 4500))).body.data.imported).toBe(
          4500,
        );
      expect(await expectBlocksTrue(ws)).toBeGreaterThanOrEqual(3);
      await expectBlocksTrue(other.user.workspace_id);
      await expectPagesTrue(owner);

      // A re-import updates (no block changes); deletes and creates do change them.
      const again = await importCsv(t.app, owner.token, roll('Block', 4000, 1000));
      expect(again.body.data.updated).toBe(1000);
      const ids = await voterIds(t, ws);
      for (const id of ids.filter((_, i) => i % 211 === 3))
        expect((await call(t.app, 'DELETE', `/api/voters/${id}`, { token: owner.token })).status).toBe(200);
      // A whole block emptied in one statement leaves no row behind for it.
      const firstBlock = ids[0]! >> 12;
      await t.db.kysely
        .deleteFrom('voters')
        .where('workspace_id', '=', ws)
        .where(sql<boolean>`id >> 12 = ${firstBlock}`)
        .execute();
      const made = await call(t.app, 'POST', '/api/voters', {
        token: owner.token,
        body: { name: 'Block Newcomer', phone: '+919499999999' },
      });
      expect(made.status).toBe(201);
      await expectBlocksTrue(ws);
      await expectPagesTrue(owner);
      const blocks = await t.db.kysely
        .selectFrom('voter_blocks')
        .select('block')
        .where('workspace_id', '=', ws)
        .where('block', '=', firstBlock)
        .execute();
      expect(blocks).toEqual([]);

      // Voters deleted between reading the total and reading the page (here: a total that is too high) leave
      // no block for a deep page: it is empty, not an error.
      const real = (await voterIds(t, ws)).length;
      await t.db.kysely
        .updateTable('voter_counts')
        .set((eb) => ({ total: eb('total', '+', 5000) }))
        .where('workspace_id', '=', ws)
        .execute();
      const beyond = await call(t.app, 'GET', `/api/voters?per_page=100&page=${Math.ceil(real / 100) + 2}`, {
        token: owner.token,
      });
      expect(beyond.status).toBe(200);
      expect(beyond.body.data).toMatchObject({ data: [], total: real + 5000 });
      await t.db.kysely
        .updateTable('voter_counts')
        .set((eb) => ({ total: eb('total', '-', 5000) }))
        .where('workspace_id', '=', ws)
        .execute();
    }, 120_000);
  });
}

describe('migration 007', () => {
  it('counts the voters already there', async () => {
    const db = connect('sqlite::memory:');
    try {
      const migrator = new Migrator({
        db: db.kysely as never,
        provider: { getMigrations: async () => migrations },
      });
      const to006 = await migrator.migrateTo('2026_11_21_006_voter_changes');
      expect(to006.error).toBeUndefined();
      await sql`INSERT INTO workspaces (name, created_at) VALUES ('Old office', '2026-11-21T00:00:00.000Z')`.execute(
        db.kysely,
      );
      const ws = Number(
        (await sql<{ id: number }>`SELECT id FROM workspaces`.execute(db.kysely)).rows[0]?.id,
      );
      await sql`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 9000)
        INSERT INTO voters (id, workspace_id, name, name_key, phone, created_at, updated_at)
        SELECT i * 3, ${ws}, 'Old ' || i, 'old ' || i, '+9193' || printf('%08d', i), '2026-11-21', '2026-11-21' FROM n`.execute(
        db.kysely,
      );
      await migrateToLatest(db);
      const blocks = await db.kysely
        .selectFrom('voter_blocks')
        .select(['block', 'total'])
        .orderBy('block')
        .execute();
      expect(blocks.map((b) => [Number(b.block), Number(b.total)])).toEqual([
        [0, 1365],
        [1, 1365],
        [2, 1365],
        [3, 1366],
        [4, 1365],
        [5, 1365],
        [6, 809],
      ]);
    } finally {
      await db.close();
    }
  });
});
