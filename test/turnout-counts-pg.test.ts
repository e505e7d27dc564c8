import { Migrator, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type Db } from '../src/db/connect.ts';
import { migrateToLatest, migrations } from '../src/db/migrate.ts';
import { compactVoterValueCounts } from '../src/modules/voters/voter-value-counts.ts';
import { isolatedDatabase } from './messaging-helpers.ts';

const pgUrl = process.env.TEST_DATABASE_URL;

/**
 * Turnout's kept counts (migration 045, PostgreSQL only): the voters, supporters and voted by booth and by part,
 * counted from what was there when the migration ran, then kept by statement-level triggers through every kind
 * of write the service makes (multi-row inserts, upserts, moves, support changes, marks, unmarks, deletes that
 * cascade), and folded without changing a sum. After each step the kept counts equal the roll counted afresh.
 */
describe.skipIf(!pgUrl)('turnout counts on PostgreSQL (migration 045)', () => {
  let database: Awaited<ReturnType<typeof isolatedDatabase>>;
  let db: Db;
  let ws: number;
  let other: number;

  const workspace = async (name: string) =>
    Number(
      (
        await sql<{ id: number }>`INSERT INTO workspaces (name, created_at) VALUES (${name}, now())
          RETURNING id`.execute(db.kysely)
      ).rows[0]!.id,
    );
  /** `count` voters of `workspace`, from `first`: booth i % 3 (none for every fifth), part i % 4, support i % 5. */
  const addVoters = async (workspace: number, first: number, count: number) =>
    sql`INSERT INTO voters (workspace_id, name, name_key, phone, booth, booth_key, part_number, support_level,
        created_at, updated_at)
      SELECT ${workspace}::bigint, 'Voter ' || i, 'voter ' || i, '+9193' || lpad(i::text, 8, '0'),
        CASE WHEN i % 5 = 0 THEN NULL ELSE 'Booth ' || (i % 3) END,
        CASE WHEN i % 5 = 0 THEN NULL ELSE 'booth ' || (i % 3) END,
        NULLIF(i % 4, 0), NULLIF(i % 5, 0), now(), now()
      FROM generate_series(${first}::int, ${first + count - 1}::int) i`.execute(db.kysely);
  const mark = async (workspace: number, where: string, voted: number) =>
    sql`INSERT INTO poll_voted (voter_id, workspace_id, voted, marked_at, booth_key, part_number, supporter)
      SELECT id, workspace_id, ${voted}, now(), booth_key, part_number,
        CASE WHEN support_level IN (1, 2) THEN 1 ELSE 0 END
      FROM voters WHERE workspace_id = ${workspace} AND ${sql.raw(where)}
      ON CONFLICT (voter_id) DO UPDATE SET voted = excluded.voted, marked_at = excluded.marked_at`.execute(
      db.kysely,
    );

  /** The counts afresh, in the kept rows' form: kind, key, value, n. */
  const counted = async (workspace: number) => {
    const { rows } = await sql<{ kind: string; key: string; value: string; n: number }>`
      SELECT kind, key, value, count(*)::int AS n FROM (
        SELECT 'booth' AS kind, coalesce('=' || booth_key, '') AS key,
          CASE WHEN support_level IN (1, 2) THEN '1' ELSE '0' END AS value FROM voters WHERE workspace_id = ${workspace}
        UNION ALL SELECT 'part', coalesce('=' || part_number, ''),
          CASE WHEN support_level IN (1, 2) THEN '1' ELSE '0' END FROM voters WHERE workspace_id = ${workspace}
        UNION ALL SELECT 'voted_booth', coalesce('=' || booth_key, ''), CASE WHEN supporter = 1 THEN '1' ELSE '0' END
          FROM poll_voted WHERE workspace_id = ${workspace} AND voted = 1
        UNION ALL SELECT 'voted_part', coalesce('=' || part_number, ''), CASE WHEN supporter = 1 THEN '1' ELSE '0' END
          FROM poll_voted WHERE workspace_id = ${workspace} AND voted = 1
      ) x GROUP BY kind, key, value`.execute(db.kysely);
    return rows.map((r) => `${r.kind} ${r.key} ${r.value}: ${r.n}`).sort();
  };
  const kept = async (workspace: number) => {
    const { rows } = await sql<{ kind: string; key: string; value: string; n: number }>`
      SELECT kind, key, value, sum(delta)::int AS n FROM voter_value_counts
      WHERE workspace_id = ${workspace} AND kind IN ('booth', 'part', 'voted_booth', 'voted_part')
      GROUP BY kind, key, value HAVING sum(delta) <> 0`.execute(db.kysely);
    return rows.map((r) => `${r.kind} ${r.key} ${r.value}: ${r.n}`).sort();
  };
  const same = async (workspace = ws) => expect(await kept(workspace)).toEqual(await counted(workspace));

  beforeAll(async () => {
    database = await isolatedDatabase('postgres');
    db = connect(database.env.DATABASE_URL!);
    const migrator = new Migrator({
      db: db.kysely as never,
      provider: { getMigrations: async () => migrations },
    });
    expect((await migrator.migrateTo('2026_12_07_044_privacy')).error).toBeUndefined();
    ws = await workspace('Old office');
    other = await workspace('Other office');
    await addVoters(ws, 0, 60);
    await addVoters(other, 1000, 10);
    await mark(ws, 'id % 2 = 0', 1);
    await mark(ws, 'id % 7 = 0', 0);
    await migrateToLatest(db);
  });
  afterAll(async () => {
    await db?.close();
    await database?.drop();
  });

  it('counts what was there when the migration ran', async () => {
    expect((await counted(ws)).length).toBeGreaterThan(10);
    await same();
    await same(other);
  });

  it('follows inserts, moves, support changes, upserts, marks and deletes', async () => {
    await addVoters(ws, 60, 40);
    await same();
    // A move of booth and part, a change of support, and an edit that moves nothing.
    await sql`UPDATE voters SET booth = 'Booth 9', booth_key = 'booth 9', part_number = 9
      WHERE workspace_id = ${ws} AND id % 3 = 0`.execute(db.kysely);
    await same();
    await sql`UPDATE voters SET support_level = 1 WHERE workspace_id = ${ws} AND id % 4 = 1`.execute(
      db.kysely,
    );
    await same();
    await sql`UPDATE voters SET name = name || '.' WHERE workspace_id = ${ws}`.execute(db.kysely);
    await same();
    // An upsert, as an import's: new voters and changed ones in one statement.
    await sql`INSERT INTO voters (id, workspace_id, name, name_key, phone, booth, booth_key, part_number,
        support_level, created_at, updated_at)
      SELECT id, workspace_id, name, name_key, phone, NULL, NULL, 2, 2, now(), now()
      FROM voters WHERE workspace_id = ${ws} AND id % 5 = 2
      ON CONFLICT (id) DO UPDATE SET booth = excluded.booth, booth_key = excluded.booth_key,
        part_number = excluded.part_number, support_level = excluded.support_level`.execute(db.kysely);
    await same();
    // Marks, unmarks, and a voter's support changed after the mark (poll_voted follows by trigger).
    await mark(ws, 'id % 3 = 1', 1);
    await mark(ws, 'id % 11 = 0', 0);
    await sql`UPDATE voters SET support_level = 5 WHERE workspace_id = ${ws} AND id % 6 = 1`.execute(
      db.kysely,
    );
    await same();
    // Deletes: a mark, then voters (their marks go with them).
    await sql`DELETE FROM poll_voted WHERE workspace_id = ${ws} AND voter_id % 13 = 0`.execute(db.kysely);
    await sql`DELETE FROM voters WHERE workspace_id = ${ws} AND id % 8 = 3`.execute(db.kysely);
    await same();
    await same(other);
  });

  it('folds each group into one row without changing a count', async () => {
    const before = await kept(ws);
    while (await compactVoterValueCounts(db.kysely));
    expect(await kept(ws)).toEqual(before);
    const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM voter_value_counts
      WHERE workspace_id = ${ws} AND kind IN ('booth', 'part', 'voted_booth', 'voted_part')`.execute(
      db.kysely,
    );
    expect(rows[0]!.n).toBe(before.length);
  });

  it("a workspace's voters all deleted leave nothing to count", async () => {
    await sql`DELETE FROM voters WHERE workspace_id = ${other}`.execute(db.kysely);
    expect(await kept(other)).toEqual([]);
    await same();
  });
});
