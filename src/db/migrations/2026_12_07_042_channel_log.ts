import type { Kysely } from 'kysely';
import { bigintType, timestampType, withId } from './helpers.ts';

/**
 * The channel log (the contract's fifth part, "One outbox, and the channel log"): every exchange with a channel
 * account's provider, redacted and cut at 4 KB a body, kept 7 days and at most 1,000 an account. Read newest first
 * by account (`channel_log_account_idx`).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  const ref = bigintType(db);
  const ts = timestampType(db);
  await withId(db, db.schema.createTable('channel_log'))
    .addColumn('workspace_id', ref, (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('channel_account_id', ref, (c) =>
      c.notNull().references('channel_accounts.id').onDelete('cascade'),
    )
    .addColumn('at', ts, (c) => c.notNull())
    .addColumn('direction', 'text', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('method', 'text', (c) => c.notNull())
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('status', 'integer')
    .addColumn('duration_ms', 'integer')
    .addColumn('request', 'text', (c) => c.notNull())
    .addColumn('response', 'text', (c) => c.notNull())
    .addColumn('message_id', ref)
    .addColumn('error_code', 'text')
    .execute();
  await db.schema
    .createIndex('channel_log_account_idx')
    .on('channel_log')
    .columns(['channel_account_id', 'id'])
    .execute();
  await db.schema.createIndex('channel_log_at_idx').on('channel_log').column('at').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('channel_log').execute();
}
