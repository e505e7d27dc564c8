import { pageOf } from '../../db/paginate.ts';
import { type Insertable, type Updateable, sql } from 'kysely';
import { isPostgres } from '../../db/dialect.ts';
import type { GrievanceRow, GrievanceTable } from '../../db/schema.ts';
import type { GrievancePriority, GrievanceStatus } from '../../domain.ts';
import type { Executor } from '../../db/types.ts';
import { filteredVoters, type VoterScope } from '../voters/voters.search.ts';
import { matchesPlace } from '../places/places.repository.ts';
import { placeKey } from '../../lib/place.ts';

export interface GrievanceFilters {
  status?: GrievanceStatus | undefined;
  priority?: GrievancePriority | undefined;
  category?: string | undefined;
  constituency?: string | undefined;
  assigned_to?: number | undefined;
  overdue?: boolean | undefined;
  search?: string | undefined;
  /** A volunteer: only the grievances they opened, those assigned to them, and those of voters in their scope. */
  scope?: VoterScope | undefined;
}

function likePattern(term: string): string {
  return `%${term.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

function filtered(db: Executor, workspaceId: number, filters: GrievanceFilters, now: string) {
  let query = db.selectFrom('grievances').where('workspace_id', '=', workspaceId);
  const scope = filters.scope;
  if (scope)
    query = query.where((eb) =>
      eb.or([
        eb('grievances.assigned_to', '=', scope.userId),
        eb('grievances.created_by', '=', scope.userId),
        eb(
          'grievances.voter_id',
          'in',
          filteredVoters(db, workspaceId, { scope }).select('voters.id') as never,
        ),
      ]),
    );
  if (filters.status) query = query.where('status', '=', filters.status);
  if (filters.priority) query = query.where('priority', '=', filters.priority);
  const category = filters.category?.trim();
  if (category) query = query.where(sql<string>`lower(category)`, '=', category.toLowerCase());
  const constituency = filters.constituency?.trim();
  if (constituency)
    query = query.where((eb) =>
      matchesPlace(eb, 'constituency_key', workspaceId, 'constituency', [placeKey(constituency)]),
    );
  if (filters.assigned_to !== undefined) query = query.where('assigned_to', '=', filters.assigned_to);
  if (filters.overdue === true) {
    query = query.where('due_at', '<', now).where('status', 'in', ['open', 'in_progress']);
  } else if (filters.overdue === false) {
    query = query.where((eb) => eb.or([eb('due_at', '>=', now), eb('status', 'in', ['resolved', 'closed'])]));
  }
  const term = filters.search?.trim();
  if (term) {
    const like = likePattern(term);
    query = isPostgres(db)
      ? query.where((eb) => eb.or([eb('title', 'ilike', like), eb('description', 'ilike', like)]))
      : query.where((eb) =>
          eb.or([
            sql<boolean>`title LIKE ${like} ESCAPE '\\'`,
            sql<boolean>`description LIKE ${like} ESCAPE '\\'`,
          ]),
        );
  }
  return query;
}

/** Newest first. */
export async function listGrievances(
  db: Executor,
  workspaceId: number,
  filters: GrievanceFilters,
  now: string,
  page: number,
  perPage: number,
): Promise<{ rows: GrievanceRow[]; total: number }> {
  const base = filtered(db, workspaceId, filters, now);
  return pageOf(base, (q) => q.selectAll().orderBy('id', 'desc'), page, perPage);
}

export async function findGrievance(
  db: Executor,
  workspaceId: number,
  id: number,
): Promise<GrievanceRow | undefined> {
  return db
    .selectFrom('grievances')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .executeTakeFirst();
}

export async function insertGrievance(
  db: Executor,
  values: Insertable<GrievanceTable>,
): Promise<GrievanceRow> {
  return db.insertInto('grievances').values(values).returningAll().executeTakeFirstOrThrow();
}

export async function updateGrievance(
  db: Executor,
  workspaceId: number,
  id: number,
  values: Updateable<GrievanceTable>,
): Promise<GrievanceRow | undefined> {
  return db
    .updateTable('grievances')
    .set(values)
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
}

/** Whether the user and the voter (when given) belong to the workspace. */
export async function userInWorkspace(db: Executor, workspaceId: number, userId: number): Promise<boolean> {
  const row = await db
    .selectFrom('users')
    .select('id')
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', userId)
    .executeTakeFirst();
  return row !== undefined;
}

export async function voterInWorkspace(db: Executor, workspaceId: number, voterId: number): Promise<boolean> {
  const row = await db
    .selectFrom('voters')
    .select('id')
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', voterId)
    .executeTakeFirst();
  return row !== undefined;
}

/** Whether a volunteer may see this grievance (see GrievanceFilters.scope). */
export async function grievanceInScope(
  db: Executor,
  workspaceId: number,
  id: number,
  scope: VoterScope,
): Promise<boolean> {
  const row = await filtered(db, workspaceId, { scope }, new Date().toISOString())
    .where('grievances.id', '=', id)
    .select('grievances.id')
    .executeTakeFirst();
  return row !== undefined;
}
