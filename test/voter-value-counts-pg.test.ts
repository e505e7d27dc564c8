import { Migrator, sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type Db } from '../src/db/connect.ts';
import { migrateToLatest, migrations } from '../src/db/migrate.ts';
import { VoterTagging } from '../src/modules/voters/voter-tags.ts';
import { compactVoterValueCounts, heldCount } from '../src/modules/voters/voter-value-counts.ts';
import { isolatedDatabase } from './messaging-helpers.ts';

const pgUrl = process.env.TEST_DATABASE_URL;

/**
 * voter_value_counts (migration 037, PostgreSQL only): counts of the tags and custom field values already there
 * when it is applied, kept by statement-level triggers through inserts, updates and cascaded deletes, folded
 * without changing a sum, and written by concurrent transactions that never wait for one another; and the
 * trigger that deletes a voter's tags and values in place of foreign keys (migration 039).
 */
describe.skipIf(!pgUrl)('voter value counts on PostgreSQL (migration 037)', () => {
  let database: Awaited<ReturnType<typeof isolatedDatabase>>;
  let db: Db;
  let ws: number;
  const voter: number[] = [];
  beforeAll(async () => {
    database = await isolatedDatabase('postgres');
    db = connect(database.env.DATABASE_URL!);
    const migrator = new Migrator({
      db: db.kysely as never,
      provider: { getMigrations: async () => migrations },
    });
    const to036 = await migrator.migrateTo('2026_11_28_036_surveys');
    expect(to036.error).toBeUndefined();
    ws = Number(
      (
        await sql<{ id: number }>`INSERT INTO workspaces (name, created_at) VALUES ('Old office', now())
          RETURNING id`.execute(db.kysely)
      ).rows[0]!.id,
    );
    for (let i = 0; i < 4; i++)
      voter.push(
        Number(
          (
            await sql<{
              id: number;
            }>`INSERT INTO voters (workspace_id, name, name_key, phone, created_at, updated_at)
              VALUES (${ws}, ${`Old ${i}`}, ${`old ${i}`}, ${`+91930000000${i}`}, now(), now()) RETURNING id`.execute(
              db.kysely,
            )
          ).rows[0]!.id,
        ),
      );
    await sql`INSERT INTO voter_tags (workspace_id, tag_key, voter_id)
      VALUES (${ws}, 'youth', ${voter[0]}), (${ws}, 'youth', ${voter[1]}), (${ws}, 'farmer', ${voter[2]})`.execute(
      db.kysely,
    );
    await sql`INSERT INTO voter_field_values (voter_id, workspace_id, field_key, value_text, value_number)
      VALUES (${voter[0]}, ${ws}, 'ration', 'BPL', NULL), (${voter[1]}, ${ws}, 'ration', 'APL', NULL),
             (${voter[2]}, ${ws}, 'ration', 'BPL', NULL), (${voter[3]}, ${ws}, 'members', NULL, 4)`.execute(
      db.kysely,
    );
    await migrateToLatest(db);
  });
  afterAll(async () => {
    await db?.close();
    await database?.drop();
  });

  const counts = async () => ({
    youth: await heldCount(db.kysely, ws, 'tag', 'youth', ''),
    farmer: await heldCount(db.kysely, ws, 'tag', 'farmer', ''),
    bpl: await heldCount(db.kysely, ws, 'field', 'ration', 'BPL'),
    apl: await heldCount(db.kysely, ws, 'field', 'ration', 'APL'),
  });

  it('counts what was there, then follows inserts, updates and a voter deleted with its rows', async () => {
    expect(await counts()).toEqual({ youth: 2, farmer: 1, bpl: 2, apl: 1 });
    await sql`INSERT INTO voter_tags (workspace_id, tag_key, voter_id)
      VALUES (${ws}, 'youth', ${voter[2]}), (${ws}, 'youth', ${voter[3]})`.execute(db.kysely);
    await sql`UPDATE voter_field_values SET value_text = 'APL' WHERE voter_id = ${voter[0]} AND field_key = 'ration'`.execute(
      db.kysely,
    );
    await sql`DELETE FROM voters WHERE id = ${voter[2]}`.execute(db.kysely); // youth, farmer, BPL go with it
    expect(await counts()).toEqual({ youth: 3, farmer: 0, bpl: 0, apl: 2 });
    // A tag a voter holds already, added again as bulk tagging does (ON CONFLICT DO NOTHING), counts once.
    await sql`INSERT INTO voter_tags (workspace_id, tag_key, voter_id)
      VALUES (${ws}, 'youth', ${voter[0]}), (${ws}, 'youth', ${voter[1]}) ON CONFLICT DO NOTHING`.execute(
      db.kysely,
    );
    expect(await counts()).toEqual({ youth: 3, farmer: 0, bpl: 0, apl: 2 });
    // A number value is not counted here (its filter counts the index).
    expect(await heldCount(db.kysely, ws, 'field', 'members', '4')).toBe(0);
  });

  it("deletes a voter's tags and values with it, and a workspace's with its voters, without foreign keys (039)", async () => {
    const keys = await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_constraint WHERE contype = 'f'
      AND conrelid IN ('voter_tags'::regclass, 'voter_field_values'::regclass)`.execute(db.kysely);
    expect(keys.rows[0]!.n).toBe(0);
    const office = Number(
      (
        await sql<{ id: number }>`INSERT INTO workspaces (name, created_at) VALUES ('Going office', now())
          RETURNING id`.execute(db.kysely)
      ).rows[0]!.id,
    );
    const ids: number[] = [];
    for (const i of [0, 1])
      ids.push(
        Number(
          (
            await sql<{
              id: number;
            }>`INSERT INTO voters (workspace_id, name, name_key, phone, created_at, updated_at)
              VALUES (${office}, ${`Going ${i}`}, ${`going ${i}`}, ${`+91940000000${i}`}, now(), now())
              RETURNING id`.execute(db.kysely)
          ).rows[0]!.id,
        ),
      );
    for (const id of ids) {
      await sql`INSERT INTO voter_tags (workspace_id, tag_key, voter_id) VALUES (${office}, 'youth', ${id})`.execute(
        db.kysely,
      );
      await sql`INSERT INTO voter_field_values (voter_id, workspace_id, field_key, value_text)
        VALUES (${id}, ${office}, 'ration', 'BPL')`.execute(db.kysely);
    }
    const rowsOf = async (column: 'voter_id' | 'workspace_id', id: number) => {
      const tags = await sql<{ n: number }>`SELECT count(*)::int AS n FROM voter_tags
        WHERE ${sql.ref(column)} = ${id}`.execute(db.kysely);
      const values = await sql<{ n: number }>`SELECT count(*)::int AS n FROM voter_field_values
        WHERE ${sql.ref(column)} = ${id}`.execute(db.kysely);
      return [tags.rows[0]!.n, values.rows[0]!.n];
    };
    expect(await rowsOf('voter_id', ids[0]!)).toEqual([1, 1]);
    await sql`DELETE FROM voters WHERE id = ${ids[0]}`.execute(db.kysely);
    expect(await rowsOf('voter_id', ids[0]!)).toEqual([0, 0]);
    expect(await rowsOf('voter_id', ids[1]!)).toEqual([1, 1]);
    await sql`DELETE FROM workspaces WHERE id = ${office}`.execute(db.kysely);
    expect(await rowsOf('workspace_id', office)).toEqual([0, 0]);
    expect(await heldCount(db.kysely, office, 'tag', 'youth', '')).toBe(0);
  });

  it('a tagging that meets a delete in flight waits for it, and leaves no tag of the deleted voter (039)', async () => {
    const id = Number(
      (
        await sql<{
          id: number;
        }>`INSERT INTO voters (workspace_id, name, name_key, phone, created_at, updated_at)
          VALUES (${ws}, 'Leaving', 'leaving', '+919500000001', now(), now()) RETURNING id`.execute(db.kysely)
      ).rows[0]!.id,
    );
    const deleting = new pg.Client({ connectionString: database.env.DATABASE_URL! });
    await deleting.connect();
    try {
      await deleting.query('BEGIN');
      await deleting.query('DELETE FROM voters WHERE id = $1', [id]); // its trigger has run: no tags yet
      // The tagging reads the voter as it was (the delete is not committed) and waits at its insert.
      const tagging = new VoterTagging({ db: db.kysely }).tag(
        ws,
        { userId: null, ip: null },
        { voter_ids: [id], add: ['late'] },
      );
      let settled = false;
      void tagging.finally(() => (settled = true)).catch(() => {});
      await new Promise((r) => setTimeout(r, 300));
      expect(settled).toBe(false);
      await deleting.query('COMMIT');
      await tagging;
    } finally {
      await deleting.end();
    }
    const left = await sql<{
      n: number;
    }>`SELECT count(*)::int AS n FROM voter_tags WHERE voter_id = ${id}`.execute(db.kysely);
    expect(left.rows[0]!.n).toBe(0);
  });

  it('folds each value into one row without changing a sum, and drops a value that came to nothing', async () => {
    const before = await counts();
    while (await compactVoterValueCounts(db.kysely));
    expect(await counts()).toEqual(before);
    const rows = await db.kysely
      .selectFrom('voter_value_counts')
      .select(['kind', 'key', 'value', 'delta'])
      .where('workspace_id', '=', ws)
      .where('kind', 'in', ['tag', 'field'])
      .orderBy('kind')
      .orderBy('key')
      .orderBy('value')
      .execute();
    expect(rows.map((r) => [r.kind, r.key, r.value, Number(r.delta)])).toEqual([
      ['field', 'ration', 'APL', 2],
      ['tag', 'youth', '', 3],
    ]);
  });

  it('two transactions tagging the same tag do not wait for each other', async () => {
    const url = database.env.DATABASE_URL!;
    const a = new pg.Client({ connectionString: url });
    const b = new pg.Client({ connectionString: url });
    await a.connect();
    await b.connect();
    try {
      await b.query(`SET lock_timeout = '2s'`);
      await a.query('BEGIN');
      await a.query(
        `INSERT INTO voter_tags (workspace_id, tag_key, voter_id) VALUES ($1, 'booth team', $2)`,
        [ws, voter[0]],
      );
      // With a's transaction open, b adds the same tag: a counter row would make it wait (and
      // time out on lock_timeout); delta rows do not.
      await b.query('BEGIN');
      await b.query(
        `INSERT INTO voter_tags (workspace_id, tag_key, voter_id) VALUES ($1, 'booth team', $2)`,
        [ws, voter[1]],
      );
      await b.query('COMMIT');
      expect(await heldCount(db.kysely, ws, 'tag', 'booth team', '')).toBe(1);
      await a.query('COMMIT');
      expect(await heldCount(db.kysely, ws, 'tag', 'booth team', '')).toBe(2);
    } finally {
      await a.end();
      await b.end();
    }
  });
});
