import type { Kysely } from 'kysely';

/**
 * A workspace's own time zone (an IANA name): the console shows every time in it (the contract's fourth part,
 * "Times"); null keeps QUIET_HOURS_TZ.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('workspaces').addColumn('timezone', 'text').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('workspaces').dropColumn('timezone').execute();
}
