import type { Kysely } from 'kysely';

/**
 * History filtered by recipient (`GET /api/messages/history?to=...`): an index on (workspace_id, to, id), so
 * the filter and its newest-first order are read from the index, not from a scan of the workspace's messages.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createIndex('messages_workspace_to_idx')
    .on('messages')
    .columns(['workspace_id', 'to', 'id'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('messages_workspace_to_idx').execute();
}
