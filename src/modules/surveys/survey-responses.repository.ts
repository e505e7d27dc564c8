import { type Insertable, type SelectQueryBuilder, sql } from 'kysely';
import type {
  Database,
  SurveyAnswerTable,
  SurveyResponseRow,
  SurveyResponseTable,
  SurveyRow,
} from '../../db/schema.ts';
import { isPostgres } from '../../db/dialect.ts';
import type { Executor } from '../../db/types.ts';

/**
 * Survey responses (sessions) and their answers: opening, moving and ending sessions, the pages and exports of
 * responses, and the results' counts. As in surveys.repository.ts, a function over one workspace's rows takes
 * its id, and the worker's chores over every workspace say so in their names.
 */

// --- Responses (sessions) ------------------------------------------------------------------------------------

/** Opens a session; undefined when the contact has an open one on the channel already. */
export function insertResponse(
  trx: Executor,
  values: Insertable<SurveyResponseTable>,
): Promise<SurveyResponseRow | undefined> {
  return trx
    .insertInto('survey_responses')
    .values(values)
    .onConflict((oc) => oc.doNothing())
    .returningAll()
    .executeTakeFirst();
}

export function findResponse(
  db: Executor,
  workspaceId: number,
  id: number,
): Promise<SurveyResponseRow | undefined> {
  return db
    .selectFrom('survey_responses')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .executeTakeFirst();
}

/** The open session of a contact on a channel, locked for this transaction on PostgreSQL. */
export function openSession(
  trx: Executor,
  workspaceId: number,
  channel: string,
  address: string,
): Promise<SurveyResponseRow | undefined> {
  return trx
    .selectFrom('survey_responses')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('channel', '=', channel)
    .where('address', '=', address)
    .where('status', '=', 'open')
    .$if(isPostgres(trx), (q) => q.forUpdate())
    .executeTakeFirst();
}

type Session = Pick<SurveyResponseRow, 'id' | 'workspace_id' | 'question' | 'tries' | 'answered'>;

/** One more try at the session's current question; false when another process moved the session first. */
export async function countTry(trx: Executor, s: Session, now: string): Promise<boolean> {
  const moved = await trx
    .updateTable('survey_responses')
    .set({ tries: s.tries + 1, updated_at: now })
    .where('workspace_id', '=', s.workspace_id)
    .where('id', '=', s.id)
    .where('status', '=', 'open')
    .where('question', '=', s.question)
    .where('tries', '=', s.tries)
    .executeTakeFirst();
  return Number(moved.numUpdatedRows) === 1;
}

/**
 * Moves the session past its current question (completing it after the last); false when another process took
 * an answer to this question first.
 */
export async function advanceSession(
  trx: Executor,
  s: Session,
  done: boolean,
  now: string,
): Promise<boolean> {
  const moved = await trx
    .updateTable('survey_responses')
    .set({
      question: s.question + 1,
      tries: 0,
      answered: s.answered + 1,
      updated_at: now,
      ...(done ? { status: 'completed', completed_at: now } : {}),
    })
    .where('workspace_id', '=', s.workspace_id)
    .where('id', '=', s.id)
    .where('status', '=', 'open')
    .where('question', '=', s.question)
    .executeTakeFirst();
  return Number(moved.numUpdatedRows) === 1;
}

/**
 * Ends open sessions among `ids` short of their end: `partial` when something was answered, else `no_answer`
 * (`optedOut` marks a STOP). One already ended is left as it is; with `idleBefore`, so is one answered since then.
 * Returns how many ended.
 */
export async function endOpenSessions(
  db: Executor,
  ids: readonly number[],
  now: string,
  how: { idleBefore?: string | undefined; optedOut?: boolean } = {},
): Promise<number> {
  if (ids.length === 0) return 0;
  const result = await db
    .updateTable('survey_responses')
    .set({
      status: sql<'partial' | 'no_answer'>`CASE WHEN answered > 0 THEN 'partial' ELSE 'no_answer' END`,
      completed_at: now,
      updated_at: now,
      ...(how.optedOut ? { opted_out: 1 } : {}),
    })
    .where('id', 'in', [...ids])
    .where('status', '=', 'open')
    .$if(how.idleBefore !== undefined, (q) => q.where('updated_at', '<', how.idleBefore!))
    .executeTakeFirst();
  return Number(result.numUpdatedRows);
}

/** Ends open sessions as `failed` (the provider refused their question); their ids and runs. */
export function failOpenSessions(db: Executor, ids: readonly number[], now: string) {
  return db
    .updateTable('survey_responses')
    .set({ status: 'failed', completed_at: now, updated_at: now, ivr_question: null })
    .where('id', 'in', [...ids])
    .where('status', '=', 'open')
    .returning(['id', 'run_id'])
    .execute();
}

/** Keeps a provider's refusal on the run it ended sessions of. */
export async function noteRunError(
  db: Executor,
  runId: number,
  error: { code: string; message: string },
  now: string,
): Promise<void> {
  await db
    .updateTable('survey_runs')
    .set({ last_error_code: error.code, last_error_message: error.message.slice(0, 500), last_error_at: now })
    .where('id', '=', runId)
    .execute();
}

/** The open sessions of a survey or of one of its runs. */
export async function openSessionIds(
  trx: Executor,
  workspaceId: number,
  of: { surveyId: number } | { runId: number },
): Promise<number[]> {
  const rows = await trx
    .selectFrom('survey_responses')
    .select('id')
    .where('workspace_id', '=', workspaceId)
    .where('status', '=', 'open')
    .where('surveyId' in of ? 'survey_id' : 'run_id', '=', 'surveyId' in of ? of.surveyId : of.runId)
    .execute();
  return rows.map((r) => r.id);
}

/** The worker's chore: open sessions, of any workspace, untouched since `cutoff`. */
export async function sessionsIdle(db: Executor, cutoff: string, limit: number): Promise<number[]> {
  const rows = await db
    .selectFrom('survey_responses')
    .select('id')
    .where('status', '=', 'open')
    .where('updated_at', '<', cutoff)
    .limit(limit)
    .execute();
  return rows.map((r) => r.id);
}

/** Whether a session of the survey started for this address after `since`. */
export async function startedSince(
  trx: Executor,
  workspaceId: number,
  surveyId: number,
  address: string,
  since: string,
): Promise<boolean> {
  const recent = await trx
    .selectFrom('survey_responses')
    .select('id')
    .where('workspace_id', '=', workspaceId)
    .where('survey_id', '=', surveyId)
    .where('address', '=', address)
    .where('started_at', '>', since)
    .limit(1)
    .executeTakeFirst();
  return recent !== undefined;
}

export interface ResponseQuery {
  runId?: number | undefined;
  status?: SurveyResponseRow['status'] | undefined;
}

/** A page of a survey's responses, newest first, and how many match. */
export async function responsePage(
  db: Executor,
  workspaceId: number,
  surveyId: number,
  query: ResponseQuery,
  page: number,
  perPage: number,
) {
  const base = db
    .selectFrom('survey_responses')
    .where('workspace_id', '=', workspaceId)
    .where('survey_id', '=', surveyId)
    .$if(query.runId !== undefined, (q) => q.where('run_id', '=', query.runId!))
    .$if(query.status !== undefined, (q) => q.where('status', '=', query.status!));
  const rows = await base
    .selectAll()
    .orderBy('id', 'desc')
    .limit(perPage)
    .offset((page - 1) * perPage)
    .execute();
  const total = await base.select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow();
  return { rows, total: Number(total.n) };
}

/** Up to `limit` of a survey's responses after id `after`, oldest first (an export's next batch). */
export function responsesAfter(
  db: Executor,
  workspaceId: number,
  surveyId: number,
  after: number,
  runId: number | undefined,
  limit: number,
): Promise<SurveyResponseRow[]> {
  return db
    .selectFrom('survey_responses')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('survey_id', '=', surveyId)
    .where('id', '>', after)
    .$if(runId !== undefined, (q) => q.where('run_id', '=', runId!))
    .orderBy('id')
    .limit(limit)
    .execute();
}

/** An IVR session's Gather asked its current question: the Passthru that follows may answer it, once. */
export async function markIvrQuestion(trx: Executor, s: Session): Promise<void> {
  await trx
    .updateTable('survey_responses')
    .set({ ivr_question: s.question })
    .where('workspace_id', '=', s.workspace_id)
    .where('id', '=', s.id)
    .where('status', '=', 'open')
    .where('question', '=', s.question)
    .execute();
}

/**
 * Takes the IVR session's asked-question marker, in the same statement that checks it: the session when its
 * Gather asked the current question, undefined for a replayed Passthru (or one with no Gather before it).
 */
export function takeIvrQuestion(
  trx: Executor,
  s: Pick<SurveyResponseRow, 'id' | 'workspace_id'>,
): Promise<SurveyResponseRow | undefined> {
  return trx
    .updateTable('survey_responses')
    .set({ ivr_question: null })
    .where('workspace_id', '=', s.workspace_id)
    .where('id', '=', s.id)
    .where('status', '=', 'open')
    .where((eb) => eb('ivr_question', '=', eb.ref('question')))
    .returningAll()
    .executeTakeFirst();
}

// --- Answers -------------------------------------------------------------------------------------------------

/** Stores an answer (once per session and question). */
export async function insertAnswer(trx: Executor, values: Insertable<SurveyAnswerTable>): Promise<void> {
  await trx
    .insertInto('survey_answers')
    .values(values)
    .onConflict((oc) => oc.doNothing())
    .execute();
}

/** Each response's answers by question key, as responses show them. */
export async function answersOf(db: Executor, workspaceId: number, ids: readonly number[]) {
  const out = new Map<number, Record<string, string | number | null>>();
  if (ids.length === 0) return out;
  const rows = await db
    .selectFrom('survey_answers')
    .select(['response_id', 'question_key', 'choice_key', 'number_value', 'text_value'])
    .where('workspace_id', '=', workspaceId)
    .where('response_id', 'in', ids)
    .execute();
  for (const r of rows) {
    const answers = out.get(r.response_id) ?? {};
    answers[r.question_key] =
      r.choice_key ?? (r.number_value !== null ? Number(r.number_value) : r.text_value);
    out.set(r.response_id, answers);
  }
  return out;
}

/** The voter's place when they answered, kept on each answer (no join to voters). */
export const groupColumns = {
  booth: 'a.booth',
  ward: 'a.ward',
  constituency: 'a.constituency',
  part_number: 'a.part_number',
} as const;
export type GroupBy = keyof typeof groupColumns;

/** The voters a result counts: a subquery of their ids (a voter filter), or every answer. */
type VoterIds = SelectQueryBuilder<Database, 'voters', { id: number }> | undefined;

/**
 * A survey's answers counted by question and choice (and by the voter's place where `groupBy` says), with each
 * number question's sum and count: GROUP BYs over survey_answers' covering (survey, question, choice) indexes.
 * The one function here without a workspace id: `survey` was found in the workspace (findSurvey), and a
 * workspace_id condition would turn the index-only reads into a table lookup per answer.
 */
export function answerTallies(
  db: Executor,
  survey: Pick<SurveyRow, 'id'>,
  groupBy: GroupBy | undefined,
  voters: VoterIds,
) {
  const answers = db
    .selectFrom('survey_answers as a')
    .where('a.survey_id', '=', survey.id)
    .$if(voters !== undefined, (q) => q.where('a.voter_id', 'in', voters!));
  const grouped = groupBy
    ? answers
        .select([
          'a.question_key',
          'a.choice_key',
          sql<string | number | null>`${sql.ref(groupColumns[groupBy])}`.as('g'),
        ])
        .groupBy(['a.question_key', sql.ref(groupColumns[groupBy]), 'a.choice_key'])
    : answers
        .select(['a.question_key', 'a.choice_key', sql<null>`NULL`.as('g')])
        .groupBy(['a.question_key', 'a.choice_key']);
  return grouped
    .select((eb) => [
      eb.fn.countAll().as('n'),
      eb.fn.sum<number | null>('a.number_value').as('s'),
      eb.fn.count('a.number_value').as('nn'),
    ])
    .execute();
}

/** How many responses a survey has (of the voters given), and how many completed. */
export async function responseTotals(db: Executor, workspaceId: number, surveyId: number, voters: VoterIds) {
  const counts = await db
    .selectFrom('survey_responses')
    .where('workspace_id', '=', workspaceId)
    .where('survey_id', '=', surveyId)
    .$if(voters !== undefined, (q) => q.where('voter_id', 'in', voters!))
    .select((eb) => [
      eb.fn.countAll().as('n'),
      eb.fn.sum<number>(eb.case().when('status', '=', 'completed').then(1).else(0).end()).as('done'),
    ])
    .executeTakeFirstOrThrow();
  return { responses: Number(counts.n), completed: Number(counts.done ?? 0) };
}
