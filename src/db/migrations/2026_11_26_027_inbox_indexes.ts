import type { Kysely } from 'kysely';

/**
 * - `live_events` by age: the worker's prune deletes what is older than an hour without reading the table.
 * - A member's inbox in order: their conversations by last activity, with the columns its filters test
 *   (status, unread, channel), so a volunteer's page and its count read this index alone, with no sort.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.createIndex('live_events_created_idx').on('live_events').columns(['created_at']).execute();
  await db.schema
    .createIndex('conversations_inbox_idx')
    .on('conversations')
    .columns(['workspace_id', 'assigned_to', 'last_message_at', 'id', 'status', 'unread_count', 'channel'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('conversations_inbox_idx').execute();
  await db.schema.dropIndex('live_events_created_idx').execute();
}
