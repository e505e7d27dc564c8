import type { Executor } from '../../db/types.ts';
import { endOpenSessions, failOpenSessions, noteRunError } from './survey-responses.repository.ts';

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
  const ended = await failOpenSessions(db, [...refused.keys()], now);
  const byRun = new Map<number, { code: string; message: string }>();
  for (const r of ended) if (r.run_id !== null) byRun.set(Number(r.run_id), refused.get(Number(r.id))!);
  for (const [runId, error] of byRun) await noteRunError(db, runId, error, now);
}
