import { type Kysely, sql } from 'kysely';

/**
 * A lane's claim is shared between the workspaces with due messages on its channel (claimDueFairly): they are
 * found by a loose index scan, one seek per workspace, and each workspace's share is claimed in due order. Both
 * read the queued messages by channel, workspace and due time; the index by channel and due time (018), which
 * the claim read before, has no use left and goes.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createIndex('messages_due_workspace_idx')
    .on('messages')
    .columns(['channel', 'workspace_id', 'next_attempt_at', 'id'])
    .where(sql<boolean>`status = 'queued'`)
    .execute();
  await db.schema.dropIndex('messages_due_channel_idx').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createIndex('messages_due_channel_idx')
    .on('messages')
    .columns(['channel', 'next_attempt_at', 'id'])
    .where(sql<boolean>`status = 'queued'`)
    .execute();
  await db.schema.dropIndex('messages_due_workspace_idx').execute();
}
