import { type Kysely, sql } from 'kysely';
import { dropTransitionTriggers, isPostgres, transitionTriggers } from './helpers.ts';

/**
 * Turnout's counts kept (PostgreSQL only), in `voter_value_counts` beside the tags' and fields' (migration 037),
 * appended by statement-level triggers in the writing transaction and folded by the same background loop:
 *
 * - kind `booth` / `part`: a workspace's voters by `booth_key` / `part_number`;
 * - kind `voted_booth` / `voted_part`: its voters marked as voted (`poll_voted` rows with `voted` = 1), by the
 *   booth and part that table keeps in step with the voter.
 *
 * `key` is `=` followed by the booth key or the part number, or '' for voters without one; `value` is '1' for
 * supporters (support level 1 or 2) and '0' for the others. The booth board's turnout of a whole roll (poll-day.ts)
 * reads a few rows per booth instead of counting a state's ten million voters by booth (about a second).
 *
 * An UPDATE of voters appends only what moved: the old rows' counts are subtracted from the new rows' in one
 * grouped statement, and the groups that come to nothing are not written (an edit of a name writes nothing).
 */
const groups = (rows: string, sign: '' | '-', voted: boolean) => {
  const supporter = voted
    ? `CASE WHEN supporter = 1 THEN '1' ELSE '0' END`
    : `CASE WHEN support_level IN (1, 2) THEN '1' ELSE '0' END`;
  const where = voted ? ' WHERE voted = 1' : '';
  const prefix = voted ? 'voted_' : '';
  return `SELECT workspace_id, '${prefix}booth' AS kind, coalesce('=' || booth_key, '') AS key, ${supporter} AS value,
      ${sign}1 AS d FROM ${rows}${where}
    UNION ALL SELECT workspace_id, '${prefix}part', coalesce('=' || part_number, ''), ${supporter}, ${sign}1
      FROM ${rows}${where}`;
};

const append = (parts: string[]) =>
  `INSERT INTO voter_value_counts (workspace_id, kind, key, value, delta)
     SELECT workspace_id, kind, key, value, sum(d) FROM (${parts.join(' UNION ALL ')}) x
     GROUP BY workspace_id, kind, key, value HAVING sum(d) <> 0;`;

export async function up(db: Kysely<unknown>): Promise<void> {
  if (!isPostgres(db)) return;
  await sql.raw(append([groups('voters', '', false), groups('poll_voted', '', true)])).execute(db);
  for (const [table, voted] of [
    ['voters', false],
    ['poll_voted', true],
  ] as const)
    await transitionTriggers(
      db,
      table,
      'turnout',
      (rows, sign) => append([groups(rows, sign, voted)]),
      // One grouped statement: the old rows' counts taken from the new rows', nothing written where they cancel.
      () => append([groups('new_rows', '', voted), groups('old_rows', '-', voted)]),
    );
}

export async function down(db: Kysely<unknown>): Promise<void> {
  if (!isPostgres(db)) return;
  for (const table of ['voters', 'poll_voted']) await dropTransitionTriggers(db, table, 'turnout');
  await sql`DELETE FROM voter_value_counts WHERE kind IN ('booth', 'part', 'voted_booth', 'voted_part')`.execute(
    db,
  );
}
