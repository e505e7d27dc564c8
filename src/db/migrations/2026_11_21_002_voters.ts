import { type Kysely, sql } from 'kysely';
import { bigintType, isPostgres, timestampType, withId } from './helpers.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await createVoters(db);
  await createVoterCounts(db);
  await createSegments(db);
}

/** Voters, and the indexes that cover the exact filters. */
async function createVoters(db: Kysely<unknown>): Promise<void> {
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
  // Filter indexes that cover every combination of the three exact filters, so counting a filtered list
  // never visits the table (SQLite appends the rowid, the id, to each).
  await db.schema
    .createIndex('voters_constituency_idx')
    .on('voters')
    .columns(['workspace_id', 'constituency_key', 'ward', 'booth'])
    .execute();
  await db.schema
    .createIndex('voters_ward_idx')
    .on('voters')
    .columns(['workspace_id', 'ward', 'booth'])
    .execute();
  await db.schema.createIndex('voters_booth_idx').on('voters').columns(['workspace_id', 'booth']).execute();
}

/** The exact number of voters per workspace, kept by triggers. */
async function createVoterCounts(db: Kysely<unknown>): Promise<void> {
  const ref = bigintType(db);
  // The exact number of voters per workspace, kept by triggers in the transaction that changes voters: the
  // unfiltered list's total without counting a million rows.
  await db.schema
    .createTable('voter_counts')
    .addColumn('workspace_id', ref, (c) => c.primaryKey().references('workspaces.id').onDelete('cascade'))
    .addColumn('total', ref, (c) => c.notNull().defaultTo(0))
    .execute();
  await sql`INSERT INTO voter_counts (workspace_id, total) SELECT id, 0 FROM workspaces`.execute(db);

  if (isPostgres(db)) {
    await sql`CREATE FUNCTION voter_counts_new_workspace() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN INSERT INTO voter_counts (workspace_id, total) VALUES (NEW.id, 0); RETURN NULL; END $$`.execute(
      db,
    );
    await sql`CREATE TRIGGER workspaces_voter_counts AFTER INSERT ON workspaces
      FOR EACH ROW EXECUTE FUNCTION voter_counts_new_workspace()`.execute(db);
    // Statement-level with transition tables: a million-row INSERT ... SELECT updates the count once.
    await sql`CREATE FUNCTION voter_counts_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        UPDATE voter_counts c SET total = c.total + n.added
          FROM (SELECT workspace_id, count(*) AS added FROM new_rows GROUP BY workspace_id) n
          WHERE c.workspace_id = n.workspace_id;
        RETURN NULL;
      END $$`.execute(db);
    await sql`CREATE FUNCTION voter_counts_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        UPDATE voter_counts c SET total = c.total - o.removed
          FROM (SELECT workspace_id, count(*) AS removed FROM old_rows GROUP BY workspace_id) o
          WHERE c.workspace_id = o.workspace_id;
        RETURN NULL;
      END $$`.execute(db);
    await sql`CREATE TRIGGER voters_count_insert AFTER INSERT ON voters REFERENCING NEW TABLE AS new_rows
      FOR EACH STATEMENT EXECUTE FUNCTION voter_counts_inserted()`.execute(db);
    await sql`CREATE TRIGGER voters_count_delete AFTER DELETE ON voters REFERENCING OLD TABLE AS old_rows
      FOR EACH STATEMENT EXECUTE FUNCTION voter_counts_deleted()`.execute(db);

    // Substring search (ILIKE '%term%') served by trigram GIN indexes instead of a scan.
    await sql`CREATE EXTENSION IF NOT EXISTS pg_trgm`.execute(db);
    await sql`CREATE INDEX voters_name_trgm ON voters USING gin (name gin_trgm_ops)`.execute(db);
    await sql`CREATE INDEX voters_email_trgm ON voters USING gin (email gin_trgm_ops)`.execute(db);
    await sql`CREATE INDEX voters_phone_trgm ON voters USING gin (phone gin_trgm_ops)`.execute(db);
  } else {
    await sql`CREATE TRIGGER workspaces_voter_counts AFTER INSERT ON workspaces BEGIN
      INSERT INTO voter_counts (workspace_id, total) VALUES (new.id, 0);
    END`.execute(db);
    await sql`CREATE TRIGGER voters_count_insert AFTER INSERT ON voters BEGIN
      UPDATE voter_counts SET total = total + 1 WHERE workspace_id = new.workspace_id;
    END`.execute(db);
    await sql`CREATE TRIGGER voters_count_delete AFTER DELETE ON voters BEGIN
      UPDATE voter_counts SET total = total - 1 WHERE workspace_id = old.workspace_id;
    END`.execute(db);

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
}

/** Segments: saved filters that campaigns send to. */
async function createSegments(db: Kysely<unknown>): Promise<void> {
  const ts = timestampType(db);
  const ref = bigintType(db);
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
  if (isPostgres(db)) {
    await sql`DROP TRIGGER workspaces_voter_counts ON workspaces`.execute(db);
    await sql`DROP FUNCTION voter_counts_new_workspace, voter_counts_inserted, voter_counts_deleted CASCADE`.execute(
      db,
    );
  } else {
    await sql`DROP TRIGGER workspaces_voter_counts`.execute(db);
    await sql`DROP TABLE voters_fts`.execute(db);
  }
  await db.schema.dropTable('voters').execute();
  await db.schema.dropTable('voter_counts').execute();
}
