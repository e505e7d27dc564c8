import { type Kysely, sql } from 'kysely';
import * as voterVersions from './2026_11_21_005_voter_versions.ts';
import * as voterChanges from './2026_11_21_006_voter_changes.ts';
import { isPostgres } from './helpers.ts';

/**
 * Removes what only kept large search totals exact between requests (migrations 005 and 006): the
 * `voter_counts.version` number, the `voter_changes` log (old names and phones kept for ten minutes) and their
 * triggers. Search totals are now exact up to 10,000 and capped above (contract, "Voter search totals").
 * The counting triggers go back to migration 002's (the workspace total); voter_blocks (007) stays.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  if (isPostgres(db)) {
    await sql`DROP TRIGGER voters_count_update ON voters`.execute(db);
    await sql`DROP FUNCTION voter_counts_updated()`.execute(db);
    await sql`CREATE OR REPLACE FUNCTION voter_counts_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        UPDATE voter_counts c SET total = c.total + n.added
          FROM (SELECT workspace_id, count(*) AS added FROM new_rows GROUP BY workspace_id) n
          WHERE c.workspace_id = n.workspace_id;
        RETURN NULL;
      END $$`.execute(db);
    await sql`CREATE OR REPLACE FUNCTION voter_counts_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        UPDATE voter_counts c SET total = c.total - o.removed
          FROM (SELECT workspace_id, count(*) AS removed FROM old_rows GROUP BY workspace_id) o
          WHERE c.workspace_id = o.workspace_id;
        RETURN NULL;
      END $$`.execute(db);
  } else {
    await sql`DROP TRIGGER voters_count_insert`.execute(db);
    await sql`DROP TRIGGER voters_count_delete`.execute(db);
    await sql`DROP TRIGGER voters_count_update`.execute(db);
    await sql`CREATE TRIGGER voters_count_insert AFTER INSERT ON voters BEGIN
      UPDATE voter_counts SET total = total + 1 WHERE workspace_id = new.workspace_id;
    END`.execute(db);
    await sql`CREATE TRIGGER voters_count_delete AFTER DELETE ON voters BEGIN
      UPDATE voter_counts SET total = total - 1 WHERE workspace_id = old.workspace_id;
    END`.execute(db);
    await db.schema.alterTable('voter_counts').dropColumn('bulk').execute();
  }
  await db.schema.dropTable('voter_changes').execute();
  await db.schema.alterTable('voter_counts').dropColumn('version').execute();
}

/** Back to migration 006's state (the log starts empty). */
export async function down(db: Kysely<unknown>): Promise<void> {
  await voterVersions.up(db);
  await voterChanges.up(db);
}
