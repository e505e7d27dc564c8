import type { Kysely } from 'kysely';
import { bigintType, timestampType } from './helpers.ts';

/**
 * One default channel account per workspace and channel, held by a key: every change of a channel's default
 * writes this row first, in its transaction, so that concurrent changes on PostgreSQL wait for each other and
 * the last one's view of the accounts is the committed one (two concurrent `default_for: ["sms"]` left two
 * defaults in 8 of 10 trials when the accounts' JSON was read and then written).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  const ref = bigintType(db);
  await db.schema
    .createTable('channel_defaults')
    .addColumn('workspace_id', ref, (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('channel', 'varchar(20)', (c) => c.notNull())
    .addColumn('channel_account_id', ref, (c) =>
      c.notNull().references('channel_accounts.id').onDelete('cascade'),
    )
    .addColumn('updated_at', timestampType(db), (c) => c.notNull())
    .addPrimaryKeyConstraint('channel_defaults_pk', ['workspace_id', 'channel'])
    .execute();
  // The defaults there are now, one per channel (the lowest account id where an older race left two).
  const accounts = await (
    db as Kysely<{ channel_accounts: { id: number; workspace_id: number; default_for: string } }>
  )
    .selectFrom('channel_accounts')
    .select(['id', 'workspace_id', 'default_for'])
    .orderBy('id')
    .execute();
  const seen = new Set<string>();
  const now = new Date().toISOString();
  for (const account of accounts) {
    for (const channel of JSON.parse(account.default_for) as string[]) {
      const key = `${account.workspace_id}:${channel}`;
      if (seen.has(key)) continue;
      seen.add(key);
      await (db as Kysely<{ channel_defaults: Record<string, unknown> }>)
        .insertInto('channel_defaults')
        .values({
          workspace_id: account.workspace_id,
          channel,
          channel_account_id: account.id,
          updated_at: now,
        })
        .execute();
    }
  }
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('channel_defaults').execute();
}
