import { pageOf } from '../../db/paginate.ts';
import type { Insertable, Updateable } from 'kysely';
import type { Database, VoterImportRow, VoterImportTable } from '../../db/schema.ts';
import type { Executor } from '../../db/types.ts';

export async function insertImportJob(
  db: Executor,
  values: Insertable<VoterImportTable>,
): Promise<VoterImportRow> {
  return db.insertInto('voter_imports').values(values).returningAll().executeTakeFirstOrThrow();
}

export async function findImportJob(
  db: Executor,
  workspaceId: number,
  id: number,
): Promise<VoterImportRow | undefined> {
  return db
    .selectFrom('voter_imports')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .executeTakeFirst();
}

/** A page of the workspace's jobs, newest first, and how many it has. */
export async function listImportJobs(
  db: Executor,
  workspaceId: number,
  page: number,
  perPage: number,
): Promise<{ rows: VoterImportRow[]; total: number }> {
  return pageOf(
    db.selectFrom('voter_imports').where('workspace_id', '=', workspaceId),
    (q) => q.selectAll().orderBy('id', 'desc'),
    page,
    perPage,
  );
}

/**
 * Claims the oldest job that is queued, or running under a lease that ran out (its worker stopped or died):
 * the UPDATE repeats the condition, so of two workers that picked the same job only one gets it.
 */
export async function claimImportJob(
  db: Executor,
  owner: string,
  nowMs: number,
  leaseMs: number,
  now: string,
  workspaceIds?: readonly number[],
): Promise<VoterImportRow | undefined> {
  const claimable = (eb: import('kysely').ExpressionBuilder<Database, 'voter_imports'>) =>
    eb.or([
      eb('status', '=', 'queued'),
      eb.and([eb('status', '=', 'running'), eb('lease_until', '<', nowMs)]),
    ]);
  let pick = db.selectFrom('voter_imports').select('id').where(claimable);
  if (workspaceIds) pick = pick.where('workspace_id', 'in', workspaceIds.length ? workspaceIds : [-1]);
  const candidate = await pick.orderBy('id').limit(1).executeTakeFirst();
  if (!candidate) return undefined;
  return db
    .updateTable('voter_imports')
    .set((eb) => ({
      status: 'running',
      lease_owner: owner,
      lease_until: nowMs + leaseMs,
      attempts: eb('attempts', '+', 1),
      started_at: eb.fn.coalesce('started_at', eb.val(now)),
      bytes_read: 0,
      rows_read: 0,
    }))
    .where('id', '=', candidate.id)
    .where(claimable)
    .returningAll()
    .executeTakeFirst();
}

/** Updates a job this worker holds; false when the lease is no longer its own. */
export async function updateHeldJob(
  db: Executor,
  id: number,
  owner: string,
  values: Updateable<VoterImportTable>,
): Promise<boolean> {
  const result = await db
    .updateTable('voter_imports')
    .set(values)
    .where('id', '=', id)
    .where('lease_owner', '=', owner)
    .where('status', '=', 'running')
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/** Up to `limit` jobs that finished before `cutoff` (oldest first): what retention deletes next. */
export async function finishedImportJobsBefore(
  db: Executor,
  cutoff: string,
  limit: number,
): Promise<{ id: number; file_key: string }[]> {
  return db
    .selectFrom('voter_imports')
    .select(['id', 'file_key'])
    .where('status', 'in', ['completed', 'failed'])
    .where('finished_at', '<', cutoff)
    .orderBy('id')
    .limit(limit)
    .execute();
}

export async function deleteImportJobs(db: Executor, ids: number[]): Promise<void> {
  if (ids.length === 0) return;
  await db.deleteFrom('voter_imports').where('id', 'in', ids).execute();
}

/** The status of the job each of these file keys belongs to (keys of no job are absent). */
export async function importJobStatuses(
  db: Executor,
  fileKeys: string[],
): Promise<Map<string, VoterImportRow['status']>> {
  if (fileKeys.length === 0) return new Map();
  const rows = await db
    .selectFrom('voter_imports')
    .select(['file_key', 'status'])
    .where('file_key', 'in', fileKeys)
    .execute();
  return new Map(rows.map((row) => [row.file_key, row.status]));
}
