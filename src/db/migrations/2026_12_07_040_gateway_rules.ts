import { sql, type Kysely } from 'kysely';
import { timestampType } from './helpers.ts';

/**
 * Sending as the gateways require (the contract's fifth part):
 * - `messages.handing_at`: when a worker began the provider call of a claimed message. A cancel fails every
 *   queued message of its campaign or run but those in that call (`in_flight`); the worker marks a message just
 *   before its call, only while it is still queued, so a message a cancel took is never handed over.
 * - `messages_survey_response_idx`: a session's messages, read when an answer comes (was its question handed
 *   to the provider?) and when a question fails (its session ends `failed`).
 * - `survey_runs.last_error_*`: the latest refusal of a run's questions, as campaigns keep theirs (031).
 * - `survey_responses.ivr_question`: the question an IVR call's Gather asked and whose keys are awaited; a
 *   Passthru answers only that question, once.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('messages').addColumn('handing_at', timestampType(db)).execute();
  await sql`CREATE INDEX messages_survey_response_idx ON messages (survey_response_id) WHERE survey_response_id IS NOT NULL`.execute(
    db,
  );
  await db.schema.alterTable('survey_runs').addColumn('last_error_code', 'varchar(40)').execute();
  await db.schema.alterTable('survey_runs').addColumn('last_error_message', 'text').execute();
  await db.schema.alterTable('survey_runs').addColumn('last_error_at', timestampType(db)).execute();
  await db.schema.alterTable('survey_responses').addColumn('ivr_question', 'integer').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('survey_responses').dropColumn('ivr_question').execute();
  for (const column of ['last_error_code', 'last_error_message', 'last_error_at'])
    await db.schema.alterTable('survey_runs').dropColumn(column).execute();
  await db.schema.dropIndex('messages_survey_response_idx').execute();
  await db.schema.alterTable('messages').dropColumn('handing_at').execute();
}
