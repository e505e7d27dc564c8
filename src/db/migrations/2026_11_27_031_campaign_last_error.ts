import type { Kysely } from 'kysely';
import { timestampType } from './helpers.ts';

/**
 * The latest failure of a campaign's messages, kept on the campaign (a refusal, or a retry's error while the
 * provider is unreachable): campaign items show it (`last_error`), so a provider outage is seen on the
 * campaign's page and not only in the database.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  // One column a statement: SQLite's ALTER TABLE adds one at a time.
  await db.schema.alterTable('campaigns').addColumn('last_error_code', 'varchar(40)').execute();
  await db.schema.alterTable('campaigns').addColumn('last_error_message', 'text').execute();
  await db.schema.alterTable('campaigns').addColumn('last_error_at', timestampType(db)).execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const column of ['last_error_code', 'last_error_message', 'last_error_at'])
    await db.schema.alterTable('campaigns').dropColumn(column).execute();
}
