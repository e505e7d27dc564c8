import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compiledOnce } from '../src/db/compiled-once.ts';
import { buildTestApp, dialects, type TestApp } from './helpers.ts';

const nameById = compiledOnce((db, id: number) =>
  db.selectFrom('workspaces').select(['id', 'name']).where('id', '=', id),
);
const byNameAndIds = compiledOnce((db, name: string, low: number, high: number) =>
  db
    .selectFrom('workspaces')
    .select('id')
    .where('name', '=', name)
    .where('id', '>=', low)
    .where('id', '<=', high)
    .orderBy('id'),
);

for (const dialect of dialects) {
  describe(`compiledOnce (${dialect})`, () => {
    let t: TestApp;
    const ids: number[] = [];
    const name = `compiled-once ${Date.now()} ${Math.random()}`;

    beforeAll(async () => {
      t = await buildTestApp(dialect);
      for (let i = 0; i < 3; i++) {
        const row = await t.db.kysely
          .insertInto('workspaces')
          .values({ name: i === 1 ? 'another' : name, created_at: new Date().toISOString() })
          .returning('id')
          .executeTakeFirstOrThrow();
        ids.push(row.id);
      }
    });
    afterAll(async () => {
      await t.close();
    });

    it("runs with each call's own values, in their order", async () => {
      const [a, b, c] = ids as [number, number, number];
      expect(await nameById.first(t.db.kysely, a)).toEqual({ id: a, name });
      expect(await nameById.first(t.db.kysely, b)).toEqual({ id: b, name: 'another' });
      expect(await nameById.first(t.db.kysely, -1)).toBeUndefined();
      expect(await byNameAndIds.all(t.db.kysely, name, a, c)).toEqual([{ id: a }, { id: c }]);
      expect(await byNameAndIds.all(t.db.kysely, name, b, c)).toEqual([{ id: c }]);
      expect(await byNameAndIds.all(t.db.kysely, 'another', a, c)).toEqual([{ id: b }]);
    });

    it('runs inside a transaction and sees its uncommitted rows', async () => {
      await t.db.kysely
        .transaction()
        .execute(async (trx) => {
          await trx
            .updateTable('workspaces')
            .set({ name: 'renamed' })
            .where('id', '=', ids[0] as number)
            .execute();
          expect((await nameById.first(trx, ids[0] as number))?.name).toBe('renamed');
          throw new Error('roll back');
        })
        .catch(() => {});
      expect((await nameById.first(t.db.kysely, ids[0] as number))?.name).toBe(name);
    });

    it('refuses an argument that shapes the query instead of being a value', async () => {
      const unused = compiledOnce((db, _id: number) => db.selectFrom('workspaces').select('id'));
      await expect(unused.first(t.db.kysely, 1)).rejects.toThrow(/argument 0 is not used exactly once/);
      const twice = compiledOnce((db, id: number) =>
        db.selectFrom('workspaces').select('id').where('id', '=', id).where('id', '>=', id),
      );
      await expect(twice.first(t.db.kysely, 1)).rejects.toThrow(/argument 0 is not used exactly once/);
    });
  });
}
