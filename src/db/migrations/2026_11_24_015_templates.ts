import type { Kysely } from 'kysely';
import { bigintType, timestampType, withId } from './helpers.ts';

/** `templates`: message templates (`tpl_<n>`) with voter variables, their category and DLT registration. */
export async function up(db: Kysely<unknown>): Promise<void> {
  const ts = timestampType(db);
  const ref = bigintType(db);
  await withId(db, db.schema.createTable('templates'))
    .addColumn('workspace_id', ref, (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('name', 'varchar(200)', (c) => c.notNull())
    .addColumn('channel', 'varchar(10)', (c) => c.notNull())
    .addColumn('body', 'text', (c) => c.notNull())
    .addColumn('language', 'varchar(20)', (c) => c.notNull())
    // promotional, service or transactional: service and transactional are not held by quiet hours.
    .addColumn('category', 'varchar(20)', (c) => c.notNull())
    .addColumn('dlt_template_id', 'varchar(64)')
    .addColumn('sender_id', 'varchar(20)')
    .addColumn('subject', 'varchar(200)')
    .addColumn('created_at', ts, (c) => c.notNull())
    .addColumn('updated_at', ts, (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('templates_workspace_idx')
    .on('templates')
    .columns(['workspace_id', 'id'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('templates').execute();
}
