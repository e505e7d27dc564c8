import { type Kysely, sql } from 'kysely';

/**
 * `retry-failed` made a new campaign on every call: three parallel calls (and a fourth later) sent one failed
 * number five messages, each charged. A retry now names the campaign it retries, and one campaign has at most
 * one retry that is not cancelled: the unique index refuses the second even when two requests race.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('campaigns')
    .addColumn('retry_of', 'integer', (c) => c.references('campaigns.id').onDelete('set null'))
    .execute();
  await db.schema
    .createIndex('campaigns_retry_of_uq')
    .on('campaigns')
    .column('retry_of')
    .unique()
    .where(sql<boolean>`retry_of IS NOT NULL AND status <> 'cancelled'`)
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('campaigns_retry_of_uq').execute();
  await db.schema.alterTable('campaigns').dropColumn('retry_of').execute();
}
