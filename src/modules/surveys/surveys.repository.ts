import type { Insertable, Updateable } from 'kysely';
import type { SurveyRow, SurveyRunRow, SurveyRunTable, SurveyTable } from '../../db/schema.ts';
import type { Executor } from '../../db/types.ts';

/**
 * The surveys' tables: surveys, their keyword triggers and runs (responses and answers are in
 * survey-responses.repository.ts). Every function that reads or writes one workspace's rows takes its id; the
 * worker's chores over every workspace say so in their names (`…Due`, `…Idle`). The voters' and messages'
 * tables are their own modules' (voters.repository.ts, messages.repository.ts).
 */

// --- Surveys -------------------------------------------------------------------------------------------------

export function findSurvey(db: Executor, workspaceId: number, id: number): Promise<SurveyRow | undefined> {
  return db
    .selectFrom('surveys')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .executeTakeFirst();
}

/** The survey a session or run belongs to. */
export function surveyOf(db: Executor, of: { workspace_id: number; survey_id: number }): Promise<SurveyRow> {
  return db
    .selectFrom('surveys')
    .selectAll()
    .where('workspace_id', '=', of.workspace_id)
    .where('id', '=', of.survey_id)
    .executeTakeFirstOrThrow();
}

export async function surveyPage(db: Executor, workspaceId: number, page: number, perPage: number) {
  const rows = await db
    .selectFrom('surveys')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .orderBy('id', 'desc')
    .limit(perPage)
    .offset((page - 1) * perPage)
    .execute();
  const total = await db
    .selectFrom('surveys')
    .select((eb) => eb.fn.countAll().as('n'))
    .where('workspace_id', '=', workspaceId)
    .executeTakeFirstOrThrow();
  return { rows, total: Number(total.n) };
}

/** The workspace's active surveys, oldest first (a missed call looks for its trigger among them). */
export function activeSurveys(db: Executor, workspaceId: number): Promise<SurveyRow[]> {
  return db
    .selectFrom('surveys')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('status', '=', 'active')
    .orderBy('id')
    .execute();
}

export function insertSurvey(trx: Executor, values: Insertable<SurveyTable>): Promise<SurveyRow> {
  return trx.insertInto('surveys').values(values).returningAll().executeTakeFirstOrThrow();
}

export function updateSurvey(
  trx: Executor,
  workspaceId: number,
  id: number,
  set: Updateable<SurveyTable>,
): Promise<SurveyRow> {
  return trx
    .updateTable('surveys')
    .set(set)
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** Marks a survey as one that has run (its questions are fixed from then on). */
export async function markSurveyRun(trx: Executor, workspaceId: number, id: number): Promise<void> {
  await trx
    .updateTable('surveys')
    .set({ has_run: 1 })
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .execute();
}

/** Deletes a survey and its responses (one that never ran has no answers). */
export async function deleteSurvey(trx: Executor, workspaceId: number, id: number): Promise<void> {
  await trx
    .deleteFrom('survey_responses')
    .where('workspace_id', '=', workspaceId)
    .where('survey_id', '=', id)
    .execute();
  await trx.deleteFrom('surveys').where('workspace_id', '=', workspaceId).where('id', '=', id).execute();
}

// --- Keyword triggers ----------------------------------------------------------------------------------------

export async function deleteKeywords(trx: Executor, workspaceId: number, surveyId: number): Promise<void> {
  await trx
    .deleteFrom('survey_keywords')
    .where('workspace_id', '=', workspaceId)
    .where('survey_id', '=', surveyId)
    .execute();
}

/** The survey that holds a keyword on a channel, if any. */
export async function keywordHolder(
  trx: Executor,
  workspaceId: number,
  channel: string,
  keyword: string,
): Promise<number | undefined> {
  const row = await trx
    .selectFrom('survey_keywords')
    .select('survey_id')
    .where('workspace_id', '=', workspaceId)
    .where('channel', '=', channel)
    .where('keyword', '=', keyword)
    .executeTakeFirst();
  return row?.survey_id;
}

export async function insertKeyword(
  trx: Executor,
  workspaceId: number,
  k: { channel: string; keyword: string; survey_id: number },
): Promise<void> {
  await trx
    .insertInto('survey_keywords')
    .values({ workspace_id: workspaceId, ...k })
    .execute();
}

/** The active survey whose keyword trigger is `keyword` on this channel. */
export function keywordSurvey(
  trx: Executor,
  workspaceId: number,
  channel: string,
  keyword: string,
): Promise<SurveyRow | undefined> {
  return trx
    .selectFrom('survey_keywords')
    .innerJoin('surveys', 'surveys.id', 'survey_keywords.survey_id')
    .selectAll('surveys')
    .where('survey_keywords.workspace_id', '=', workspaceId)
    .where('survey_keywords.channel', '=', channel)
    .where('survey_keywords.keyword', '=', keyword)
    .where('surveys.status', '=', 'active')
    .executeTakeFirst();
}

// --- Runs ----------------------------------------------------------------------------------------------------

export function findRun(db: Executor, workspaceId: number, id: number): Promise<SurveyRunRow | undefined> {
  return db
    .selectFrom('survey_runs')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .executeTakeFirst();
}

export async function runPage(
  db: Executor,
  workspaceId: number,
  surveyId: number,
  page: number,
  perPage: number,
) {
  const base = db
    .selectFrom('survey_runs')
    .where('workspace_id', '=', workspaceId)
    .where('survey_id', '=', surveyId);
  const rows = await base
    .selectAll()
    .orderBy('id', 'desc')
    .limit(perPage)
    .offset((page - 1) * perPage)
    .execute();
  const total = await base.select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow();
  return { rows, total: Number(total.n) };
}

export function insertRun(trx: Executor, values: Insertable<SurveyRunTable>): Promise<SurveyRunRow> {
  return trx.insertInto('survey_runs').values(values).returningAll().executeTakeFirstOrThrow();
}

export async function updateRun(
  trx: Executor,
  workspaceId: number,
  id: number,
  set: Updateable<SurveyRunTable>,
): Promise<void> {
  await trx
    .updateTable('survey_runs')
    .set(set)
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .execute();
}

/** Cancels a scheduled or running run; undefined when it is neither. */
export function cancelRunRow(
  trx: Executor,
  workspaceId: number,
  id: number,
  now: string,
): Promise<SurveyRunRow | undefined> {
  return trx
    .updateTable('survey_runs')
    .set({ status: 'cancelled', completed_at: now, lease_until: null })
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .where('status', 'in', ['scheduled', 'running'])
    .returningAll()
    .executeTakeFirst();
}

/** Session counts of a run by status and opt-out, from the index on (run_id, status). */
export function runStatusCounts(db: Executor, workspaceId: number, runId: number) {
  return db
    .selectFrom('survey_responses')
    .select(['status', 'opted_out', (eb) => eb.fn.countAll().as('n')])
    .where('workspace_id', '=', workspaceId)
    .where('run_id', '=', runId)
    .groupBy(['status', 'opted_out'])
    .execute();
}

/** The worker's chore: scheduled runs whose time has come start running; true when any did. */
export async function startRunsDue(db: Executor, now: string): Promise<boolean> {
  const due = await db
    .updateTable('survey_runs')
    .set({ status: 'running', started_at: now })
    .where('status', '=', 'scheduled')
    .where('scheduled_at', '<=', now)
    .executeTakeFirst();
  return Number(due.numUpdatedRows) > 0;
}

/** Running runs whose audience is still being opened, oldest first, over every workspace. */
export function runsFillingDue(db: Executor): Promise<SurveyRunRow[]> {
  return db
    .selectFrom('survey_runs')
    .selectAll()
    .where('status', '=', 'running')
    .where('filled', '=', 0)
    .orderBy('id')
    .limit(200)
    .execute();
}

/**
 * The worker's chore: filled runs end, `failed` where the provider refused every session (their last_error says
 * why), else `completed` once no session is open; true when any did.
 */
export async function endRunsDue(db: Executor, now: string): Promise<boolean> {
  const refused = await db
    .updateTable('survey_runs')
    .set({ status: 'failed', completed_at: now })
    .where('status', '=', 'running')
    .where('filled', '=', 1)
    .where(({ and, not, exists, selectFrom }) =>
      and([
        exists(
          selectFrom('survey_responses')
            .select('survey_responses.id')
            .whereRef('survey_responses.run_id', '=', 'survey_runs.id'),
        ),
        not(
          exists(
            selectFrom('survey_responses')
              .select('survey_responses.id')
              .whereRef('survey_responses.run_id', '=', 'survey_runs.id')
              .where('survey_responses.status', '<>', 'failed'),
          ),
        ),
      ]),
    )
    .executeTakeFirst();
  const done = await db
    .updateTable('survey_runs')
    .set({ status: 'completed', completed_at: now })
    .where('status', '=', 'running')
    .where('filled', '=', 1)
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('survey_responses')
            .select('survey_responses.id')
            .whereRef('survey_responses.run_id', '=', 'survey_runs.id')
            .where('survey_responses.status', '=', 'open'),
        ),
      ),
    )
    .executeTakeFirst();
  return Number(refused.numUpdatedRows) + Number(done.numUpdatedRows) > 0;
}

/** Moves a running run's cursor from `from` to `upTo`; false when it is not at `from` (another process moved it). */
export async function moveRunCursor(
  trx: Executor,
  run: Pick<SurveyRunRow, 'id' | 'workspace_id'>,
  from: number,
  upTo: number,
): Promise<boolean> {
  const moved = await trx
    .updateTable('survey_runs')
    .set({ after_id: upTo })
    .where('workspace_id', '=', run.workspace_id)
    .where('id', '=', run.id)
    .where('status', '=', 'running')
    .where('after_id', '=', from)
    .executeTakeFirst();
  return Number(moved.numUpdatedRows) === 1;
}

/** A chunk's sessions are open: what they cost leaves the run's reservation, and its opted-out are counted. */
export async function spendRunReservation(
  trx: Executor,
  run: Pick<SurveyRunRow, 'id' | 'workspace_id'>,
  used: number,
  optedOut: number,
): Promise<void> {
  await trx
    .updateTable('survey_runs')
    .set((eb) => ({
      reserved_credits: eb('reserved_credits', '-', used),
      opted_out: eb('opted_out', '+', optedOut),
    }))
    .where('workspace_id', '=', run.workspace_id)
    .where('id', '=', run.id)
    .execute();
}

/**
 * Marks a running run's fill done, once: the row as it was, with how many sessions it opened; undefined when it
 * was done already.
 */
export async function markRunFilled(
  trx: Executor,
  run: Pick<SurveyRunRow, 'id' | 'workspace_id'>,
): Promise<{ run: SurveyRunRow; sessions: number } | undefined> {
  const current = await trx
    .updateTable('survey_runs')
    .set({ filled: 1 })
    .where('workspace_id', '=', run.workspace_id)
    .where('id', '=', run.id)
    .where('filled', '=', 0)
    .where('status', '=', 'running')
    .returningAll()
    .executeTakeFirst();
  if (!current) return undefined;
  const sessions = await trx
    .selectFrom('survey_responses')
    .select((eb) => eb.fn.countAll().as('n'))
    .where('workspace_id', '=', run.workspace_id)
    .where('run_id', '=', run.id)
    .executeTakeFirstOrThrow();
  return { run: current, sessions: Number(sessions.n) };
}
