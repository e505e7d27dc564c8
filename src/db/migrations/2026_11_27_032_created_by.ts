import type { Kysely } from 'kysely';
import { bigintType } from './helpers.ts';

/**
 * Who added a voter or opened a grievance (a user id; null for what came before, or by import): a volunteer's
 * part of the roll includes the voters they added, and the grievances they opened (the contract's fourth part,
 * "Volunteers see their part of the roll").
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('voters').addColumn('created_by', bigintType(db)).execute();
  await db.schema.alterTable('grievances').addColumn('created_by', bigintType(db)).execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('voters').dropColumn('created_by').execute();
  await db.schema.alterTable('grievances').dropColumn('created_by').execute();
}
