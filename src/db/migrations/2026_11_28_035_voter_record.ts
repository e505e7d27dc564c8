import { type Kysely, sql } from 'kysely';
import { bigintType, isPostgres, timestampType, withId } from './helpers.ts';

/**
 * The voter record an office keeps (the contract's fourth part): the roll's identifiers, the family, age,
 * support, tags and custom fields.
 *
 * - Scalar fields are columns of `voters`. `birth_key` is what age filters compare: the known birth date, or
 *   1 January of the estimated birth year (so `age_min`/`age_max` agree with the age an item shows).
 *   `household_key` is the household (`p:<part>:<house>`, or `a:<address>` without them), kept on write.
 * - Tags are rows of `voter_tags` (one per voter and tag key: a tag filter is a seek in the primary key),
 *   with the label each key was first written with in `voter_tag_names`.
 * - Custom fields are defined in `voter_fields`; their values are rows of `voter_field_values`, text and
 *   number kept apart so equality and ranges are index seeks on either database.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await addRecordColumns(db);
  await createFieldTables(db);
  await createTagTables(db);
  // `search` also matches the name in the roll's regional script.
  if (isPostgres(db)) await postgresSearch(db);
  else await sqliteSearch(db);

  // An import reports the columns it did not use.
  await db.schema
    .alterTable('voter_imports')
    .addColumn('ignored_columns', 'text', (c) => c.notNull().defaultTo('[]'))
    .execute();
}

/** The record's columns on `voters`, and their indexes; the phone becomes optional. */
async function addRecordColumns(db: Kysely<unknown>): Promise<void> {
  const pg = isPostgres(db);
  const columns: Array<[string, 'text' | 'integer']> = [
    ['epic_number', 'text'],
    ['part_number', 'integer'],
    ['serial_number', 'integer'],
    ['page_number', 'integer'],
    ['house_number', 'text'],
    ['relation_name', 'text'],
    ['relation_type', 'text'],
    ['gender', 'text'],
    ['name_local', 'text'],
    ['language', 'text'],
    ['birth_date', 'text'],
    ['birth_key', 'text'],
    ['support_level', 'integer'],
    ['household_key', 'text'],
  ];
  for (const [name, type] of columns) await db.schema.alterTable('voters').addColumn(name, type).execute();

  // The roll has no phones: a voter imported from it with an EPIC number has none until one is added.
  if (pg) await sql`ALTER TABLE voters ALTER COLUMN phone DROP NOT NULL`.execute(db);
  else await dropSqliteNotNull(db, 'voters', 'phone');

  await db.schema
    .createIndex('voters_epic_uq')
    .on('voters')
    .columns(['workspace_id', 'epic_number'])
    .unique()
    .execute();
  await db.schema
    .createIndex('voters_part_serial_uq')
    .on('voters')
    .columns(['workspace_id', 'part_number', 'serial_number'])
    .unique()
    .execute();
  await db.schema
    .createIndex('voters_part_page_idx')
    .on('voters')
    .columns(['workspace_id', 'part_number', 'page_number'])
    .execute();
  await db.schema
    .createIndex('voters_birth_idx')
    .on('voters')
    .columns(['workspace_id', 'birth_key'])
    .execute();
  await db.schema
    .createIndex('voters_household_idx')
    .on('voters')
    .columns(['workspace_id', 'household_key'])
    .execute();
  // A voter by email: the unsubscribe page's language, and linking a conversation to the voter who wrote in.
  await sql`CREATE INDEX voters_email_idx ON voters (workspace_id, email) WHERE email IS NOT NULL`.execute(
    db,
  );
  await db.schema
    .createIndex('voters_support_idx')
    .on('voters')
    .columns(['workspace_id', 'support_level'])
    .execute();
}

/** Custom fields: their definitions and the voters' values. */
async function createFieldTables(db: Kysely<unknown>): Promise<void> {
  const ts = timestampType(db);
  const ref = bigintType(db);
  const pg = isPostgres(db);
  await db.schema
    .createTable('voter_fields')
    .addColumn('workspace_id', ref, (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('key', 'text', (c) => c.notNull())
    .addColumn('label', 'text', (c) => c.notNull())
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('choices', 'text')
    .addColumn('sensitive', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', ts, (c) => c.notNull())
    .addPrimaryKeyConstraint('voter_fields_pk', ['workspace_id', 'key'])
    .execute();
  await db.schema
    .createTable('voter_field_values')
    .addColumn('voter_id', ref, (c) => c.notNull().references('voters.id').onDelete('cascade'))
    .addColumn('workspace_id', ref, (c) => c.notNull())
    .addColumn('field_key', 'text', (c) => c.notNull())
    .addColumn('value_text', 'text')
    .addColumn('value_number', pg ? 'double precision' : 'real')
    .addPrimaryKeyConstraint('voter_field_values_pk', ['voter_id', 'field_key'])
    .execute();
  await db.schema
    .createIndex('voter_field_values_text_idx')
    .on('voter_field_values')
    .columns(['workspace_id', 'field_key', 'value_text', 'voter_id'])
    .execute();
  await db.schema
    .createIndex('voter_field_values_number_idx')
    .on('voter_field_values')
    .columns(['workspace_id', 'field_key', 'value_number', 'voter_id'])
    .execute();
}

/** Tags (one row per voter and tag key), their labels, and the bulk-tagging jobs. */
async function createTagTables(db: Kysely<unknown>): Promise<void> {
  const ts = timestampType(db);
  const ref = bigintType(db);
  await db.schema
    .createTable('voter_tag_names')
    .addColumn('workspace_id', ref, (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('key', 'text', (c) => c.notNull())
    .addColumn('label', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('voter_tag_names_pk', ['workspace_id', 'key'])
    .execute();
  await db.schema
    .createTable('voter_tags')
    .addColumn('workspace_id', ref, (c) => c.notNull())
    .addColumn('tag_key', 'text', (c) => c.notNull())
    .addColumn('voter_id', ref, (c) => c.notNull().references('voters.id').onDelete('cascade'))
    .addPrimaryKeyConstraint('voter_tags_pk', ['workspace_id', 'tag_key', 'voter_id'])
    .execute();
  await db.schema.createIndex('voter_tags_voter_idx').on('voter_tags').columns(['voter_id']).execute();

  await withId(db, db.schema.createTable('voter_tag_jobs'))
    .addColumn('workspace_id', ref, (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('add_tags', 'text', (c) => c.notNull())
    .addColumn('remove_tags', 'text', (c) => c.notNull())
    .addColumn('filters', 'text', (c) => c.notNull())
    .addColumn('total', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('changed', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('after_id', ref, (c) => c.notNull().defaultTo(0))
    .addColumn('error', 'text')
    .addColumn('created_by', ref)
    .addColumn('created_at', ts, (c) => c.notNull())
    .addColumn('updated_at', ts, (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('voter_tag_jobs_status_idx')
    .on('voter_tag_jobs')
    .columns(['status', 'id'])
    .execute();
}

/** voter_search gains name_local (and loses phone's NOT NULL); its triggers copy it. */
async function postgresSearch(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE voter_search ALTER COLUMN phone DROP NOT NULL`.execute(db);
  await sql`ALTER TABLE voter_search ADD COLUMN name_local text`.execute(db);
  await sql`CREATE INDEX voter_search_name_local_trgm ON voter_search USING gin (name_local gin_trgm_ops)`.execute(
    db,
  );
  await sql`CREATE OR REPLACE FUNCTION voter_search_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO voter_search (voter_id, workspace_id, name, email, phone, name_local)
        SELECT id, workspace_id, name, email, phone, name_local FROM new_rows;
      RETURN NULL;
    END $$`.execute(db);
  await sql`CREATE OR REPLACE FUNCTION voter_search_updated() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      UPDATE voter_search s SET name = n.name, email = n.email, phone = n.phone, name_local = n.name_local
        FROM new_rows n
        WHERE s.voter_id = n.id AND (s.name, s.email, s.phone, s.name_local)
          IS DISTINCT FROM (n.name, n.email, n.phone, n.name_local);
      RETURN NULL;
    END $$`.execute(db);
}

/** The FTS5 index is built again with name_local as a fourth column. */
async function sqliteSearch(db: Kysely<unknown>): Promise<void> {
  for (const trigger of ['voters_fts_insert', 'voters_fts_delete', 'voters_fts_update'])
    await sql.raw(`DROP TRIGGER ${trigger}`).execute(db);
  await sql`DROP TABLE voters_fts`.execute(db);
  await sql`CREATE VIRTUAL TABLE voters_fts USING fts5(name, email, phone, name_local, content='voters',
    content_rowid='id', tokenize='trigram')`.execute(db);
  const cols = 'name, email, phone, name_local';
  await sql
    .raw(
      `CREATE TRIGGER voters_fts_insert AFTER INSERT ON voters BEGIN
      INSERT INTO voters_fts(rowid, ${cols}) VALUES (new.id, new.name, new.email, new.phone, new.name_local);
    END`,
    )
    .execute(db);
  await sql
    .raw(
      `CREATE TRIGGER voters_fts_delete AFTER DELETE ON voters BEGIN
      INSERT INTO voters_fts(voters_fts, rowid, ${cols}) VALUES ('delete', old.id, old.name, old.email, old.phone, old.name_local);
    END`,
    )
    .execute(db);
  await sql
    .raw(
      `CREATE TRIGGER voters_fts_update AFTER UPDATE OF ${cols} ON voters BEGIN
      INSERT INTO voters_fts(voters_fts, rowid, ${cols}) VALUES ('delete', old.id, old.name, old.email, old.phone, old.name_local);
      INSERT INTO voters_fts(rowid, ${cols}) VALUES (new.id, new.name, new.email, new.phone, new.name_local);
    END`,
    )
    .execute(db);
  await sql`INSERT INTO voters_fts(voters_fts) VALUES ('rebuild')`.execute(db);
}

/**
 * SQLite cannot ALTER a column's NOT NULL away. Removing a NOT NULL constraint does not change the file's
 * format, so SQLite's documented procedure (lang_altertable.html, "making other kinds of table schema
 * changes") edits the stored CREATE TABLE statement instead of copying the table: instant at any size.
 */
async function dropSqliteNotNull(db: Kysely<unknown>, table: string, column: string): Promise<void> {
  const row = await sql<{
    sql: string;
  }>`SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ${table}`.execute(db);
  const create = row.rows[0]?.sql;
  if (!create) throw new Error(`no table ${table}`);
  const pattern = new RegExp(`("?${column}"?\\s+[a-z]+(?:\\(\\d+\\))?)\\s+not null`, 'i');
  if (!pattern.test(create)) throw new Error(`${table}.${column} has no NOT NULL to drop`);
  const edited = create.replace(pattern, '$1');
  const version = await sql<{ schema_version: number }>`PRAGMA schema_version`.execute(db);
  await sql`PRAGMA writable_schema = ON`.execute(db);
  await sql`UPDATE sqlite_master SET sql = ${edited} WHERE type = 'table' AND name = ${table}`.execute(db);
  await sql.raw(`PRAGMA schema_version = ${Number(version.rows[0]!.schema_version) + 1}`).execute(db);
  await sql`PRAGMA writable_schema = OFF`.execute(db);
}
