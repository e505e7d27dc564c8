import type { Kysely } from 'kysely';

/**
 * A provider's id for an inbound message (Twilio's MessageSid): a replayed, validly signed callback was stored
 * twice (and emitted twice). The unique index makes the second a no-op, per workspace and provider.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('inbound_messages').addColumn('provider_message_id', 'text').execute();
  await db.schema
    .createIndex('inbound_messages_provider_id_uq')
    .on('inbound_messages')
    .columns(['workspace_id', 'provider', 'provider_message_id'])
    .unique()
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('inbound_messages_provider_id_uq').execute();
  await db.schema.alterTable('inbound_messages').dropColumn('provider_message_id').execute();
}
