import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, call, dialects, importCsv, register, type Account, type TestApp } from './helpers.ts';

/**
 * The search structure (PostgreSQL: the voter_search table, migration 028; SQLite: the FTS5 table) follows
 * every change to voters: an import's inserts and its merges, an edit, a deletion; and a workspace finds only
 * its own voters.
 */
for (const dialect of dialects) {
  describe(`the voter search follows every change (${dialect})`, () => {
    let t: TestApp;
    let owner: Account;
    let other: Account;
    beforeAll(async () => {
      t = await buildTestApp(dialect);
      owner = await register(t.app);
      other = await register(t.app);
      const imported = await importCsv(
        t.app,
        owner.token,
        [
          'name,phone,email',
          'Zubeida Qureshi,+919811100001,zubeida@example.in',
          'Ottilie Brandt,+919811100002,',
          'Ximena Pardo,+919811100003,xp@example.org',
        ].join('\n'),
      );
      expect(imported.body.data).toMatchObject({ imported: 3, failed: 0 });
      const theirs = await importCsv(t.app, other.token, 'name,phone\nZubeida Other,+919811100009');
      expect(theirs.body.data).toMatchObject({ imported: 1 });
    }, 60_000);
    afterAll(() => t.close());

    const found = async (term: string, account = owner) => {
      const res = await call(t.app, 'GET', `/api/voters?search=${encodeURIComponent(term)}`, {
        token: account.token,
      });
      expect(res.status).toBe(200);
      expect(res.body.data.total).toBe(res.body.data.data.length);
      return (res.body.data.data as Array<{ name: string }>).map((v) => v.name).sort();
    };
    const idOf = async (term: string) => {
      const res = await call(t.app, 'GET', `/api/voters?search=${encodeURIComponent(term)}`, {
        token: owner.token,
      });
      return res.body.data.data[0].id as number;
    };

    it('finds imported voters by name, email and phone digits, in their own workspace only', async () => {
      expect(await found('zubeida')).toEqual(['Zubeida Qureshi']);
      expect(await found('zubeida', other)).toEqual(['Zubeida Other']);
      expect(await found('example.org')).toEqual(['Ximena Pardo']);
      expect(await found('98111 00002')).toEqual(['Ottilie Brandt']);
      expect(await found('00009')).toEqual([]);
    });

    it('an edit moves the voter from its old name, email and phone to the new ones', async () => {
      const id = await idOf('ottilie');
      const res = await call(t.app, 'PUT', `/api/voters/${id}`, {
        token: owner.token,
        body: { name: 'Wilhelmina Brandt', email: 'wb@example.net', phone: '+919822200002' },
      });
      expect(res.status).toBe(200);
      expect(await found('ottilie')).toEqual([]);
      expect(await found('wilhelmina')).toEqual(['Wilhelmina Brandt']);
      expect(await found('wb@example')).toEqual(['Wilhelmina Brandt']);
      expect(await found('9822200002')).toEqual(['Wilhelmina Brandt']);
      expect(await found('9811100002')).toEqual([]);
    });

    it("a re-import's merge changes the email it searches by", async () => {
      const res = await importCsv(
        t.app,
        owner.token,
        'name,phone,email\nXimena Pardo,+919811100003,ximena.new@example.com',
      );
      expect(res.body.data).toMatchObject({ imported: 0, updated: 1 });
      expect(await found('example.org')).toEqual([]);
      expect(await found('ximena.new')).toEqual(['Ximena Pardo']);
    });

    it('a deleted voter is found no more, and nothing of it stays behind', async () => {
      const id = await idOf('zubeida');
      expect((await call(t.app, 'DELETE', `/api/voters/${id}`, { token: owner.token })).status).toBe(200);
      expect(await found('zubeida')).toEqual([]);
      expect(await found('zubeida', other)).toEqual(['Zubeida Other']);
      if (dialect === 'postgres') {
        const { rows } = await sql<{ voters: string; searchable: string }>`
          SELECT (SELECT count(*) FROM voters) AS voters, (SELECT count(*) FROM voter_search) AS searchable,
                 (SELECT count(*) FROM voter_search s JOIN voters v ON v.id = s.voter_id
                   WHERE (s.workspace_id, s.name, s.email, s.phone) IS NOT DISTINCT FROM
                         (v.workspace_id, v.name, v.email, v.phone)) AS same`.execute(t.db.kysely);
        expect(Number(rows[0]!.searchable)).toBe(Number(rows[0]!.voters));
        expect(rows[0]).toMatchObject({ same: rows[0]!.voters });
      }
    });
  });
}
