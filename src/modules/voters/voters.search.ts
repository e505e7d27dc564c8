import { placeKey, type PlaceKind, placeKinds } from '../../lib/place.ts';
import { type Expression, type ExpressionBuilder, type SelectQueryBuilder, type SqlBool, sql } from 'kysely';
import { isPostgres } from '../../db/dialect.ts';
import type { Database } from '../../db/schema.ts';
import type { Executor } from '../../db/types.ts';
import { coverageOf } from '../users/users.schemas.ts';
import { matchesPlace, withPlaceAliases } from '../places/places.repository.ts';
import {
  cleanRecordFilters,
  hasRecordFilters,
  recordConditions,
  type RecordFilters,
} from './voter-filters.ts';
import { fieldDefs } from './voter-fields.ts';

/**
 * How voters are found: the filters shared by the list, the export, segments and broadcasts, the search (trigram
 * or FTS5 and phone digits), and the planner that picks how a page and its total are read.
 */

/** The filter object shared by the list, export, segments and broadcasts (record filters: voter-filters.ts). */
export interface VoterFilters extends RecordFilters {
  constituency?: string | undefined;
  booth?: string | undefined;
  ward?: string | undefined;
  search?: string | undefined;
  /** A volunteer's part of the roll: only the voters in it (VoterScope). */
  scope?: VoterScope | undefined;
  /**
   * The keys each place filter matches, its place's other names included (withPlaces): set, the filters are
   * plain index lookups; unset, the same match is made in SQL, correct but not ordered by the index.
   */
  placeKeys?: Partial<Record<PlaceKind, string[]>> | undefined;
}

/**
 * A volunteer's part of the roll (the contract's fourth part): the voters of their coverage (wards, booths,
 * constituencies, compared case-folded), those they added, and the contacts of conversations assigned to them.
 */
export interface VoterScope {
  userId: number;
  wards: readonly string[];
  booths: readonly string[];
  constituencies: readonly string[];
  /** The keys the coverage matches, its places' other names included (set by volunteerScope). */
  placeKeys?: Partial<Record<PlaceKind, string[]>> | undefined;
  /** The filters of the turfs assigned to them (field work): exact filters only, a turf has no search. */
  turfs?: readonly VoterFilters[] | undefined;
}

/** A volunteer's part of the roll (their coverage read from their user row); undefined for other roles. */
export async function volunteerScope(
  db: Executor,
  auth: { userId: number; workspaceId: number; role: string },
): Promise<VoterScope | undefined> {
  if (auth.role !== 'volunteer') return undefined;
  const user = await db
    .selectFrom('users')
    .select('coverage')
    .where('id', '=', auth.userId)
    .where('workspace_id', '=', auth.workspaceId)
    .executeTakeFirst();
  const coverage = coverageOf({ coverage: user?.coverage ?? null });
  const placeKeys = await placeKeysOf(db, auth.workspaceId, {
    ward: coverage.wards,
    booth: coverage.booths,
    constituency: coverage.constituencies,
  });
  // Their turfs' voters are theirs too (the contract's fourth part). The turfs table is read here, not through
  // the field module, which builds on this one.
  const turfs = await db
    .selectFrom('turf_members as m')
    .innerJoin('turfs as t', 't.id', 'm.turf_id')
    .select('t.filters')
    .where('m.workspace_id', '=', auth.workspaceId)
    .where('m.user_id', '=', auth.userId)
    .execute();
  return {
    userId: auth.userId,
    ...coverage,
    placeKeys,
    turfs: turfs.map((t) => JSON.parse(t.filters) as VoterFilters),
  };
}

/** For each kind's values, their keys with every other name of the places they name (one query). */
async function placeKeysOf(
  db: Executor,
  workspaceId: number,
  values: Partial<Record<PlaceKind, readonly string[]>>,
): Promise<Partial<Record<PlaceKind, string[]>>> {
  const out: Partial<Record<PlaceKind, string[]>> = {};
  for (const kind of placeKinds) {
    const keys = [...new Set((values[kind] ?? []).map((v) => placeKey(v)).filter(Boolean))];
    if (keys.length > 0) out[kind] = await withPlaceAliases(db, workspaceId, kind, keys);
  }
  return out;
}

/**
 * `filters` with the keys each place filter matches (`placeKeys`), read once: a filter then compares the
 * column with one key (an index seek in id order) or a short list, not a subquery the planner cannot see
 * through. Callers that read voters more than once (a campaign's fill, an export) resolve once and pass the
 * result on; an unresolved filter still matches the same voters.
 */
export async function withPlaces(
  db: Executor,
  workspaceId: number,
  given: VoterFilters,
): Promise<VoterFilters> {
  const filters = epicSearch(given);
  if (filters.placeKeys) return filters;
  const values = exactValues(filters);
  const placeKeys = await placeKeysOf(db, workspaceId, {
    ...(values.ward ? { ward: [values.ward] } : {}),
    ...(values.booth ? { booth: [values.booth] } : {}),
    ...(values.constituency ? { constituency: [values.constituency] } : {}),
  });
  return { ...filters, placeKeys };
}

/** `column` matches `keys` resolved (one key: equality; more: IN), or `values` through the places, in SQL. */
function placeCondition(
  eb: ExpressionBuilder<Database, 'voters'>,
  kind: PlaceKind,
  workspaceId: number,
  values: string[],
  resolved: string[] | undefined,
) {
  const column = `voters.${kind}_key` as const;
  if (!resolved) return matchesPlace(eb, column, workspaceId, kind, values);
  return resolved.length === 1 ? eb(column, '=', resolved[0]!) : eb(column, 'in', resolved);
}

function scopeCondition(
  eb: ExpressionBuilder<Database, 'voters'>,
  workspaceId: number,
  scope: VoterScope,
): Expression<SqlBool> {
  const keys = (list: readonly string[]) => [...new Set(list.map((v) => placeKey(v)).filter(Boolean))];
  const covered = (
    [
      ['ward', keys(scope.wards)],
      ['booth', keys(scope.booths)],
      ['constituency', keys(scope.constituencies)],
    ] as const
  ).filter(([, list]) => list.length > 0);
  return eb.or([
    ...covered.map(([kind, list]) => placeCondition(eb, kind, workspaceId, list, scope.placeKeys?.[kind])),
    ...(scope.turfs ?? [])
      .filter((turf) => hasExactFilters(turf))
      .map((turf) => exactFilters({ ...turf, scope: undefined, search: undefined }, workspaceId)(eb)),
    eb('voters.created_by', '=', scope.userId),
    eb(
      'voters.id',
      'in',
      eb
        .selectFrom('conversations')
        .select('conversations.voter_id')
        .where('conversations.workspace_id', '=', workspaceId)
        .where('conversations.assigned_to', '=', scope.userId)
        .where('conversations.voter_id', 'is not', null),
    ),
  ]);
}

/** A term made only of digits, spaces and an optional leading + also searches phones, by its digits. */
function phoneDigits(term: string): string | undefined {
  return /^\+?[\d ]+$/.test(term) ? term.replace(/\D/g, '') : undefined;
}

function likePattern(term: string): string {
  return `%${term.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

function ftsPhrase(term: string): string {
  return `"${term.replace(/"/g, '""')}"`;
}

/**
 * The FTS5 query for a term on SQLite, or undefined when the term is too short for trigrams. The term's
 * phrase is not limited to the name and email columns (a column filter cost a fifth of a common term's
 * count), which matches the same voters: a phone is `+` and digits, so a term that is not made of digits,
 * spaces and a leading `+` never occurs in one, and a term that is also searches the phone's digits.
 */
export function ftsMatch(term: string): string | undefined {
  const digits = phoneDigits(term);
  if ([...term].length < 3 || (digits !== undefined && digits.length < 3)) return undefined;
  return digits ? `${ftsPhrase(term)} OR phone: ${ftsPhrase(digits)}` : ftsPhrase(term);
}

/**
 * Case-insensitive substring search of name or email (and phone digits) on PostgreSQL: the ids of the
 * workspace's matching voters, read from `voter_search` (each voter's searchable columns, narrow, with pg_trgm
 * GIN indexes; migration 028) without touching `voters`. Trigrams need three characters; a shorter term scans
 * the workspace's rows of that table.
 */
export function searchedIds(db: Executor, workspaceId: number, term: string, ids?: IdRange) {
  const digits = phoneDigits(term);
  const like = likePattern(term);
  let query = db
    .selectFrom('voter_search')
    .select('voter_search.voter_id')
    .where('voter_search.workspace_id', '=', workspaceId);
  // Within an id range (a campaign's fill), the range goes into the search's own query: PostgreSQL does not
  // carry a range on voters.id over to voter_search.voter_id, and a chunk would find every match of the term.
  if (ids)
    query = query
      .where('voter_search.voter_id', '>', ids.after)
      .where('voter_search.voter_id', '<=', ids.upTo);
  return query.where((eb) => {
    const ors = [
      eb('voter_search.name', 'ilike', like),
      eb('voter_search.email', 'ilike', like),
      eb('voter_search.name_local', 'ilike', like),
    ];
    if (digits) ors.push(eb('voter_search.phone', 'like', likePattern(digits)));
    return eb.or(ors);
  });
}

/**
 * Case-insensitive substring search of name or email (and phone digits), served by an index: `voter_search`'s
 * trigram indexes on PostgreSQL, the FTS5 trigram table on SQLite. Trigrams need three characters; a shorter
 * term falls back to LIKE over the workspace's rows (a scan: slow at millions of voters).
 */
function searchCondition(db: Executor, workspaceId: number, term: string, ids?: IdRange) {
  const digits = phoneDigits(term);
  return (eb: ExpressionBuilder<Database, 'voters'>) => {
    if (isPostgres(db)) return eb('voters.id', 'in', searchedIds(db, workspaceId, term, ids));
    const match = ftsMatch(term);
    // Within an id range (a campaign's fill), the range goes into the search index's own query: FTS5 seeks by
    // rowid, so a chunk costs its range, not every match of the term (evaluated again for each chunk).
    const range = ids ? sql` AND rowid > ${ids.after} AND rowid <= ${ids.upTo}` : sql``;
    if (match)
      return eb(
        'voters.id',
        'in',
        sql<number>`(SELECT rowid FROM voters_fts WHERE voters_fts MATCH ${match}${range})`,
      );
    const like = likePattern(term);
    const ors = [
      sql<boolean>`voters.name LIKE ${like} ESCAPE '\\'`,
      sql<boolean>`voters.email LIKE ${like} ESCAPE '\\'`,
    ];
    if (digits) ors.push(sql<boolean>`voters.phone LIKE ${likePattern(digits)} ESCAPE '\\'`);
    return eb.or(ors);
  };
}

/**
 * The exact filters as they are compared: each place's key (lib/place.ts: the normal form, case-folded), an
 * empty one left out. The SQL (exactFilters) matches each against the place it names (places.repository.ts).
 */
export function exactValues(filters: VoterFilters): Partial<Record<PlaceKind, string>> {
  const values: ReturnType<typeof exactValues> = {};
  for (const kind of placeKinds) {
    const key = filters[kind] && placeKey(filters[kind]);
    if (key) values[kind] = key;
  }
  return values;
}

/** Whether `filters` has a constituency, booth or ward to match, or a volunteer's scope. */
export function hasExactFilters(filters: VoterFilters): boolean {
  return (
    Object.keys(exactValues(filters)).length > 0 || filters.scope !== undefined || hasRecordFilters(filters)
  );
}

export function exactFilters(filters: VoterFilters, workspaceId: number) {
  const values = exactValues(filters);
  return (eb: ExpressionBuilder<Database, 'voters'>): Expression<SqlBool> => {
    const and = [];
    for (const kind of placeKinds) {
      const key = values[kind];
      if (key) and.push(placeCondition(eb, kind, workspaceId, [key], filters.placeKeys?.[kind]));
    }
    if (filters.scope) and.push(scopeCondition(eb, workspaceId, filters.scope));
    and.push(...recordConditions(eb, workspaceId, filters));
    return eb.and(and);
  };
}

/**
 * The voters of a workspace that match `filters`, as a query to select from, count, stream or INSERT ...
 * SELECT from (segments and broadcasts expand through this, set-based in the database).
 */
/** Voter ids in (after, upTo]. */
export interface IdRange {
  after: number;
  upTo: number;
}

const EPIC_TERM = /^\s*[A-Za-z]{3}\d{7}\s*$/;

/**
 * A search for an EPIC number (3 letters, 7 digits: never part of a name, and an address that held one would
 * be a strange one) is the exact epic_number filter, an index seek.
 */
function epicSearch(filters: VoterFilters): VoterFilters {
  const term = filters.search;
  if (!term || !EPIC_TERM.test(term)) return filters;
  const epic = term.trim().toUpperCase();
  if (filters.epic_number !== undefined && filters.epic_number !== epic) return filters;
  return { ...filters, search: undefined, epic_number: epic };
}

export function filteredVoters(
  db: Executor,
  workspaceId: number,
  given: VoterFilters,
  ids?: IdRange,
): SelectQueryBuilder<Database, 'voters', object> {
  const filters = epicSearch(given);
  let query = db.selectFrom('voters').where('voters.workspace_id', '=', workspaceId);
  if (ids) query = query.where('voters.id', '>', ids.after).where('voters.id', '<=', ids.upTo);
  if (hasExactFilters(filters)) query = query.where(exactFilters(filters, workspaceId));
  const term = filters.search?.trim();
  if (term) query = query.where(searchCondition(db, workspaceId, term, ids));
  return query;
}

/**
 * A filter object as a caller gave it (a query string, a segment's or an export's JSON): the place and
 * search filters as they are, the record's checked against the workspace's custom fields.
 */
export async function checkVoterFilters(
  db: Executor,
  workspaceId: number,
  raw: Record<string, unknown>,
  canSeeSensitive = true,
  prefix = '',
): Promise<VoterFilters> {
  const base: VoterFilters = {};
  for (const key of ['search', 'constituency', 'booth', 'ward'] as const) {
    const value = raw[key];
    if (typeof value === 'string' && value.trim() !== '') base[key] = value.trim();
  }
  const needsDefs = Object.keys(raw).some((k) => k.startsWith('fields.'));
  const defs = needsDefs ? await fieldDefs(db, workspaceId) : [];
  return { ...base, ...cleanRecordFilters(raw, defs, canSeeSensitive, prefix) };
}
