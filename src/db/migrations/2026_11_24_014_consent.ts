import type { Kysely } from 'kysely';
import { bigintType, timestampType, withId } from './helpers.ts';

/**
 * Consent: `opt_outs` (an address that must not be messaged on a channel, or on any: `all`), `silence_periods`
 * (no bulk message to a constituency's voters while one is in force) and `inbound_messages` (replies).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  const ts = timestampType(db);
  const ref = bigintType(db);
  await withId(db, db.schema.createTable('opt_outs'))
    .addColumn('workspace_id', ref, (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    // E.164 phone or lower-cased email: the form messages.to has, so the worker matches it directly.
    .addColumn('address', 'varchar(254)', (c) => c.notNull())
    .addColumn('channel', 'varchar(10)', (c) => c.notNull())
    .addColumn('source', 'varchar(20)', (c) => c.notNull())
    .addColumn('reason', 'varchar(500)')
    .addColumn('created_at', ts, (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('opt_outs_address_uq')
    .on('opt_outs')
    .columns(['workspace_id', 'address', 'channel'])
    .unique()
    .execute();

  await withId(db, db.schema.createTable('silence_periods'))
    .addColumn('workspace_id', ref, (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('constituency', 'varchar(120)', (c) => c.notNull())
    // Lower-cased, as voters.constituency_key: matched case-insensitively.
    .addColumn('constituency_key', 'varchar(120)', (c) => c.notNull())
    .addColumn('starts_at', ts, (c) => c.notNull())
    .addColumn('ends_at', ts, (c) => c.notNull())
    .addColumn('reason', 'varchar(500)')
    .addColumn('created_at', ts, (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('silence_periods_workspace_idx')
    .on('silence_periods')
    .columns(['workspace_id', 'ends_at'])
    .execute();

  await withId(db, db.schema.createTable('inbound_messages'))
    .addColumn('workspace_id', ref, (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('channel', 'varchar(10)', (c) => c.notNull())
    .addColumn('from', 'varchar(254)', (c) => c.notNull())
    .addColumn('body', 'text', (c) => c.notNull())
    // `stop` or `start` when the reply was a consent keyword, else null.
    .addColumn('keyword', 'varchar(10)')
    .addColumn('provider', 'varchar(20)', (c) => c.notNull())
    .addColumn('created_at', ts, (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('inbound_messages_workspace_idx')
    .on('inbound_messages')
    .columns(['workspace_id', 'id'])
    .execute();

  // A Twilio reply names only its sender: the workspaces that messaged that address are found through this.
  await db.schema.createIndex('messages_to_idx').on('messages').columns(['to', 'channel']).execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('messages_to_idx').execute();
  await db.schema.dropTable('inbound_messages').execute();
  await db.schema.dropTable('silence_periods').execute();
  await db.schema.dropTable('opt_outs').execute();
}
