import { type Kysely, sql } from 'kysely';

/**
 * Messages handed to a provider that never answered (PROVIDER_TIMEOUT_MS): they stay `sent` with no provider id
 * until a delivery report settles them, and the delivery worker fails (and refunds) those still unsettled after
 * UNCONFIRMED_AFTER_HOURS. This small partial index finds them without walking every sent message (SMTP email,
 * for one, stays `sent` for good).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createIndex('messages_unconfirmed_idx')
    .on('messages')
    .columns(['sent_at', 'id'])
    .where(sql<boolean>`status = 'sent' AND provider_message_id IS NULL`)
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('messages_unconfirmed_idx').execute();
}
