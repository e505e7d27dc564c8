import type { Kysely } from 'kysely';
import { bigintType, timestampType, withId } from './helpers.ts';

/**
 * `audit_log`: who did what to a workspace's data, written in the transaction of the action itself. Rows are
 * never updated; the worker deletes those older than AUDIT_RETENTION_DAYS. `actor_name` is copied at write
 * time so the trail still reads after a user is renamed.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  const ts = timestampType(db);
  const ref = bigintType(db);
  await withId(db, db.schema.createTable('audit_log'))
    .addColumn('workspace_id', ref, (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('action', 'varchar(50)', (c) => c.notNull())
    .addColumn('actor_id', ref)
    .addColumn('actor_name', 'varchar(200)')
    .addColumn('target_type', 'varchar(50)')
    .addColumn('target_id', 'varchar(100)')
    .addColumn('ip', 'varchar(100)')
    // JSON text: what the action was given and did (filters, row counts, changed fields); never a secret.
    .addColumn('details', 'text')
    .addColumn('created_at', ts, (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('audit_log_workspace_idx')
    .on('audit_log')
    .columns(['workspace_id', 'id'])
    .execute();
  await db.schema.createIndex('audit_log_created_idx').on('audit_log').columns(['created_at']).execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('audit_log').execute();
}
