import { type Kysely, sql } from 'kysely';
import { nowIso } from '../../db/connect.ts';
import { isPostgres } from '../../db/dialect.ts';
import type { Database, TurfRow } from '../../db/schema.ts';
import type { Executor } from '../../db/types.ts';
import { pageResult } from '../../domain.ts';
import { notFound, validationError } from '../../errors.ts';
import type { AuthContext } from '../../http/guard.ts';
import { parseRef, turfRef } from '../../refs.ts';
import { doorSurvey, surveyIdOf } from '../surveys/survey-visits.ts';
import { ageOf } from '../voters/voter-record.rules.ts';
import { countVoters } from '../voters/voters.list.ts';
import { checkVoterFilters, filteredVoters, type VoterFilters, withPlaces } from '../voters/voters.search.ts';
import { seesSensitive } from '../voters/voters.rules.ts';
import type { Outcome } from './field.schemas.ts';

/**
 * Turfs (the contract's fourth part, "Field work"): a name, voter filters (a booth, a part, a page range...) and
 * the members who work it. Politicians and managers make and change them and see them all; a volunteer sees only
 * the turfs assigned to them, and their walk lists, visits and marks are held to those turfs' voters.
 */

export const turfFilters = (row: Pick<TurfRow, 'filters'>) => JSON.parse(row.filters) as VoterFilters;

/** The turfs a user works, or every turf of the workspace for a politician or manager (`undefined`). */
export async function turfsOf(db: Executor, auth: AuthContext): Promise<TurfRow[] | undefined> {
  if (auth.role !== 'volunteer') return undefined;
  return db
    .selectFrom('turfs')
    .innerJoin('turf_members as m', 'm.turf_id', 'turfs.id')
    .selectAll('turfs')
    .where('m.workspace_id', '=', auth.workspaceId)
    .where('m.user_id', '=', auth.userId)
    .orderBy('turfs.id')
    .execute();
}

/** Which of `ids` are voters of the workspace and, for a volunteer (`turfs` given), of one of their turfs. */
export async function reachableVoters(
  db: Executor,
  workspaceId: number,
  turfs: TurfRow[] | undefined,
  ids: readonly number[],
): Promise<Set<number>> {
  const found = new Set<number>();
  const unique = [...new Set(ids)];
  for (let i = 0; i < unique.length; i += 500) {
    const chunk = unique.slice(i, i + 500);
    if (!turfs) {
      const rows = await db
        .selectFrom('voters')
        .select('id')
        .where('workspace_id', '=', workspaceId)
        .where('id', 'in', chunk)
        .execute();
      for (const r of rows) found.add(Number(r.id));
      continue;
    }
    for (const turf of turfs) {
      const left = chunk.filter((id) => !found.has(id));
      if (left.length === 0) break;
      const filters = await withPlaces(db, workspaceId, turfFilters(turf));
      const rows = await filteredVoters(db, workspaceId, filters)
        .select('voters.id')
        .where('voters.id', 'in', left)
        .execute();
      for (const r of rows) found.add(Number(r.id));
    }
  }
  return found;
}

/** A household key, or the voter's own id where it has none: each is one household. */
const householdCount = sql<number>`count(DISTINCT coalesce(voters.household_key, 'v:' || voters.id))`;

export async function turfCounts(db: Executor, workspaceId: number, filters: VoterFilters) {
  const resolved = await withPlaces(db, workspaceId, filters);
  const voters = await countVoters(db, workspaceId, resolved);
  const row = await filteredVoters(db, workspaceId, resolved)
    .select(householdCount.as('households'))
    .executeTakeFirstOrThrow();
  return { voters, households: Number(row.households) };
}

/** House numbers in number order where they start with a number ("9" before "10", "12A" beside "12"). */
function houseOrder(db: Executor) {
  return isPostgres(db)
    ? sql`substring(voters.house_number from '^[0-9]{1,9}')::int`
    : sql`CASE WHEN voters.house_number GLOB '[0-9]*' THEN CAST(voters.house_number AS INTEGER) END`;
}

interface TurfInput {
  name?: string | undefined;
  filters?: Record<string, unknown> | undefined;
  assigned_to?: number[] | undefined;
  survey_id?: string | null | undefined;
}

export class TurfsService {
  constructor(private readonly deps: { db: Kysely<Database> }) {}

  private async find(db: Executor, auth: AuthContext, ref: string): Promise<TurfRow> {
    const id = parseRef('turf', ref);
    const row =
      id === undefined
        ? undefined
        : await db
            .selectFrom('turfs')
            .selectAll()
            .where('workspace_id', '=', auth.workspaceId)
            .where('id', '=', id)
            .$if(auth.role === 'volunteer', (q) =>
              q.where('id', 'in', (eb) =>
                eb.selectFrom('turf_members').select('turf_id').where('user_id', '=', auth.userId),
              ),
            )
            .executeTakeFirst();
    if (!row) throw notFound('Turf');
    return row;
  }

  private async view(db: Executor, row: TurfRow, sensitive: boolean) {
    const members = await db
      .selectFrom('turf_members')
      .select('user_id')
      .where('turf_id', '=', row.id)
      .orderBy('user_id')
      .execute();
    const filters = turfFilters(row);
    return {
      id: turfRef(row.id),
      name: row.name,
      filters,
      assigned_to: members.map((m) => Number(m.user_id)),
      ...(await turfCounts(db, row.workspace_id, filters)),
      survey:
        row.survey_id === null
          ? null
          : await doorSurvey(db, row.workspace_id, Number(row.survey_id), sensitive),
      created_at: row.created_at,
      updated_at: row.updated_at,
    };
  }

  private async checked(db: Executor, workspaceId: number, input: TurfInput) {
    const name = input.name?.trim();
    if (input.name !== undefined && !name) throw validationError({ name: ['must not be empty.'] });
    let filters: VoterFilters | undefined;
    if (input.filters !== undefined) {
      filters = await checkVoterFilters(db, workspaceId, input.filters, true, 'filters.');
      if (filters.search !== undefined)
        throw validationError({
          'filters.search': [
            'is not a turf filter: a turf is a stretch of the roll (a booth, a part, pages...).',
          ],
        });
      if (Object.keys(filters).length === 0)
        throw validationError({
          filters: ['must name at least one filter (a booth, a part_number, a page range, a ward...).'],
        });
    }
    if (input.assigned_to && input.assigned_to.length > 0) {
      const users = await db
        .selectFrom('users')
        .select('id')
        .where('workspace_id', '=', workspaceId)
        .where('id', 'in', input.assigned_to)
        .execute();
      const known = new Set(users.map((u) => Number(u.id)));
      const unknown = input.assigned_to.filter((id) => !known.has(id));
      if (unknown.length > 0)
        throw validationError({ assigned_to: [`names no member of this workspace: ${unknown.join(', ')}.`] });
    }
    let surveyId: number | null | undefined = input.survey_id === null ? null : undefined;
    if (typeof input.survey_id === 'string') {
      surveyId = await surveyIdOf(db, workspaceId, input.survey_id);
      if (surveyId === undefined)
        throw validationError({ survey_id: ['is not a survey of this workspace (svy_<n>).'] });
    }
    return { name, filters, surveyId };
  }

  private async assign(db: Executor, row: TurfRow, users: number[]) {
    await db.deleteFrom('turf_members').where('turf_id', '=', row.id).execute();
    if (users.length > 0)
      await db
        .insertInto('turf_members')
        .values(users.map((user_id) => ({ turf_id: row.id, user_id, workspace_id: row.workspace_id })))
        .execute();
  }

  async create(workspaceId: number, input: TurfInput & { name: string; filters: Record<string, unknown> }) {
    const { name, filters, surveyId } = await this.checked(this.deps.db, workspaceId, input);
    return this.deps.db.transaction().execute(async (trx) => {
      const now = nowIso();
      const row = await trx
        .insertInto('turfs')
        .values({
          workspace_id: workspaceId,
          name: name!,
          filters: JSON.stringify(filters),
          survey_id: surveyId ?? null,
          created_at: now,
          updated_at: now,
        })
        .returningAll()
        .executeTakeFirstOrThrow();
      await this.assign(trx, row, input.assigned_to ?? []);
      return this.view(trx, row, true);
    });
  }

  async update(auth: AuthContext, ref: string, input: TurfInput) {
    const { name, filters, surveyId } = await this.checked(this.deps.db, auth.workspaceId, input);
    return this.deps.db.transaction().execute(async (trx) => {
      const found = await this.find(trx, auth, ref);
      const row = await trx
        .updateTable('turfs')
        .set({
          ...(name ? { name } : {}),
          ...(filters ? { filters: JSON.stringify(filters) } : {}),
          ...(surveyId !== undefined ? { survey_id: surveyId } : {}),
          updated_at: nowIso(),
        })
        .where('id', '=', found.id)
        .returningAll()
        .executeTakeFirstOrThrow();
      if (input.assigned_to) await this.assign(trx, row, input.assigned_to);
      return this.view(trx, row, true);
    });
  }

  async remove(auth: AuthContext, ref: string): Promise<void> {
    const row = await this.find(this.deps.db, auth, ref);
    await this.deps.db.deleteFrom('turfs').where('id', '=', row.id).execute();
  }

  async get(auth: AuthContext, ref: string) {
    return this.view(this.deps.db, await this.find(this.deps.db, auth, ref), seesSensitive(auth.role));
  }

  /** The workspace's turfs (a volunteer: theirs), in id order. */
  async list(auth: AuthContext, page: number, perPage: number) {
    const { db } = this.deps;
    const mine = (q: ReturnType<typeof this.base>) =>
      auth.role === 'volunteer'
        ? q.where('turfs.id', 'in', (eb) =>
            eb.selectFrom('turf_members').select('turf_id').where('user_id', '=', auth.userId),
          )
        : q;
    const total = await mine(this.base(auth.workspaceId))
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow();
    const rows = await mine(this.base(auth.workspaceId))
      .selectAll()
      .orderBy('id')
      .limit(perPage)
      .offset((page - 1) * perPage)
      .execute();
    const items = [];
    for (const row of rows) items.push(await this.view(db, row, seesSensitive(auth.role)));
    return pageResult(items, Number(total.n), page, perPage);
  }

  private base(workspaceId: number) {
    return this.deps.db.selectFrom('turfs').where('turfs.workspace_id', '=', workspaceId);
  }

  /** The turf's voters, a household together: part, house number (as a number where it is one), serial. */
  async walkList(auth: AuthContext, ref: string, page: number, perPage: number) {
    const { db } = this.deps;
    const row = await this.find(db, auth, ref);
    const filters = await withPlaces(db, auth.workspaceId, turfFilters(row));
    const total = await countVoters(db, auth.workspaceId, filters);
    const voters = await filteredVoters(db, auth.workspaceId, filters)
      .select([
        'voters.id',
        'voters.name',
        'voters.name_local',
        'voters.epic_number',
        'voters.part_number',
        'voters.serial_number',
        'voters.page_number',
        'voters.house_number',
        'voters.birth_date',
        'voters.birth_key',
        'voters.gender',
        'voters.phone',
        'voters.support_level',
      ])
      .orderBy(sql`voters.part_number IS NULL`)
      .orderBy('voters.part_number')
      .orderBy(sql`${houseOrder(db)} IS NULL`)
      .orderBy(houseOrder(db))
      .orderBy('voters.house_number')
      .orderBy('voters.serial_number')
      .orderBy('voters.id')
      .limit(perPage)
      .offset((page - 1) * perPage)
      .execute();
    const last = await lastVisits(
      db,
      auth.workspaceId,
      voters.map((v) => Number(v.id)),
    );
    const sensitive = seesSensitive(auth.role);
    const items = voters.map(({ birth_date, birth_key, support_level, ...v }) => ({
      ...v,
      id: Number(v.id),
      age: ageOf(birth_date, birth_key),
      ...(sensitive ? { support_level } : {}),
      last_visit: last.get(Number(v.id)) ?? null,
    }));
    return pageResult(items, total, page, perPage);
  }

  /** The row of a turf the caller may read (404 otherwise). */
  turf(auth: AuthContext, ref: string): Promise<TurfRow> {
    return this.find(this.deps.db, auth, ref);
  }
}

/** Each voter's latest visit: outcome, when, and who. */
async function lastVisits(db: Executor, workspaceId: number, ids: number[]) {
  const out = new Map<
    number,
    { outcome: Outcome; visited_at: string; by: { id: number; name: string } | null }
  >();
  if (ids.length === 0) return out;
  const rows = await db
    .selectFrom('visits')
    .leftJoin('users', 'users.id', 'visits.user_id')
    .select(['visits.voter_id', 'visits.outcome', 'visits.visited_at', 'visits.user_id', 'users.name'])
    .where('visits.workspace_id', '=', workspaceId)
    .where('visits.voter_id', 'in', ids)
    .orderBy('visits.visited_at', 'desc')
    .orderBy('visits.id', 'desc')
    .execute();
  for (const r of rows) {
    const id = Number(r.voter_id);
    if (out.has(id)) continue;
    out.set(id, {
      outcome: r.outcome as Outcome,
      visited_at: r.visited_at,
      by: r.user_id !== null ? { id: Number(r.user_id), name: r.name ?? '' } : null,
    });
  }
  return out;
}
