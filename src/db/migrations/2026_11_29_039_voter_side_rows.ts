import { type Kysely, sql } from 'kysely';
import { isPostgres } from './helpers.ts';

/**
 * PostgreSQL: a voter's tags and custom field values go with the voter through a statement-level trigger on
 * `voters` (as its `voter_search` row does), not through foreign keys. A foreign key checks every inserted row
 * on its own (a row-level trigger that locks the voter's row): a million field values took 7.7 s to insert
 * with it and 3.9 s without, and an import or a bulk tagging writes a row for each voter.
 *
 * What the keys guarded, and what guards it now: a deleted voter's rows are deleted in the same statement as the
 * voter (a workspace's deletion cascades to its voters, and so to this trigger), and every writer holds the voter's
 * row until it commits, so a delete in flight waits and then takes the new rows too: the API's create and update
 * and the import write the voter itself, a survey's answer updates it first (survey-sessions.ts), and bulk
 * tagging reads its voters FOR KEY SHARE (voter-tags.ts). Only the import writes a million rows at once, and it
 * holds its voters already.
 * SQLite keeps its foreign keys (its checks are index seeks within the statement, and its import meets its goal).
 *
 * On both databases, the custom field values' two value indexes become partial: a value is text or a number,
 * never both, so each row was an entry of nulls in the other column's index. Every read of them compares the
 * column (a filter, a count) or says IS NOT NULL (a choice's values in use, a field's deletion). A million
 * values went in in 2.9 s instead of 3.7 s on PostgreSQL.
 */
/** The field values' two value indexes rebuilt: each of its own column's values only (`partial`), or of every row. */
async function valueIndexes(db: Kysely<unknown>, partial: boolean): Promise<void> {
  for (const column of ['value_text', 'value_number'] as const) {
    const index = `voter_field_values_${column.slice(6)}_idx`;
    await db.schema.dropIndex(index).execute();
    const create = db.schema
      .createIndex(index)
      .on('voter_field_values')
      .columns(['workspace_id', 'field_key', column, 'voter_id']);
    await (partial ? create.where(sql.ref(column), 'is not', null) : create).execute();
  }
}

export async function up(db: Kysely<unknown>): Promise<void> {
  await valueIndexes(db, true);
  if (!isPostgres(db)) return;
  await sql`ALTER TABLE voter_tags DROP CONSTRAINT IF EXISTS voter_tags_voter_id_fkey`.execute(db);
  await sql`ALTER TABLE voter_field_values DROP CONSTRAINT IF EXISTS voter_field_values_voter_id_fkey`.execute(
    db,
  );
  await sql`CREATE FUNCTION voter_side_rows_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      DELETE FROM voter_tags t USING old_rows o WHERE t.voter_id = o.id;
      DELETE FROM voter_field_values f USING old_rows o WHERE f.voter_id = o.id;
      RETURN NULL;
    END $$`.execute(db);
  await sql`CREATE TRIGGER voters_side_rows_delete AFTER DELETE ON voters REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION voter_side_rows_deleted()`.execute(db);
  // Rows left by a voter deleted before this migration cannot exist (the keys cascaded), so nothing to clean.
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await valueIndexes(db, false);
  if (!isPostgres(db)) return;
  await sql`DROP TRIGGER voters_side_rows_delete ON voters`.execute(db);
  await sql`DROP FUNCTION voter_side_rows_deleted`.execute(db);
  await sql`DELETE FROM voter_tags t WHERE NOT EXISTS (SELECT 1 FROM voters v WHERE v.id = t.voter_id)`.execute(
    db,
  );
  await sql`DELETE FROM voter_field_values f WHERE NOT EXISTS (SELECT 1 FROM voters v WHERE v.id = f.voter_id)`.execute(
    db,
  );
  await sql`ALTER TABLE voter_tags ADD FOREIGN KEY (voter_id) REFERENCES voters(id) ON DELETE CASCADE`.execute(
    db,
  );
  await sql`ALTER TABLE voter_field_values ADD FOREIGN KEY (voter_id) REFERENCES voters(id) ON DELETE CASCADE`.execute(
    db,
  );
}
