import type { Kysely } from 'kysely';
import { bigintType, isPostgres, timestampType, withId } from './helpers.ts';

/**
 * `voter_imports`: import jobs (`Prefer: respond-async`), claimed by a background loop with a lease
 * (`lease_owner`, `lease_until` in epoch milliseconds) so two workers never run one job at once and a job cut
 * short by a restart is claimed again once its lease runs out. `voter_import_files` holds stored files (the
 * upload, the errors.csv) in chunks on PostgreSQL, where a worker may run on another machine; SQLite keeps
 * them as files next to the database and leaves this table empty.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  const ts = timestampType(db);
  const ref = bigintType(db);
  await withId(db, db.schema.createTable('voter_imports'))
    .addColumn('workspace_id', ref, (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('user_id', ref)
    .addColumn('status', 'varchar(20)', (c) => c.notNull())
    .addColumn('file_name', 'varchar(255)', (c) => c.notNull())
    .addColumn('file_key', 'varchar(100)', (c) => c.notNull())
    .addColumn('bytes', ref, (c) => c.notNull())
    .addColumn('bytes_read', ref, (c) => c.notNull().defaultTo(0))
    .addColumn('rows_read', ref, (c) => c.notNull().defaultTo(0))
    .addColumn('imported', ref, (c) => c.notNull().defaultTo(0))
    .addColumn('updated', ref, (c) => c.notNull().defaultTo(0))
    .addColumn('failed', ref, (c) => c.notNull().defaultTo(0))
    // JSON text: the first IMPORT_MAX_ERRORS { row, field, message } entries.
    .addColumn('errors', 'text', (c) => c.notNull().defaultTo('[]'))
    .addColumn('message', 'text')
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('lease_owner', 'varchar(100)')
    .addColumn('lease_until', ref)
    .addColumn('created_at', ts, (c) => c.notNull())
    .addColumn('started_at', ts)
    .addColumn('finished_at', ts)
    .execute();
  await db.schema
    .createIndex('voter_imports_workspace_idx')
    .on('voter_imports')
    .columns(['workspace_id', 'id'])
    .execute();
  await db.schema
    .createIndex('voter_imports_status_idx')
    .on('voter_imports')
    .columns(['status', 'id'])
    .execute();
  await db.schema
    .createTable('voter_import_files')
    .addColumn('file_key', 'varchar(100)', (c) => c.notNull())
    .addColumn('seq', 'integer', (c) => c.notNull())
    .addColumn('data', isPostgres(db) ? 'bytea' : 'blob', (c) => c.notNull())
    .addPrimaryKeyConstraint('voter_import_files_pk', ['file_key', 'seq'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('voter_import_files').execute();
  await db.schema.dropTable('voter_imports').execute();
}
