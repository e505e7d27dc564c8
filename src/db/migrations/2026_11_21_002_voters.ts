import { type Kysely, sql } from 'kysely';
import { bigintType, isPostgres, timestampType, withId } from './helpers.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  const ts = timestampType(db);
  const ref = bigintType(db);

  await withId(db, db.schema.createTable('voters'))
    .addColumn('workspace_id', ref, (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('name', 'varchar(200)', (c) => c.notNull())
    // Lower-cased, spaces collapsed: with phone, the identity of a voter within a workspace.
    .addColumn('name_key', 'varchar(200)', (c) => c.notNull())
    .addColumn('phone', 'varchar(20)', (c) => c.notNull())
    .addColumn('email', 'varchar(254)')
    .addColumn('constituency', 'varchar(120)')
    // Lower-cased constituency: the filter matches it case-insensitively through a plain index.
    .addColumn('constituency_key', 'varchar(120)')
    .addColumn('booth', 'varchar(20)')
    .addColumn('ward', 'varchar(20)')
    .addColumn('address', 'varchar(500)')
    .addColumn('created_at', ts, (c) => c.notNull())
    .addColumn('updated_at', ts, (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('voters_identity_uq')
    .on('voters')
    .columns(['workspace_id', 'phone', 'name_key'])
    .unique()
    .execute();
  await db.schema.createIndex('voters_workspace_idx').on('voters').columns(['workspace_id', 'id']).execute();
  await db.schema
    .createIndex('voters_constituency_idx')
    .on('voters')
    .columns(['workspace_id', 'constituency_key', 'id'])
    .execute();
  await db.schema
    .createIndex('voters_booth_idx')
    .on('voters')
    .columns(['workspace_id', 'booth', 'id'])
    .execute();
  await db.schema
    .createIndex('voters_ward_idx')
    .on('voters')
    .columns(['workspace_id', 'ward', 'id'])
    .execute();

  if (isPostgres(db)) {
    // Substring search (ILIKE '%term%') served by trigram GIN indexes instead of a scan.
    await sql`CREATE EXTENSION IF NOT EXISTS pg_trgm`.execute(db);
    await sql`CREATE INDEX voters_name_trgm ON voters USING gin (name gin_trgm_ops)`.execute(db);
    await sql`CREATE INDEX voters_email_trgm ON voters USING gin (email gin_trgm_ops)`.execute(db);
    await sql`CREATE INDEX voters_phone_trgm ON voters USING gin (phone gin_trgm_ops)`.execute(db);
  } else {
    // An external-content FTS5 index with the trigram tokenizer (case-insensitive substrings of 3+
    // characters), kept in step with the table by triggers on every insert, update and delete.
    await sql`CREATE VIRTUAL TABLE voters_fts USING fts5(name, email, phone, content='voters', content_rowid='id', tokenize='trigram')`.execute(
      db,
    );
    await sql`CREATE TRIGGER voters_fts_insert AFTER INSERT ON voters BEGIN
      INSERT INTO voters_fts(rowid, name, email, phone) VALUES (new.id, new.name, new.email, new.phone);
    END`.execute(db);
    await sql`CREATE TRIGGER voters_fts_delete AFTER DELETE ON voters BEGIN
      INSERT INTO voters_fts(voters_fts, rowid, name, email, phone) VALUES ('delete', old.id, old.name, old.email, old.phone);
    END`.execute(db);
    await sql`CREATE TRIGGER voters_fts_update AFTER UPDATE OF name, email, phone ON voters BEGIN
      INSERT INTO voters_fts(voters_fts, rowid, name, email, phone) VALUES ('delete', old.id, old.name, old.email, old.phone);
      INSERT INTO voters_fts(rowid, name, email, phone) VALUES (new.id, new.name, new.email, new.phone);
    END`.execute(db);
  }

  await withId(db, db.schema.createTable('segments'))
    .addColumn('workspace_id', ref, (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('name', 'varchar(200)', (c) => c.notNull())
    // JSON text of the filter object: { constituency?, booth?, ward?, search? }.
    .addColumn('filters', 'text', (c) => c.notNull())
    .addColumn('created_at', ts, (c) => c.notNull())
    .addColumn('updated_at', ts, (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('segments_workspace_idx')
    .on('segments')
    .columns(['workspace_id', 'id'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('segments').execute();
  if (!isPostgres(db)) await sql`DROP TABLE voters_fts`.execute(db);
  await db.schema.dropTable('voters').execute();
}
