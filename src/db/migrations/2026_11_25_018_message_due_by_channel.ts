import { type Kysely, sql } from 'kysely';

/**
 * The delivery worker claims due messages per channel (a lane each, so a hung provider delays only its own
 * channel), but `messages_due_idx` (next_attempt_at, id) had no channel: a lane with nothing due walked every
 * other channel's due messages to find none. With a 1,000,000-message SMS broadcast queued, each claim of the
 * three idle lanes read the whole queue (about 30 ms at 300,000 and growing), and the drain fell from 35,000
 * to 4,400 messages/s. The index now starts with the channel.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createIndex('messages_due_channel_idx')
    .on('messages')
    .columns(['channel', 'next_attempt_at', 'id'])
    .where(sql<boolean>`status = 'queued'`)
    .execute();
  await db.schema.dropIndex('messages_due_idx').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createIndex('messages_due_idx')
    .on('messages')
    .columns(['next_attempt_at', 'id'])
    .where(sql<boolean>`status = 'queued'`)
    .execute();
  await db.schema.dropIndex('messages_due_channel_idx').execute();
}
