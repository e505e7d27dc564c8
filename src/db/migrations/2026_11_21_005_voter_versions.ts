import { type Kysely, sql } from 'kysely';
import { bigintType, isPostgres } from './helpers.ts';

/**
 * `voter_counts.version`: a number that changes, in the same transaction, whenever a voter of the workspace
 * is created or deleted, or changes in a column that a list filters or searches on (name, email, phone,
 * constituency, booth, ward). What a list has worked out from the workspace's voters (the exact total of a
 * search, where a page starts) stays valid while it is unchanged, so it can be kept between requests and
 * across processes without ever being stale; an edit of an address alone keeps it.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('voter_counts')
    .addColumn('version', bigintType(db), (c) => c.notNull().defaultTo(0))
    .execute();

  if (isPostgres(db)) {
    // Statement-level, as the counting triggers: a million-row statement bumps each workspace once.
    await sql`CREATE OR REPLACE FUNCTION voter_counts_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        UPDATE voter_counts c SET total = c.total + n.added, version = c.version + 1
          FROM (SELECT workspace_id, count(*) AS added FROM new_rows GROUP BY workspace_id) n
          WHERE c.workspace_id = n.workspace_id;
        RETURN NULL;
      END $$`.execute(db);
    await sql`CREATE OR REPLACE FUNCTION voter_counts_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        UPDATE voter_counts c SET total = c.total - o.removed, version = c.version + 1
          FROM (SELECT workspace_id, count(*) AS removed FROM old_rows GROUP BY workspace_id) o
          WHERE c.workspace_id = o.workspace_id;
        RETURN NULL;
      END $$`.execute(db);
    await sql`CREATE FUNCTION voter_counts_updated() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        UPDATE voter_counts c SET version = c.version + 1
          FROM (SELECT DISTINCT unnest(ARRAY[n.workspace_id, o.workspace_id]) AS workspace_id
                FROM new_rows n JOIN old_rows o ON o.id = n.id
                WHERE (n.workspace_id, n.name, n.email, n.phone, n.constituency_key, n.booth, n.ward)
                  IS DISTINCT FROM (o.workspace_id, o.name, o.email, o.phone, o.constituency_key, o.booth, o.ward)) n
          WHERE c.workspace_id = n.workspace_id;
        RETURN NULL;
      END $$`.execute(db);
    await sql`CREATE TRIGGER voters_count_update AFTER UPDATE ON voters
      REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
      FOR EACH STATEMENT EXECUTE FUNCTION voter_counts_updated()`.execute(db);
  } else {
    await sql`DROP TRIGGER voters_count_insert`.execute(db);
    await sql`DROP TRIGGER voters_count_delete`.execute(db);
    await sql`CREATE TRIGGER voters_count_insert AFTER INSERT ON voters BEGIN
      UPDATE voter_counts SET total = total + 1, version = version + 1 WHERE workspace_id = new.workspace_id;
    END`.execute(db);
    await sql`CREATE TRIGGER voters_count_delete AFTER DELETE ON voters BEGIN
      UPDATE voter_counts SET total = total - 1, version = version + 1 WHERE workspace_id = old.workspace_id;
    END`.execute(db);
    await sql`CREATE TRIGGER voters_count_update
      AFTER UPDATE OF workspace_id, name, email, phone, constituency_key, booth, ward ON voters
      WHEN old.workspace_id IS NOT new.workspace_id OR old.name IS NOT new.name OR old.email IS NOT new.email
        OR old.phone IS NOT new.phone OR old.constituency_key IS NOT new.constituency_key
        OR old.booth IS NOT new.booth OR old.ward IS NOT new.ward
      BEGIN
        UPDATE voter_counts SET version = version + 1 WHERE workspace_id IN (old.workspace_id, new.workspace_id);
      END`.execute(db);
  }
}

export async function down(db: Kysely<unknown>): Promise<void> {
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
    await sql`DROP TRIGGER voters_count_update`.execute(db);
    await sql`DROP TRIGGER voters_count_insert`.execute(db);
    await sql`DROP TRIGGER voters_count_delete`.execute(db);
    await sql`CREATE TRIGGER voters_count_insert AFTER INSERT ON voters BEGIN
      UPDATE voter_counts SET total = total + 1 WHERE workspace_id = new.workspace_id;
    END`.execute(db);
    await sql`CREATE TRIGGER voters_count_delete AFTER DELETE ON voters BEGIN
      UPDATE voter_counts SET total = total - 1 WHERE workspace_id = old.workspace_id;
    END`.execute(db);
  }
  await db.schema.alterTable('voter_counts').dropColumn('version').execute();
}
