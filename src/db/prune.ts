import { sql } from 'kysely';
import type { Executor } from './types.ts';

/** The tables kept for a while and then deleted by age (each has an index on created_at). */
type AgedTable = 'audit_log' | 'live_events';

/**
 * Deletes the rows of `table` created before `cutoff`, `batchSize` rows per statement and at most `maxBatches`
 * statements, so that a large backlog never holds a long lock (the next round goes on). Returns how many went.
 */
export async function deleteCreatedBefore(
  db: Executor,
  table: AgedTable,
  cutoff: string,
  batchSize = 1000,
  maxBatches = 10,
): Promise<number> {
  let deleted = 0;
  for (let i = 0; i < maxBatches; i += 1) {
    const result = await sql`DELETE FROM ${sql.table(table)} WHERE id IN
      (SELECT id FROM ${sql.table(table)} WHERE created_at < ${cutoff} LIMIT ${batchSize})`.execute(db);
    const n = Number(result.numAffectedRows ?? 0);
    deleted += n;
    if (n < batchSize) break;
  }
  return deleted;
}
