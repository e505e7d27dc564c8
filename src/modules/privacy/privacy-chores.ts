import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/schema.ts';
import { announceDueSoon } from './privacy.service.ts';

/** Rows one statement deletes; a round deletes at most CHUNK * CHUNKS of each kind, the next round goes on. */
const CHUNK = 1000;
const CHUNKS = 10;
const DAY_MS = 86_400_000;

type RetentionColumn =
  | 'retention_messages_days'
  | 'retention_inbound_days'
  | 'retention_visits_days'
  | 'retention_survey_responses_days';

/**
 * One chunk of one kind: rows created before the cutoff that nothing still needs (a queued message or an open
 * survey session stays whatever its age). How many rows went.
 */
async function deleteChunk(
  db: Kysely<Database>,
  column: RetentionColumn,
  workspaceId: number,
  cutoff: string,
) {
  const table = {
    retention_messages_days: 'messages',
    retention_inbound_days: 'inbound_messages',
    retention_visits_days: 'visits',
    retention_survey_responses_days: 'survey_responses',
  }[column];
  const age = column === 'retention_survey_responses_days' ? 'started_at' : 'created_at';
  const still =
    column === 'retention_messages_days'
      ? sql` AND status IN ('sent', 'delivered', 'failed')`
      : column === 'retention_survey_responses_days'
        ? sql` AND status <> 'open'`
        : sql``;
  const result = await sql`DELETE FROM ${sql.table(table)} WHERE id IN (SELECT id FROM ${sql.table(table)}
    WHERE workspace_id = ${workspaceId} AND ${sql.ref(age)} < ${cutoff}${still} ORDER BY id LIMIT ${CHUNK})`.execute(
    db,
  );
  return Number(result.numAffectedRows ?? 0);
}

/**
 * Retention (the contract's fourth part): for each workspace that set a period, its older messages, replies,
 * visits and survey responses are deleted in chunks of CHUNK, at most CHUNKS a kind a round. Audit entries are
 * never touched here (AUDIT_RETENTION_DAYS, at least 365, governs them). Returns how many rows went.
 */
export async function applyRetention(db: Kysely<Database>, now = Date.now()): Promise<number> {
  const workspaces = await db
    .selectFrom('workspaces')
    .select([
      'id',
      'retention_messages_days',
      'retention_inbound_days',
      'retention_visits_days',
      'retention_survey_responses_days',
    ])
    .where((eb) =>
      eb.or([
        eb('retention_messages_days', 'is not', null),
        eb('retention_inbound_days', 'is not', null),
        eb('retention_visits_days', 'is not', null),
        eb('retention_survey_responses_days', 'is not', null),
      ]),
    )
    .execute();
  let deleted = 0;
  for (const workspace of workspaces) {
    for (const column of [
      'retention_messages_days',
      'retention_inbound_days',
      'retention_visits_days',
      'retention_survey_responses_days',
    ] as const) {
      const days = workspace[column];
      if (days === null) continue;
      const cutoff = new Date(now - days * DAY_MS).toISOString();
      for (let i = 0; i < CHUNKS; i += 1) {
        const n = await deleteChunk(db, column, Number(workspace.id), cutoff);
        deleted += n;
        if (n < CHUNK) break;
      }
    }
  }
  return deleted;
}

/** How often the privacy chore runs: retention and the due-soon announcements. */
export const PRIVACY_CHORE_MS = 10 * 60_000;

/** One round of the privacy chore; true when it found work (the loop runs again at once). */
export async function privacyRound(db: Kysely<Database>, now = Date.now()): Promise<boolean> {
  const announced = await announceDueSoon(db, now);
  const deleted = await applyRetention(db, now);
  return announced >= 100 || deleted >= CHUNK * CHUNKS;
}
