import SQLite from 'better-sqlite3';
import { Kysely, SqliteDialect, sql } from 'kysely';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { withStatementCache } from '../src/db/sqlite-statements.ts';

// SQLite only: the cache is the SQLite driver's (PostgreSQL prepares nothing on the client).
describe('sqlite statement cache', () => {
  let sqlite: SQLite.Database;
  let cached: ReturnType<typeof withStatementCache>;
  let db: Kysely<{ t: { id: number; v: string } }>;

  beforeEach(async () => {
    sqlite = new SQLite(':memory:');
    cached = withStatementCache(sqlite, 3);
    db = new Kysely({ dialect: new SqliteDialect({ database: cached }) });
    await sql`create table t (id integer primary key, v text not null)`.execute(db);
    await db
      .insertInto('t')
      .values([1, 2, 3, 4, 5].map((id) => ({ id, v: `v${id}` })))
      .execute();
  });
  afterEach(async () => {
    await db.destroy();
  });

  const byId = (id: number) => db.selectFrom('t').select('v').where('id', '=', id).executeTakeFirst();

  it('prepares a repeated query once and answers each call with its own parameters', async () => {
    const first = cached.prepare('select v from t where id = ?');
    expect(cached.prepare('select v from t where id = ?')).toBe(first);
    expect(await byId(2)).toEqual({ v: 'v2' });
    expect(await byId(4)).toEqual({ v: 'v4' });
    expect(await byId(9)).toBeUndefined();
  });

  it('keeps at most its size, dropping the least recently used text', () => {
    const a = cached.prepare('select 1');
    cached.prepare('select 2');
    cached.prepare('select 3');
    expect(cached.prepare('select 1')).toBe(a); // a is now the most recent
    cached.prepare('select 4'); // evicts select 2
    expect(cached.cached).toBe(3);
    expect(cached.prepare('select 1')).toBe(a);
    const two = cached.prepare('select 2');
    expect(cached.prepare('select 2')).toBe(two);
    expect(cached.cached).toBe(3);
  });

  it('does not keep very long texts', () => {
    const long = `select 1 where 1 in (${Array.from({ length: 2000 }, () => '1').join(', ')})`;
    expect(cached.prepare(long)).not.toBe(cached.prepare(long));
  });

  it('streams through a cached statement and gives a busy one to no one else', async () => {
    const rows: string[] = [];
    for await (const row of db.selectFrom('t').select('v').orderBy('id').stream()) rows.push(row.v);
    expect(rows).toEqual(['v1', 'v2', 'v3', 'v4', 'v5']);
    const text = 'select v from t order by id';
    const statement = cached.prepare(text) as SQLite.Statement;
    const iterator = statement.iterate([]);
    expect(iterator.next().value).toEqual({ v: 'v1' });
    // better-sqlite3 lets nothing else run on the connection while a statement iterates (Kysely's streams
    // hold its connection lock); should anything ask for the same text meanwhile, it gets another statement.
    expect(cached.prepare(text)).not.toBe(statement);
    iterator.return?.();
    expect(cached.prepare(text)).toBe(statement);
    expect(await byId(5)).toEqual({ v: 'v5' });
  });

  it('keeps transactions working: a rollback undoes, a commit keeps, writes report their changes', async () => {
    await expect(
      db.transaction().execute(async (trx) => {
        await trx.updateTable('t').set({ v: 'changed' }).where('id', '=', 1).execute();
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');
    expect(await byId(1)).toEqual({ v: 'v1' });
    const result = await db
      .transaction()
      .execute((trx) => trx.updateTable('t').set({ v: 'kept' }).where('id', '<=', 2).executeTakeFirst());
    expect(Number(result.numUpdatedRows)).toBe(2);
    expect(await byId(2)).toEqual({ v: 'kept' });
  });

  it('still answers after the schema changes under a cached statement', async () => {
    expect(await byId(3)).toEqual({ v: 'v3' });
    await sql`alter table t add column w text`.execute(db);
    await sql`drop table t`.execute(db);
    await sql`create table t (id integer primary key, v text not null)`.execute(db);
    await db.insertInto('t').values({ id: 3, v: 'again' }).execute();
    expect(await byId(3)).toEqual({ v: 'again' });
  });
});
