import type { Kysely } from 'kysely';
import { timestampType } from './helpers.ts';

/**
 * Team and access: `users.deactivated_at` (null = active; a timestamp keeps both dialects' columns alike, where a
 * boolean would be 0/1 on SQLite) and `api_tokens.last_used_at` (written at most once a minute per token).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  const ts = timestampType(db);
  await db.schema.alterTable('users').addColumn('deactivated_at', ts).execute();
  await db.schema.alterTable('api_tokens').addColumn('last_used_at', ts).execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('api_tokens').dropColumn('last_used_at').execute();
  await db.schema.alterTable('users').dropColumn('deactivated_at').execute();
}
