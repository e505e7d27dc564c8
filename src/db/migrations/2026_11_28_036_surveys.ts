import { type Kysely, sql } from 'kysely';
import { bigintType, isPostgres, timestampType, withId } from './helpers.ts';

/**
 * Surveys (the contract's fourth part, "Surveys: ask voters on every channel").
 *
 * - `surveys` keep their texts, questions and triggers as JSON (read whole, never queried inside);
 *   `survey_keywords` holds the keyword triggers of active surveys, so an inbound message finds its survey by
 *   one primary-key seek.
 * - `survey_runs` are the sends to an audience; `survey_responses` are the sessions (one per contact and
 *   run or trigger). At most one is open per workspace, channel and address: a partial unique index.
 * - `survey_answers` holds one row per response and question (its primary key: an answer is applied once),
 *   with the choice, number or text apart, and the voter's places as they were when they answered (booth, ward,
 *   constituency, part), so results by place are one GROUP BY with no join to voters (a million responses by
 *   booth in 1.5 s on SQLite with the join, docs/performance.md).
 * - `messages.survey_response_id` ties a question's message (or an IVR survey's call) to its session.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await createSurveysAndRuns(db);
  await createResponses(db);
  await createAnswers(db);
  await db.schema.alterTable('messages').addColumn('survey_response_id', bigintType(db)).execute();
}

/** Surveys, the keywords that start them, and their runs. */
async function createSurveysAndRuns(db: Kysely<unknown>): Promise<void> {
  const ts = timestampType(db);
  const ref = bigintType(db);
  await withId(db, db.schema.createTable('surveys'))
    .addColumn('workspace_id', ref, (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('intro', 'text', (c) => c.notNull())
    .addColumn('outro', 'text', (c) => c.notNull())
    .addColumn('questions', 'text', (c) => c.notNull())
    .addColumn('retries', 'integer', (c) => c.notNull())
    .addColumn('triggers', 'text', (c) => c.notNull())
    .addColumn('has_run', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_by', ref)
    .addColumn('created_at', ts, (c) => c.notNull())
    .addColumn('updated_at', ts, (c) => c.notNull())
    .execute();
  await db.schema.createIndex('surveys_ws_idx').on('surveys').columns(['workspace_id', 'id']).execute();

  await db.schema
    .createTable('survey_keywords')
    .addColumn('workspace_id', ref, (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('channel', 'text', (c) => c.notNull())
    .addColumn('keyword', 'text', (c) => c.notNull())
    .addColumn('survey_id', ref, (c) => c.notNull().references('surveys.id').onDelete('cascade'))
    .addPrimaryKeyConstraint('survey_keywords_pk', ['workspace_id', 'channel', 'keyword'])
    .execute();

  await withId(db, db.schema.createTable('survey_runs'))
    .addColumn('workspace_id', ref, (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('survey_id', ref, (c) => c.notNull().references('surveys.id').onDelete('cascade'))
    .addColumn('channel', 'text', (c) => c.notNull())
    .addColumn('channel_account_id', ref)
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('segment_id', ref)
    .addColumn('filters', 'text')
    .addColumn('recipients', 'text')
    .addColumn('recipients_total', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('unit_cost', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('reserved_credits', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('opted_out', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('voter_id_limit', ref)
    .addColumn('filled', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('after_id', ref, (c) => c.notNull().defaultTo(0))
    .addColumn('lease_until', ts)
    .addColumn('scheduled_at', ts)
    .addColumn('created_by', ref)
    .addColumn('created_at', ts, (c) => c.notNull())
    .addColumn('started_at', ts)
    .addColumn('completed_at', ts)
    .execute();
  await db.schema
    .createIndex('survey_runs_survey_idx')
    .on('survey_runs')
    .columns(['survey_id', 'id'])
    .execute();
  await db.schema.createIndex('survey_runs_status_idx').on('survey_runs').columns(['status', 'id']).execute();
}

/** Each address's session of a survey (a response). */
async function createResponses(db: Kysely<unknown>): Promise<void> {
  const ts = timestampType(db);
  const ref = bigintType(db);
  await withId(db, db.schema.createTable('survey_responses'))
    .addColumn('workspace_id', ref, (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('survey_id', ref, (c) => c.notNull().references('surveys.id').onDelete('cascade'))
    .addColumn('run_id', ref)
    .addColumn('voter_id', ref, (c) => c.references('voters.id').onDelete('set null'))
    .addColumn('address', 'text', (c) => c.notNull())
    .addColumn('channel', 'text', (c) => c.notNull())
    .addColumn('channel_account_id', ref)
    .addColumn('language', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('question', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('tries', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('answered', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('opted_out', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('started_at', ts, (c) => c.notNull())
    .addColumn('updated_at', ts, (c) => c.notNull())
    .addColumn('completed_at', ts)
    .execute();
  await sql`CREATE UNIQUE INDEX survey_responses_open_uq ON survey_responses (workspace_id, channel, address) WHERE status = 'open'`.execute(
    db,
  );
  // A run asks each address once (a phone shared by a family gets one session).
  await db.schema
    .createIndex('survey_responses_run_address_uq')
    .on('survey_responses')
    .columns(['run_id', 'address'])
    .unique()
    .execute();
  await db.schema
    .createIndex('survey_responses_survey_idx')
    .on('survey_responses')
    .columns(['survey_id', 'id'])
    .execute();
  await db.schema
    .createIndex('survey_responses_run_idx')
    .on('survey_responses')
    .columns(['run_id', 'status'])
    .execute();
  await sql`CREATE INDEX survey_responses_idle_idx ON survey_responses (updated_at) WHERE status = 'open'`.execute(
    db,
  );
}

/** A response's answers, with the place of the voter when they answered, and the indexes results read. */
async function createAnswers(db: Kysely<unknown>): Promise<void> {
  const ts = timestampType(db);
  const ref = bigintType(db);
  await db.schema
    .createTable('survey_answers')
    .addColumn('response_id', ref, (c) => c.notNull().references('survey_responses.id').onDelete('cascade'))
    .addColumn('question_key', 'text', (c) => c.notNull())
    .addColumn('workspace_id', ref, (c) => c.notNull())
    .addColumn('survey_id', ref, (c) => c.notNull())
    .addColumn('voter_id', ref)
    .addColumn('choice_key', 'text')
    .addColumn('number_value', isPostgres(db) ? 'double precision' : 'real')
    .addColumn('text_value', 'text')
    .addColumn('booth', 'text')
    .addColumn('ward', 'text')
    .addColumn('constituency', 'text')
    .addColumn('part_number', 'integer')
    .addColumn('answered_at', ts, (c) => c.notNull())
    .addPrimaryKeyConstraint('survey_answers_pk', ['response_id', 'question_key'])
    .execute();
  // Results read these alone (covering indexes, in GROUP BY order: no sort, no table lookup).
  await db.schema
    .createIndex('survey_answers_results_idx')
    .on('survey_answers')
    .columns(['survey_id', 'question_key', 'choice_key', 'number_value'])
    .execute();
  for (const place of ['booth', 'ward', 'constituency', 'part_number'])
    await db.schema
      .createIndex(`survey_answers_${place}_idx`)
      .on('survey_answers')
      .columns(['survey_id', 'question_key', place, 'choice_key', 'number_value'])
      .execute();
  await db.schema
    .createIndex('survey_answers_voter_idx')
    .on('survey_answers')
    .columns(['survey_id', 'voter_id'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('messages').dropColumn('survey_response_id').execute();
  for (const table of ['survey_answers', 'survey_responses', 'survey_runs', 'survey_keywords', 'surveys'])
    await db.schema.dropTable(table).execute();
}
