import { sql } from 'kysely';
import type { Executor } from '../../db/types.ts';

/**
 * Ends the open survey sessions among `ids` short of their end: `partial` when something was answered, else
 * `no_answer`. A session already ended is left as it is; with `idleBefore`, so is one answered since then.
 * Returns how many ended. Used where a session cannot go on: expiry, a closed survey or cancelled run, a
 * survey call that failed.
 */
export async function endOpenSessions(
  db: Executor,
  ids: readonly number[],
  now: string,
  idleBefore?: string,
): Promise<number> {
  if (ids.length === 0) return 0;
  let query = db
    .updateTable('survey_responses')
    .set({
      status: sql<'partial' | 'no_answer'>`CASE WHEN answered > 0 THEN 'partial' ELSE 'no_answer' END`,
      completed_at: now,
      updated_at: now,
    })
    .where('id', 'in', [...ids])
    .where('status', '=', 'open');
  if (idleBefore !== undefined) query = query.where('updated_at', '<', idleBefore);
  const result = await query.executeTakeFirst();
  return Number(result.numUpdatedRows);
}

/** The office's own rules stopped it: the session ends as one not answered, not as a refusal. */
const STOPPED_BY_RULES = new Set(['cancelled', 'opted_out', 'silence_period']);

/**
 * Survey messages (questions, calls) that just failed: their open sessions end there. A call not answered
 * (`undeliverable` on IVR) or a message the office's rules stopped ends `partial` or `no_answer`; a question
 * the provider refused or could not deliver ends `failed` (contract, fifth part: "Runs tell the truth"), and its
 * run keeps the error as `last_error`.
 */
export async function endFailedSessions(
  db: Executor,
  failed: ReadonlyArray<{
    survey_response_id: number | null;
    channel: string;
    error_code: string | null;
    error: string | null;
  }>,
  now: string,
): Promise<void> {
  const quiet: number[] = [];
  const refused = new Map<number, { code: string; message: string }>();
  for (const m of failed) {
    if (m.survey_response_id === null) continue;
    const code = m.error_code ?? 'provider_rejected';
    if (STOPPED_BY_RULES.has(code) || (m.channel === 'ivr' && code === 'undeliverable'))
      quiet.push(Number(m.survey_response_id));
    else refused.set(Number(m.survey_response_id), { code, message: m.error ?? '' });
  }
  await endOpenSessions(db, quiet, now);
  if (refused.size === 0) return;
  const ended = await db
    .updateTable('survey_responses')
    .set({ status: 'failed', completed_at: now, updated_at: now, ivr_question: null })
    .where('id', 'in', [...refused.keys()])
    .where('status', '=', 'open')
    .returning(['id', 'run_id'])
    .execute();
  const byRun = new Map<number, { code: string; message: string }>();
  for (const r of ended) if (r.run_id !== null) byRun.set(Number(r.run_id), refused.get(Number(r.id))!);
  for (const [runId, error] of byRun)
    await db
      .updateTable('survey_runs')
      .set({
        last_error_code: error.code,
        last_error_message: error.message.slice(0, 500),
        last_error_at: now,
      })
      .where('id', '=', runId)
      .execute();
}
