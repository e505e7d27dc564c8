import type { Kysely } from 'kysely';

/**
 * `messages.error_code`: why a failed message failed, one of `messageErrorCodes` (schema.ts); null unless the
 * message is failed. The existing `error` column keeps the human-readable reason (the API's `error_message`).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('messages').addColumn('error_code', 'varchar(30)').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('messages').dropColumn('error_code').execute();
}
