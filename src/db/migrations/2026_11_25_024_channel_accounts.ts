import { type Kysely, sql } from 'kysely';
import { bigintType, timestampType, withId } from './helpers.ts';

/**
 * `channel_accounts`: each workspace's own provider accounts (MSG91, Exotel, the WhatsApp Cloud API, Twilio,
 * SMTP, the sandbox). `channels`, `settings` and `default_for` are JSON text; `credentials` is the JSON of the
 * secrets sealed with the service's key (SecretBox, purpose `channel-accounts`); `callback_token` and
 * `verify_token` are sealed the same way (they are shown on every read, so they are encrypted, not hashed).
 * Messages say which account carried them (`channel_account_id`, null for the deployment's provider), and
 * templates gain the provider's own ids (`provider_template_ids`, JSON).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  const ts = timestampType(db);
  const ref = bigintType(db);
  await withId(db, db.schema.createTable('channel_accounts'))
    .addColumn('workspace_id', ref, (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('name', 'varchar(200)', (c) => c.notNull())
    .addColumn('provider', 'varchar(20)', (c) => c.notNull())
    .addColumn('channels', 'text', (c) => c.notNull())
    .addColumn('settings', 'text', (c) => c.notNull())
    .addColumn('credentials', 'text', (c) => c.notNull())
    .addColumn('credentials_set', 'text', (c) => c.notNull())
    .addColumn('default_for', 'text', (c) => c.notNull())
    .addColumn('send_rate_per_second', 'integer')
    // Set when the account is switched off (PATCH active=false, or the provider refused its credentials).
    .addColumn('disabled_at', ts)
    .addColumn('disabled_reason', 'text')
    .addColumn('callback_token', 'text', (c) => c.notNull())
    .addColumn('verify_token', 'text')
    .addColumn('created_at', ts, (c) => c.notNull())
    .addColumn('updated_at', ts, (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('channel_accounts_workspace_idx')
    .on('channel_accounts')
    .columns(['workspace_id', 'id'])
    .execute();
  await db.schema.alterTable('messages').addColumn('channel_account_id', ref).execute();
  // Delivery reports name the provider's id (MSG91's request id with the number, Exotel's Sid, Meta's wamid).
  await db.schema
    .createIndex('messages_provider_message_idx')
    .on('messages')
    .columns(['provider_message_id'])
    .where(sql.ref('provider_message_id'), 'is not', null)
    .execute();
  await db.schema.alterTable('campaigns').addColumn('channel_account_id', ref).execute();
  await db.schema.alterTable('templates').addColumn('provider_template_ids', 'text').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('templates').dropColumn('provider_template_ids').execute();
  await db.schema.alterTable('campaigns').dropColumn('channel_account_id').execute();
  await db.schema.dropIndex('messages_provider_message_idx').execute();
  await db.schema.alterTable('messages').dropColumn('channel_account_id').execute();
  await db.schema.dropTable('channel_accounts').execute();
}
