import type { Kysely } from 'kysely';
import { timestampType } from './helpers.ts';

/**
 * A circuit breaker per webhook endpoint: consecutive attempts that got no answer within the time limit
 * (`timeout_streak`), and the time until which the endpoint is paused (`paused_until`). Before, endpoints that
 * never answered each held their in-flight slots for the whole timeout on every attempt, and enough of them
 * (one person can register several workspaces) starved everyone's deliveries.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('webhooks')
    .addColumn('timeout_streak', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema.alterTable('webhooks').addColumn('paused_until', timestampType(db)).execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('webhooks').dropColumn('paused_until').execute();
  await db.schema.alterTable('webhooks').dropColumn('timeout_streak').execute();
}
