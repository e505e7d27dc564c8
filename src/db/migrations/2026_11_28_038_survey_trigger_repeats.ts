import type { Kysely } from 'kysely';

/**
 * A survey's responses by address and start: a keyword or a missed call starts a survey for an address at most
 * once in TRIGGER_REPEAT_HOURS (survey-sessions.ts), and this is the lookup that checks it.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createIndex('survey_responses_address_idx')
    .on('survey_responses')
    .columns(['survey_id', 'address', 'started_at'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('survey_responses_address_idx').execute();
}
