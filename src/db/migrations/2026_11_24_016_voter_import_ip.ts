import type { Kysely } from 'kysely';

/** `voter_imports.ip`: the uploader's client address, for the `voters.imported` audit entry written when the job completes. */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('voter_imports').addColumn('ip', 'varchar(100)').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('voter_imports').dropColumn('ip').execute();
}
