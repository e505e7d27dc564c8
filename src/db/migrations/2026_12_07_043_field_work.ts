import { type Kysely, sql } from 'kysely';
import { bigintType, isPostgres, timestampType, withId } from './helpers.ts';

/**
 * Field work (the contract's fourth part, "Field work: booths, roll pages and poll day"):
 * - `turfs` (a name, voter filters and the survey asked at the door) and `turf_members` (who works each turf);
 * - `visits`, one per door knocked, idempotent by the device's `client_id` (unique in a workspace);
 * - `poll_marks`, each booth agent's mark as it came (idempotent by `client_id`), and `poll_voted`, each voter's
 *   state: the mark with the latest `marked_at` (what turnout and the to-call list read);
 * - `voter_stamps`: when each of a voter's support level and custom field values last changed on the service. A
 *   change of support level or of a field's value is stamped by triggers whoever makes it (the office, an import,
 *   a bulk edit, a survey, a visit); a value given to an empty field is stamped by the service's own writes
 *   (setFieldValues), not by a trigger: one on every inserted value cost an import with custom fields 10-15%. A
 *   visit made offline applies a field only if it did not change after the visit's `visited_at`.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await turfTables(db);
  await visitTable(db);
  await pollDayTables(db);
  await voterStamps(db);
}

async function turfTables(db: Kysely<unknown>) {
  const ref = bigintType(db);
  const ts = timestampType(db);
  await withId(db, db.schema.createTable('turfs'))
    .addColumn('workspace_id', ref, (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('filters', 'text', (c) => c.notNull())
    .addColumn('survey_id', ref, (c) => c.references('surveys.id').onDelete('set null'))
    .addColumn('created_at', ts, (c) => c.notNull())
    .addColumn('updated_at', ts, (c) => c.notNull())
    .execute();
  await db.schema.createIndex('turfs_workspace_idx').on('turfs').columns(['workspace_id', 'id']).execute();
  await db.schema
    .createTable('turf_members')
    .addColumn('turf_id', ref, (c) => c.notNull().references('turfs.id').onDelete('cascade'))
    .addColumn('user_id', ref, (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('workspace_id', ref, (c) => c.notNull())
    .addPrimaryKeyConstraint('turf_members_pk', ['turf_id', 'user_id'])
    .execute();
  await db.schema
    .createIndex('turf_members_user_idx')
    .on('turf_members')
    .columns(['workspace_id', 'user_id', 'turf_id'])
    .execute();
}

async function visitTable(db: Kysely<unknown>) {
  const ref = bigintType(db);
  const ts = timestampType(db);
  await withId(db, db.schema.createTable('visits'))
    .addColumn('workspace_id', ref, (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('client_id', 'text', (c) => c.notNull())
    .addColumn('voter_id', ref, (c) => c.notNull().references('voters.id').onDelete('cascade'))
    .addColumn('user_id', ref, (c) => c.references('users.id').onDelete('set null'))
    .addColumn('outcome', 'text', (c) => c.notNull())
    .addColumn('support_level', 'integer')
    .addColumn('tags_add', 'text')
    .addColumn('fields', 'text')
    .addColumn('note', 'text')
    .addColumn('survey_id', ref)
    .addColumn('response_id', ref)
    .addColumn('visited_at', ts, (c) => c.notNull())
    .addColumn('lat', 'real')
    .addColumn('lon', 'real')
    .addColumn('not_applied', 'text', (c) => c.notNull().defaultTo('[]'))
    .addColumn('created_at', ts, (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('visits_client_uq')
    .on('visits')
    .columns(['workspace_id', 'client_id'])
    .unique()
    .execute();
  await db.schema.createIndex('visits_voter_idx').on('visits').columns(['voter_id', 'visited_at']).execute();
  await db.schema
    .createIndex('visits_user_idx')
    .on('visits')
    .columns(['workspace_id', 'user_id', 'id'])
    .execute();
}

async function pollDayTables(db: Kysely<unknown>) {
  const ref = bigintType(db);
  const ts = timestampType(db);
  await withId(db, db.schema.createTable('poll_marks'))
    .addColumn('workspace_id', ref, (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('client_id', 'text', (c) => c.notNull())
    .addColumn('voter_id', ref, (c) => c.notNull().references('voters.id').onDelete('cascade'))
    .addColumn('user_id', ref, (c) => c.references('users.id').onDelete('set null'))
    .addColumn('voted', 'integer', (c) => c.notNull())
    .addColumn('marked_at', ts, (c) => c.notNull())
    .addColumn('created_at', ts, (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('poll_marks_client_uq')
    .on('poll_marks')
    .columns(['workspace_id', 'client_id'])
    .unique()
    .execute();
  await db.schema.createIndex('poll_marks_voter_idx').on('poll_marks').column('voter_id').execute();
  await db.schema
    .createTable('poll_voted')
    .addColumn('voter_id', ref, (c) => c.primaryKey().references('voters.id').onDelete('cascade'))
    .addColumn('workspace_id', ref, (c) => c.notNull())
    .addColumn('voted', 'integer', (c) => c.notNull())
    .addColumn('marked_at', ts, (c) => c.notNull())
    // The voter's booth, part and whether a supporter, kept in step by a trigger on voters: turnout counts the
    // marked voters by group from this table alone (1 s at 500,000 marks joined to voters; tens of ms so).
    .addColumn('booth_key', 'text')
    .addColumn('part_number', 'integer')
    .addColumn('supporter', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema
    .createIndex('poll_voted_booth_idx')
    .on('poll_voted')
    .columns(['workspace_id', 'voted', 'booth_key', 'supporter'])
    .execute();
  await db.schema
    .createIndex('poll_voted_part_idx')
    .on('poll_voted')
    .columns(['workspace_id', 'voted', 'part_number', 'supporter'])
    .execute();
  // Supporters (support level 1 or 2) by booth and by part, from indexes of the supporters alone.
  await sql`CREATE INDEX voters_supporters_booth_idx ON voters (workspace_id, booth_key) WHERE support_level IN (1, 2)`.execute(
    db,
  );
  await sql`CREATE INDEX voters_supporters_part_idx ON voters (workspace_id, part_number) WHERE support_level IN (1, 2)`.execute(
    db,
  );
  if (isPostgres(db)) {
    await sql`CREATE FUNCTION poll_voted_follow() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        UPDATE poll_voted SET booth_key = NEW.booth_key, part_number = NEW.part_number,
          supporter = CASE WHEN NEW.support_level IN (1, 2) THEN 1 ELSE 0 END
          WHERE voter_id = NEW.id;
        RETURN NULL;
      END $$`.execute(db);
    await sql`CREATE TRIGGER voters_poll_voted AFTER UPDATE OF booth_key, part_number, support_level ON voters
      FOR EACH ROW WHEN ((OLD.booth_key, OLD.part_number, OLD.support_level)
        IS DISTINCT FROM (NEW.booth_key, NEW.part_number, NEW.support_level))
      EXECUTE FUNCTION poll_voted_follow()`.execute(db);
  } else {
    await sql`CREATE TRIGGER voters_poll_voted AFTER UPDATE OF booth_key, part_number, support_level ON voters
      WHEN old.booth_key IS NOT new.booth_key OR old.part_number IS NOT new.part_number
        OR old.support_level IS NOT new.support_level BEGIN
        UPDATE poll_voted SET booth_key = new.booth_key, part_number = new.part_number,
          supporter = CASE WHEN new.support_level IN (1, 2) THEN 1 ELSE 0 END
          WHERE voter_id = new.id;
      END`.execute(db);
  }
}

async function voterStamps(db: Kysely<unknown>) {
  const ref = bigintType(db);
  await db.schema
    .createTable('voter_stamps')
    .addColumn('voter_id', ref, (c) => c.notNull().references('voters.id').onDelete('cascade'))
    .addColumn('field', 'text', (c) => c.notNull())
    .addColumn('at', timestampType(db), (c) => c.notNull())
    .addPrimaryKeyConstraint('voter_stamps_pk', ['voter_id', 'field'])
    .execute();
  if (isPostgres(db)) {
    await sql`CREATE FUNCTION voter_stamp_support() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        INSERT INTO voter_stamps (voter_id, field, at) VALUES (NEW.id, 'support_level', now())
          ON CONFLICT (voter_id, field) DO UPDATE SET at = excluded.at;
        RETURN NULL;
      END $$`.execute(db);
    await sql`CREATE TRIGGER voters_stamp_support AFTER UPDATE OF support_level ON voters FOR EACH ROW
      WHEN (OLD.support_level IS DISTINCT FROM NEW.support_level) EXECUTE FUNCTION voter_stamp_support()`.execute(
      db,
    );
    await sql`CREATE FUNCTION voter_stamp_value() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        INSERT INTO voter_stamps (voter_id, field, at) VALUES (NEW.voter_id, 'fields.' || NEW.field_key, now())
          ON CONFLICT (voter_id, field) DO UPDATE SET at = excluded.at;
        RETURN NULL;
      END $$`.execute(db);
    await sql`CREATE TRIGGER voter_field_values_stamp_update AFTER UPDATE ON voter_field_values FOR EACH ROW
      WHEN ((OLD.value_text, OLD.value_number) IS DISTINCT FROM (NEW.value_text, NEW.value_number))
      EXECUTE FUNCTION voter_stamp_value()`.execute(db);
  } else {
    const now = sql.raw(`strftime('%Y-%m-%dT%H:%M:%fZ', 'now')`);
    await sql`CREATE TRIGGER voters_stamp_support AFTER UPDATE OF support_level ON voters
      WHEN old.support_level IS NOT new.support_level BEGIN
        INSERT INTO voter_stamps (voter_id, field, at) VALUES (new.id, 'support_level', ${now})
          ON CONFLICT (voter_id, field) DO UPDATE SET at = excluded.at;
      END`.execute(db);
    await sql`CREATE TRIGGER voter_field_values_stamp_update AFTER UPDATE ON voter_field_values
      WHEN old.value_text IS NOT new.value_text OR old.value_number IS NOT new.value_number BEGIN
        INSERT INTO voter_stamps (voter_id, field, at) VALUES (new.voter_id, 'fields.' || new.field_key, ${now})
          ON CONFLICT (voter_id, field) DO UPDATE SET at = excluded.at;
      END`.execute(db);
  }
}

export async function down(db: Kysely<unknown>): Promise<void> {
  if (isPostgres(db)) {
    await sql`DROP TRIGGER voters_stamp_support ON voters`.execute(db);
    await sql`DROP TRIGGER voter_field_values_stamp_update ON voter_field_values`.execute(db);
    await sql`DROP FUNCTION voter_stamp_support()`.execute(db);
    await sql`DROP FUNCTION voter_stamp_value()`.execute(db);
    await sql`DROP TRIGGER voters_poll_voted ON voters`.execute(db);
    await sql`DROP FUNCTION poll_voted_follow()`.execute(db);
  } else {
    await sql`DROP TRIGGER voters_poll_voted`.execute(db);
    await sql`DROP TRIGGER voters_stamp_support`.execute(db);
    await sql`DROP TRIGGER voter_field_values_stamp_update`.execute(db);
  }
  await db.schema.dropIndex('voters_supporters_booth_idx').execute();
  await db.schema.dropIndex('voters_supporters_part_idx').execute();
  for (const table of ['voter_stamps', 'poll_voted', 'poll_marks', 'visits', 'turf_members', 'turfs'])
    await db.schema.dropTable(table).execute();
}
