import type { Kysely } from 'kysely';
import { bigintType, timestampType, withId } from './helpers.ts';

/**
 * `live_events`: what `GET /api/events/stream` sends, written in the transaction of the change that caused it
 * (so an event exists exactly when its change committed, whichever process made it), read by every API
 * process's event hub and kept a while for `Last-Event-ID`. `assigned_to` is the conversation's assignee for
 * conversation events (a volunteer sees only theirs).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  const ts = timestampType(db);
  const ref = bigintType(db);
  await withId(db, db.schema.createTable('live_events'))
    .addColumn('workspace_id', ref, (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('type', 'varchar(40)', (c) => c.notNull())
    .addColumn('data', 'text', (c) => c.notNull())
    .addColumn('assigned_to', ref)
    .addColumn('created_at', ts, (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('live_events_workspace_idx')
    .on('live_events')
    .columns(['workspace_id', 'id'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('live_events').execute();
}
