import { sql } from 'kysely';
import type { Executor } from '../../db/types.ts';

/**
 * How many of a workspace's voters hold a tag or a custom field's text value, from `voter_value_counts`
 * (PostgreSQL only, migration 037): the sum of the deltas its triggers appended. Exact in any transaction's
 * snapshot, since each delta commits with the rows it counts.
 */
export async function heldCount(
  db: Executor,
  workspaceId: number,
  kind: 'tag' | 'field',
  key: string,
  value: string,
): Promise<number> {
  const row = await db
    .selectFrom('voter_value_counts')
    .select((eb) => eb.fn.coalesce(eb.fn.sum<number>('delta'), sql<number>`0`).as('n'))
    .where('workspace_id', '=', workspaceId)
    .where('kind', '=', kind)
    .where('key', '=', key)
    .where('value', '=', value)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** Groups of deltas compacted per round. */
const GROUPS_PER_ROUND = 500;

/**
 * Folds each group of deltas that has more than one row into one row (none when they cancel out), in one
 * statement: a reader sees the rows before or after it, whose sums are the same. Two processes compacting at
 * once are safe: a row is deleted once, and each inserts the sum of the rows it deleted. True when it found a
 * full round's worth (there may be more).
 */
export async function compactVoterValueCounts(db: Executor): Promise<boolean> {
  const result = await sql`
    WITH groups AS (
      SELECT workspace_id, kind, key, value FROM voter_value_counts
      GROUP BY workspace_id, kind, key, value HAVING count(*) > 1
      LIMIT ${GROUPS_PER_ROUND}
    ), moved AS (
      DELETE FROM voter_value_counts c USING groups g
      WHERE c.workspace_id = g.workspace_id AND c.kind = g.kind AND c.key = g.key AND c.value = g.value
      RETURNING c.workspace_id, c.kind, c.key, c.value, c.delta
    )
    INSERT INTO voter_value_counts (workspace_id, kind, key, value, delta)
    SELECT workspace_id, kind, key, value, sum(delta) FROM moved
    GROUP BY workspace_id, kind, key, value HAVING sum(delta) <> 0`.execute(db);
  return Number(result.numAffectedRows ?? 0) >= GROUPS_PER_ROUND;
}
