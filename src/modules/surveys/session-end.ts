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
