import type { Kysely } from 'kysely';
import { bigintType, timestampType, withId } from './helpers.ts';

/**
 * Conversations: one per workspace, channel and contact address, holding its inbound messages and the
 * outbound ones sent to that address (`conversation_id` on both tables); who sent a reply (`messages.sent_by`);
 * users' coverage (JSON `{ wards, booths, constituencies }`) for assignment on arrival; quick replies.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  const ts = timestampType(db);
  const ref = bigintType(db);
  await withId(db, db.schema.createTable('conversations'))
    .addColumn('workspace_id', ref, (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('channel', 'varchar(10)', (c) => c.notNull())
    .addColumn('address', 'varchar(254)', (c) => c.notNull())
    .addColumn('voter_id', ref)
    .addColumn('status', 'varchar(10)', (c) => c.notNull())
    .addColumn('assigned_to', ref)
    .addColumn('unread_count', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('last_message_at', ts, (c) => c.notNull())
    .addColumn('last_message_preview', 'varchar(200)', (c) => c.notNull())
    .addColumn('last_inbound_at', ts)
    // The channel account the contact last wrote to: replies go back through it.
    .addColumn('channel_account_id', ref)
    .addColumn('grievance_id', ref)
    .addColumn('created_at', ts, (c) => c.notNull())
    .addColumn('updated_at', ts, (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('conversations_contact_uq')
    .on('conversations')
    .columns(['workspace_id', 'channel', 'address'])
    .unique()
    .execute();
  await db.schema
    .createIndex('conversations_activity_idx')
    .on('conversations')
    .columns(['workspace_id', 'last_message_at', 'id'])
    .execute();
  await db.schema
    .createIndex('conversations_assignee_idx')
    .on('conversations')
    .columns(['workspace_id', 'assigned_to', 'status'])
    .execute();
  await db.schema.alterTable('messages').addColumn('conversation_id', ref).execute();
  await db.schema.alterTable('messages').addColumn('sent_by', ref).execute();
  await db.schema.alterTable('inbound_messages').addColumn('conversation_id', ref).execute();
  await db.schema
    .createIndex('messages_conversation_idx')
    .on('messages')
    .columns(['conversation_id', 'id'])
    .execute();
  await db.schema
    .createIndex('inbound_messages_conversation_idx')
    .on('inbound_messages')
    .columns(['conversation_id', 'id'])
    .execute();
  await db.schema.alterTable('users').addColumn('coverage', 'text').execute();
  await withId(db, db.schema.createTable('quick_replies'))
    .addColumn('workspace_id', ref, (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('title', 'varchar(200)', (c) => c.notNull())
    .addColumn('body', 'text', (c) => c.notNull())
    .addColumn('language', 'varchar(20)', (c) => c.notNull())
    .addColumn('created_at', ts, (c) => c.notNull())
    .addColumn('updated_at', ts, (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('quick_replies_workspace_idx')
    .on('quick_replies')
    .columns(['workspace_id', 'id'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('quick_replies').execute();
  await db.schema.alterTable('users').dropColumn('coverage').execute();
  await db.schema.dropIndex('inbound_messages_conversation_idx').execute();
  await db.schema.dropIndex('messages_conversation_idx').execute();
  await db.schema.alterTable('inbound_messages').dropColumn('conversation_id').execute();
  await db.schema.alterTable('messages').dropColumn('sent_by').execute();
  await db.schema.alterTable('messages').dropColumn('conversation_id').execute();
  await db.schema.dropTable('conversations').execute();
}
