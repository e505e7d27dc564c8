import { type Kysely, sql } from 'kysely';
import { bigintType, isPostgres } from './helpers.ts';

/**
 * `voter_blocks`: how many of a workspace's voters have an id in each block of 4,096 ids (`block` = id >> 12),
 * kept by triggers in the writing transaction. A deep page of the unfiltered list finds the block that holds
 * its first row by adding these counts up (a few hundred rows per million voters) and skips at most 4,096
 * index entries inside it, instead of hundreds of thousands: exact, whatever has changed, with nothing to
 * remember between requests. The block size is repeated in voters.repository (VOTER_BLOCK_BITS).
 *
 * A voter keeps its id and workspace for life (no path changes either; voter_counts relies on it too), so
 * only inserts and deletes move the counts.
 *
 * The PostgreSQL insert and delete triggers are named after the voter_counts triggers of the same event so
 * that they fire after them (same-event triggers fire in name order): a writer holds the workspace's
 * voter_counts row before it touches any block row, so concurrent writers cannot lock blocks in opposite
 * orders.
 */
const BITS = 12;

export async function up(db: Kysely<unknown>): Promise<void> {
  let table = db.schema
    .createTable('voter_blocks')
    .addColumn('workspace_id', bigintType(db), (c) => c.notNull())
    .addColumn('block', bigintType(db), (c) => c.notNull())
    .addColumn('total', bigintType(db), (c) => c.notNull())
    .addPrimaryKeyConstraint('voter_blocks_pkey', ['workspace_id', 'block']);
  if (!isPostgres(db)) table = table.modifyEnd(sql`WITHOUT ROWID`);
  await table.execute();
  await sql
    .raw(
      `INSERT INTO voter_blocks (workspace_id, block, total)
       SELECT workspace_id, id >> ${BITS}, count(*) FROM voters GROUP BY workspace_id, id >> ${BITS}`,
    )
    .execute(db);

  if (isPostgres(db)) {
    const added = (rows: string) =>
      `INSERT INTO voter_blocks (workspace_id, block, total)
         SELECT workspace_id, id >> ${BITS}, count(*) FROM ${rows} GROUP BY 1, 2 ORDER BY 1, 2
         ON CONFLICT (workspace_id, block) DO UPDATE SET total = voter_blocks.total + excluded.total;`;
    const removed = (rows: string) =>
      `UPDATE voter_blocks b SET total = b.total - r.n
         FROM (SELECT workspace_id, id >> ${BITS} AS block, count(*) AS n FROM ${rows} GROUP BY 1, 2) r
         WHERE b.workspace_id = r.workspace_id AND b.block = r.block;
       DELETE FROM voter_blocks b USING (SELECT DISTINCT workspace_id, id >> ${BITS} AS block FROM ${rows}) r
         WHERE b.workspace_id = r.workspace_id AND b.block = r.block AND b.total = 0;`;
    await sql
      .raw(
        `CREATE FUNCTION voter_blocks_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN ${added('new_rows')} RETURN NULL; END $$`,
      )
      .execute(db);
    await sql
      .raw(
        `CREATE FUNCTION voter_blocks_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN ${removed('old_rows')} RETURN NULL; END $$`,
      )
      .execute(db);
    const trigger = (name: string, event: string, transition: string, fn: string) =>
      sql
        .raw(
          `CREATE TRIGGER ${name} AFTER ${event} ON voters REFERENCING ${transition}
           FOR EACH STATEMENT EXECUTE FUNCTION ${fn}()`,
        )
        .execute(db);
    await trigger('voters_count_insert_blocks', 'INSERT', 'NEW TABLE AS new_rows', 'voter_blocks_inserted');
    await trigger('voters_count_delete_blocks', 'DELETE', 'OLD TABLE AS old_rows', 'voter_blocks_deleted');
    return;
  }

  const add = (row: string) =>
    `INSERT INTO voter_blocks (workspace_id, block, total) VALUES (${row}.workspace_id, ${row}.id >> ${BITS}, 1)
       ON CONFLICT (workspace_id, block) DO UPDATE SET total = total + 1;`;
  const remove = (row: string) =>
    `UPDATE voter_blocks SET total = total - 1 WHERE workspace_id = ${row}.workspace_id AND block = ${row}.id >> ${BITS};
     DELETE FROM voter_blocks WHERE workspace_id = ${row}.workspace_id AND block = ${row}.id >> ${BITS} AND total = 0;`;
  await sql
    .raw(`CREATE TRIGGER voters_block_insert AFTER INSERT ON voters BEGIN ${add('new')} END`)
    .execute(db);
  await sql
    .raw(`CREATE TRIGGER voters_block_delete AFTER DELETE ON voters BEGIN ${remove('old')} END`)
    .execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  if (isPostgres(db)) {
    for (const event of ['insert', 'delete'])
      await sql.raw(`DROP TRIGGER voters_count_${event}_blocks ON voters`).execute(db);
    for (const fn of ['inserted', 'deleted']) await sql.raw(`DROP FUNCTION voter_blocks_${fn}()`).execute(db);
  } else {
    for (const event of ['insert', 'delete']) await sql.raw(`DROP TRIGGER voters_block_${event}`).execute(db);
  }
  await db.schema.dropTable('voter_blocks').execute();
}
