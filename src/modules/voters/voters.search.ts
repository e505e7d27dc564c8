import { placeKey, type PlaceKind, placeKinds } from '../../lib/place.ts';
import { CompiledQuery, type ExpressionBuilder, type SelectQueryBuilder, sql } from 'kysely';
import { isPostgres } from '../../db/dialect.ts';
import type { Database, VoterRow } from '../../db/schema.ts';
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
import { heldCount } from './voter-value-counts.ts';

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
  return { userId: auth.userId, ...coverage, placeKeys };
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

function scopeCondition(eb: ExpressionBuilder<Database, 'voters'>, workspaceId: number, scope: VoterScope) {
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
function ftsMatch(term: string): string | undefined {
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
function searchedIds(db: Executor, workspaceId: number, term: string, ids?: IdRange) {
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
function exactValues(filters: VoterFilters): Partial<Record<PlaceKind, string>> {
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

function exactFilters(filters: VoterFilters, workspaceId: number) {
  const values = exactValues(filters);
  return (eb: ExpressionBuilder<Database, 'voters'>) => {
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

/** A list with a search counts its matches exactly up to this many; above, its total is this figure. */
export const SEARCH_TOTAL_CAP = 10_000;

/** From this offset on, pages without a search are read through a deferred join (see voterPage). */
const DEFERRED_JOIN_OFFSET = 1000;

const listColumns = [
  'voters.id',
  'voters.name',
  'voters.phone',
  'voters.constituency',
  'voters.booth',
  'voters.ward',
  'voters.epic_number',
  'voters.part_number',
  'voters.serial_number',
  'voters.support_level',
] as const;
type ListRow = Pick<
  VoterRow,
  | 'id'
  | 'name'
  | 'phone'
  | 'constituency'
  | 'booth'
  | 'ward'
  | 'epic_number'
  | 'part_number'
  | 'serial_number'
  | 'support_level'
>;

/** What a page is read from: the list's total (capped for a search) and, for a rare PostgreSQL search, every id. */
interface ListCount {
  total: number;
  exact: boolean;
  ids?: number[] | undefined;
}

/**
 * One page in id order. On SQLite a search walks the FTS index in rowid (= id) order and joins each hit,
 * so a page costs its own rows, not every match.
 */
async function voterPage(
  db: Executor,
  workspaceId: number,
  filters: VoterFilters,
  page: number,
  perPage: number,
  count: ListCount,
): Promise<ListRow[]> {
  const { total } = count;
  const offset = (page - 1) * perPage;
  if (offset >= total) return []; // past the end (or past the capped total of a search)
  const term = filters.search?.trim();
  const match = term && !isPostgres(db) ? ftsMatch(term) : undefined;
  if (match) {
    let query = db
      .selectFrom('voters_fts')
      .innerJoin('voters', 'voters.id', 'voters_fts.rowid')
      .where(sql<boolean>`voters_fts MATCH ${match}`)
      .where('voters.workspace_id', '=', workspaceId);
    if (hasExactFilters(filters)) query = query.where(exactFilters(filters, workspaceId) as never);
    return query.select(listColumns).orderBy('voters_fts.rowid').limit(perPage).offset(offset).execute();
  }
  const side = term ? undefined : sideTableIds(db, workspaceId, filters);
  if (side)
    return db
      .selectFrom('voters')
      .select(listColumns)
      .where('voters.workspace_id', '=', workspaceId)
      .where('voters.id', 'in', side.ids(offset, perPage))
      .orderBy('voters.id')
      .execute();
  if (!term && !hasExactFilters(filters) && offset >= DEFERRED_JOIN_OFFSET)
    return blockPage(db, workspaceId, offset, perPage);
  if (!term && offset >= DEFERRED_JOIN_OFFSET) {
    // A deep page: skip rows inside an index that holds the filter columns and the id, then read only the
    // page's rows (reading every skipped row from the table is what makes OFFSET slow). Skip from whichever
    // end is nearer (the total is exact).
    const fromEnd = total - offset - perPage;
    let ids = filteredVoters(db, workspaceId, filters).select('voters.id');
    ids =
      fromEnd < offset
        ? ids
            .orderBy('voters.workspace_id', 'desc')
            .orderBy('voters.id', 'desc')
            .limit(perPage + Math.min(0, fromEnd))
            .offset(Math.max(0, fromEnd))
        : ids.orderBy('voters.workspace_id').orderBy('voters.id').limit(perPage).offset(offset);
    return db
      .selectFrom('voters')
      .select(listColumns)
      .where('voters.id', 'in', ids)
      .orderBy('voters.id')
      .execute();
  }
  if (count.ids) {
    // A PostgreSQL search with at most 10,000 matches: their ids are known, so a page is a lookup by id.
    const ids = count.ids.slice(offset, offset + perPage);
    if (ids.length === 0) return [];
    return db
      .selectFrom('voters')
      .select(listColumns)
      .where('voters.workspace_id', '=', workspaceId)
      .where('voters.id', 'in', ids)
      .orderBy('voters.id')
      .execute();
  }
  // Ordered by (workspace_id, id), the same order given the filter: without the constant column PostgreSQL may
  // walk the primary key through other workspaces' rows instead of the workspace's index.
  const matches = filteredVoters(db, workspaceId, filters).select(listColumns).orderBy('voters.workspace_id');
  const query = matches.orderBy('voters.id').limit(perPage).offset(offset);
  // Few matches, read through the filter's own index and sorted by id (`id + 0` keeps the id index out).
  const sorted = () =>
    matches
      .orderBy(sql`voters.id + 0`)
      .limit(perPage)
      .offset(offset)
      .execute();
  // Place filters and a volunteer's scope have indexes that end in the id: their matches are in id order.
  if (term || filters.scope || Object.keys(exactValues(filters)).length > 0) return query.execute();
  // Every match up to this page fits in it (an EPIC number's one voter): read them all and sort, without
  // asking the workspace's total whether a walk would pay.
  if (total <= offset + perPage) return sorted();
  if (await denseEnough(db, workspaceId, total, offset + perPage))
    return isPostgres(db) ? query.execute() : walkInIdOrder(db, query);
  // Few matches, and perhaps all at one end of the ids (a part's voters, imported together): read them through
  // their filter's index and sort them. Ordered by the id as it is, PostgreSQL estimated 15 of a part's 1,000
  // voters within 15,000 rows of the workspace's index and walked it: 50-150 ms, against about 1 ms.
  if (total <= SORT_ROWS) return sorted();
  return query.execute();
}

/** At most this many matches are read and sorted for a page of a sparse filter (above). */
const SORT_ROWS = 20_000;

/**
 * Rows a page is expected to walk in id order (see walkInIdOrder): with 25 a page, matches must be at least
 * 2.5% of the workspace. The estimate takes matches as spread evenly over the ids; a roll's are not always (a
 * part's voters were imported together, and walking to them cost 70 ms at a million voters against 1 ms
 * through the part's index), so only a dense filter walks, and a ten-fold error still ends within ten
 * thousand rows.
 */
const WALK_ROWS = 1_000;

/** Whether the workspace's rows, walked in id order, reach `wanted` matches within WALK_ROWS (by the total). */
async function denseEnough(
  db: Executor,
  workspaceId: number,
  total: number,
  wanted: number,
): Promise<boolean> {
  if (total === 0) return false;
  return (wanted * (await workspaceTotal(db, workspaceId))) / total <= WALK_ROWS;
}

/**
 * A SQLite page read by walking the workspace's voters in id order (voters_workspace_idx) and testing each
 * against the filters, stopping at the page. SQLite otherwise takes the filter's own index when it has one (an
 * age range's voters_birth_idx) and sorts every match by id to find the first 25: 120 ms for 100,000 matches
 * of a million voters, against under a millisecond for the walk. The walk is chosen only when the total shows
 * that matches are dense enough for it to end soon (denseEnough); a rare value keeps the filter's index, and
 * so do place filters and a volunteer's scope, whose indexes end in the id (already in id order).
 * Kysely cannot say INDEXED BY, so it goes into the compiled statement's outer FROM, which filteredVoters
 * writes first.
 */
async function walkInIdOrder(
  db: Executor,
  query: SelectQueryBuilder<Database, 'voters', ListRow>,
): Promise<ListRow[]> {
  const compiled = query.compile();
  const from = 'from "voters" where';
  if (!compiled.sql.includes(from)) return query.execute();
  const text = compiled.sql.replace(from, 'from "voters" indexed by "voters_workspace_idx" where');
  const result = await db.executeQuery<ListRow>(CompiledQuery.raw(text, [...compiled.parameters]));
  return result.rows;
}

/** Voters are counted per block of 2^VOTER_BLOCK_BITS ids in voter_blocks (migration 007 repeats the figure). */
const VOTER_BLOCK_BITS = 12;

/**
 * A deep page of the unfiltered list, in one statement (one snapshot): the trigger-kept block counts are
 * added up to find the block that holds the page's first row, and at most a block's worth of index entries
 * is skipped inside it, whatever the page and whatever has changed since.
 */
async function blockPage(
  db: Executor,
  workspaceId: number,
  offset: number,
  perPage: number,
): Promise<ListRow[]> {
  // The block is found once (a CTE used twice is evaluated once). When voters were deleted since the total
  // was read, no block holds the row: no id is >= NULL, and the offset falls back to 0 (SQLite refuses a
  // NULL offset).
  const ids = sql<number>`(
    WITH s AS (
      SELECT block, upto - total AS skipped FROM (
        SELECT block, total, sum(total) OVER (ORDER BY block) AS upto FROM voter_blocks WHERE workspace_id = ${workspaceId}
      ) b WHERE upto > ${offset} ORDER BY block LIMIT 1)
    SELECT id FROM voters
    WHERE workspace_id = ${workspaceId} AND id >= (SELECT block FROM s) * ${2 ** VOTER_BLOCK_BITS}
    ORDER BY id LIMIT ${perPage} OFFSET coalesce(${offset} - (SELECT skipped FROM s), 0))`;
  return db
    .selectFrom('voters')
    .select(listColumns)
    .where('voters.id', 'in', ids)
    .orderBy('voters.id')
    .execute();
}

/** The workspace's trigger-kept voter count. */
async function workspaceTotal(db: Executor, workspaceId: number): Promise<number> {
  const row = await db
    .selectFrom('voter_counts')
    .select('total')
    .where('workspace_id', '=', workspaceId)
    .executeTakeFirst();
  return Number(row?.total ?? 0);
}

/**
 * The ids of the voters that match `filters` when the filters are one tag, or one custom field's value, alone:
 * read from that table's own index in voter id order (voter_tags' primary key; voter_field_values' index ends
 * in voter_id), without visiting `voters`. Every row of those tables belongs to a voter of the same workspace
 * (written so, and deleted with the voter: ON DELETE CASCADE), so counting them counts the voters. Through
 * voters, a tag held by 100,000 of a million voters cost 40-90 ms to count and a field value 140 ms; from the
 * side table 1-9 ms on SQLite (28 Nov). PostgreSQL counts the same entries in 20-40 ms, so there a tag's or a
 * text value's count is read from voter_value_counts (heldCount). Undefined for any other filters.
 */
function sideTableIds(db: Executor, workspaceId: number, filters: VoterFilters): SideTable | undefined {
  if (filters.search?.trim() || filters.scope || Object.keys(exactValues(filters)).length > 0)
    return undefined;
  const keys = Object.entries(filters)
    .filter(([k, v]) => v !== undefined && k !== 'placeKeys' && k !== 'search' && k !== 'scope')
    .map(([k]) => k);
  if (keys.length !== 1) return undefined;
  const key = keys[0]!;
  const tags = key === 'tags' || key === 'tags_any' ? filters[key] : undefined;
  if (tags?.length === 1) {
    const tag = placeKey(tags[0]!);
    return sideTable(
      db,
      () =>
        db
          .selectFrom('voter_tags')
          .where('voter_tags.workspace_id', '=', workspaceId)
          .where('voter_tags.tag_key', '=', tag) as SideRows,
      isPostgres(db) ? () => heldCount(db, workspaceId, 'tag', tag, '') : undefined,
    );
  }
  const m = /^fields\.(.+)$/.exec(key);
  // A range (`_min`, `_max`) is not in voter id order in the index; only an exact value is.
  if (!m || /_(min|max)$/.test(m[1]!)) return undefined;
  const value = filters[key as `fields.${string}`];
  const rows = () => {
    const base = db
      .selectFrom('voter_field_values')
      .where('voter_field_values.workspace_id', '=', workspaceId)
      .where('voter_field_values.field_key', '=', m[1]!);
    return (
      typeof value === 'number'
        ? base.where('voter_field_values.value_number', '=', value)
        : base.where('voter_field_values.value_text', '=', String(value))
    ) as SideRows;
  };
  return sideTable(
    db,
    rows,
    isPostgres(db) && typeof value !== 'number'
      ? () => heldCount(db, workspaceId, 'field', m[1]!, String(value))
      : undefined,
  );
}

/** The rows of voter_tags or voter_field_values that a filter standing alone matches (both have voter_id). */
type SideRows = SelectQueryBuilder<Database, 'voter_tags' | 'voter_field_values', object>;

/** A side table's count (kept, `held`, or counted over `rows`) and its pages of voter ids in id order. */
function sideTable(db: Executor, rows: () => SideRows, held: (() => Promise<number>) | undefined): SideTable {
  return {
    count: async () =>
      held
        ? held()
        : Number((await rows().select(db.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n),
    ids: (offset, limit) => rows().select('voter_id').orderBy('voter_id').limit(limit).offset(offset),
  };
}

/** A filter read from its own table (sideTableIds): its count, and a page of its voter ids in id order. */
interface SideTable {
  count(): Promise<number>;
  ids(offset: number, limit: number): SelectQueryBuilder<Database, never, { voter_id: number }>;
}

/**
 * Counts the voters matching a search or exact filters, up to `cap + 1` when a cap is given (the count stops
 * there). A SQLite search with no other filter counts FTS hits directly when the workspace owns every voter
 * row (the usual embedded deployment: one campaign office), skipping a lookup per hit to check the workspace.
 */
async function countMatches(
  db: Executor,
  workspaceId: number,
  filters: VoterFilters,
  cap?: number,
): Promise<number> {
  const capped = <T extends SelectQueryBuilder<Database, never, object>>(rows: T) =>
    db
      .selectFrom(rows.limit(cap! + 1).as('m'))
      .select((eb) => eb.fn.countAll<number>().as('total'))
      .executeTakeFirstOrThrow();
  const term = filters.search?.trim();
  const match = term && !isPostgres(db) && !hasExactFilters(filters) ? ftsMatch(term) : undefined;
  if (match) {
    const all = await db
      .selectFrom('voter_counts')
      .select((eb) => eb.fn.sum<number>('total').as('all'))
      .executeTakeFirst();
    if ((await workspaceTotal(db, workspaceId)) === Number(all?.all ?? 0)) {
      const hits = db
        .selectFrom('voters_fts')
        .where(sql<boolean>`voters_fts MATCH ${match}`)
        .select(sql<number>`1`.as('one'));
      const row =
        cap === undefined
          ? await db
              .selectFrom('voters_fts')
              .select((eb) => eb.fn.countAll<number>().as('total'))
              .where(sql<boolean>`voters_fts MATCH ${match}`)
              .executeTakeFirstOrThrow()
          : await capped(hits as never);
      return Number(row.total);
    }
  }
  const side = sideTableIds(db, workspaceId, filters);
  if (side && cap === undefined) return side.count();
  const matches = filteredVoters(db, workspaceId, filters);
  const row =
    cap === undefined
      ? await matches.select((eb) => eb.fn.countAll<number>().as('total')).executeTakeFirstOrThrow()
      : await capped(matches.select(sql<number>`1`.as('one')) as never);
  return Number(row.total);
}

/** The exact number of the workspace's voters that match `filters` (segments, export planning). */
export async function countVoters(db: Executor, workspaceId: number, given: VoterFilters): Promise<number> {
  const filters = await withPlaces(db, workspaceId, given);
  const filtered = Boolean(filters.search?.trim()) || hasExactFilters(filters);
  return filtered ? countMatches(db, workspaceId, filters) : workspaceTotal(db, workspaceId);
}

/**
 * A page of the list and its total. Without a search the total is exact (the trigger-kept count, or a count
 * over the covering indexes); with one, matches are counted up to SEARCH_TOTAL_CAP and `exact` says whether
 * the total is the true count.
 */
/**
 * Runs a PostgreSQL search with settings of its own, for its transaction only (set_config(..., true), in a
 * transaction of its own; inside a caller's transaction it runs as it is):
 * - sequential scans off: pg_trgm's estimate of how many voters match a term is rough, and with the search's
 *   LIMIT a term it overestimates (a common name: 48,889 estimated, about 18,000 real at a million voters)
 *   made a sequential scan look as cheap as the trigram indexes: 0.6-1 s reading the table until 10,001
 *   matches, against 40-65 ms through the indexes;
 * - work_mem 32 MB: the bitmap of a common term's candidates (210,000 of a name like "aditya" at 10,000,000
 *   voters) outgrows the default 4 MB and turns lossy, and every row of a lossy page is checked: 519,000 rows
 *   and 323 ms, against 20,000 rows and 79 ms exact. The bitmap takes what it needs, about 12 MB there;
 * - no JIT: a search's cost estimate crosses jit_above_cost at millions of voters, and compiling costs more
 *   than the query saves.
 */
async function searchSettings<T>(db: Executor, run: (ex: Executor) => Promise<T>): Promise<T> {
  if (db.isTransaction) return run(db);
  return db.transaction().execute(async (trx) => {
    await sql`SELECT set_config('enable_seqscan', 'off', true), set_config('work_mem', '32MB', true),
      set_config('jit', 'off', true)`.execute(trx);
    return run(trx);
  });
}

export async function listVoters(
  db: Executor,
  workspaceId: number,
  given: VoterFilters,
  page: number,
  perPage: number,
): Promise<{ rows: ListRow[]; total: number; exact: boolean }> {
  const filters = await withPlaces(db, workspaceId, given);
  const term = filters.search?.trim();
  if (filters.epic_number !== undefined && !term && page === 1) {
    // An EPIC number is one voter's at most (voters_epic_uq): the first page is every match, and its length
    // the total. One query, where a count and a page were two (the EPIC search at the booth is the hot one).
    const rows = await filteredVoters(db, workspaceId, filters)
      .select(listColumns)
      .orderBy('voters.id')
      .limit(perPage)
      .execute();
    return { rows, total: rows.length, exact: true };
  }
  let count: ListCount;
  if (term && isPostgres(db)) {
    // PostgreSQL: the matching ids themselves, at most 10,001 of them, in one pass through the trigram
    // indexes (the same plan as a capped count, with the id instead of a constant). Up to 10,000 matches the
    // total is their number and every page a lookup by id (walking the primary key until a page is full is
    // right for common terms and slow for rare ones: PostgreSQL cannot estimate a trigram search's matches).
    // Without exact filters the ids come from voter_search alone; with them, voters is joined for the filters.
    const rows: Array<{ voter_id: number }> = await searchSettings(db, (ex) =>
      hasExactFilters(filters)
        ? filteredVoters(ex, workspaceId, filters)
            .select('voters.id as voter_id')
            .limit(SEARCH_TOTAL_CAP + 1)
            .execute()
        : searchedIds(ex, workspaceId, term)
            .limit(SEARCH_TOTAL_CAP + 1)
            .execute(),
    );
    count =
      rows.length > SEARCH_TOTAL_CAP
        ? { total: SEARCH_TOTAL_CAP, exact: false }
        : {
            total: rows.length,
            exact: true,
            ids: rows.map((r) => Number(r.voter_id)).sort((a, b) => a - b),
          };
  } else if (term) {
    const found = await countMatches(db, workspaceId, filters, SEARCH_TOTAL_CAP);
    count = { total: Math.min(found, SEARCH_TOTAL_CAP), exact: found <= SEARCH_TOTAL_CAP };
  } else {
    const total = hasExactFilters(filters)
      ? await countMatches(db, workspaceId, filters)
      : await workspaceTotal(db, workspaceId);
    count = { total, exact: true };
  }
  const rows = await voterPage(db, workspaceId, filters, page, perPage, count);
  return { rows, total: count.total, exact: count.exact };
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
