import { placeKey } from '../../lib/place.ts';
import { CompiledQuery, type SelectQueryBuilder, sql } from 'kysely';
import { isPostgres } from '../../db/dialect.ts';
import type { Database, VoterRow } from '../../db/schema.ts';
import type { Executor } from '../../db/types.ts';
import { heldCount } from './voter-value-counts.ts';

import {
  exactFilters,
  exactValues,
  filteredVoters,
  ftsMatch,
  hasExactFilters,
  searchedIds,
  type VoterFilters,
  withPlaces,
} from './voters.search.ts';

/** A page of voters (the list's totals, deep pages, a search's cap) and exact counts of a filter's voters. */

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
  if (match) return ftsPage(db, workspaceId, filters, match, offset, perPage);
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
  if (!term && offset >= DEFERRED_JOIN_OFFSET)
    return deepPage(db, workspaceId, filters, total, offset, perPage);
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

/** SQLite: a page of a search through the full-text index, in its rowid (the voter id) order. */
function ftsPage(
  db: Executor,
  workspaceId: number,
  filters: VoterFilters,
  match: string,
  offset: number,
  perPage: number,
): Promise<ListRow[]> {
  let query = db
    .selectFrom('voters_fts')
    .innerJoin('voters', 'voters.id', 'voters_fts.rowid')
    .where(sql<boolean>`voters_fts MATCH ${match}`)
    .where('voters.workspace_id', '=', workspaceId);
  if (hasExactFilters(filters)) query = query.where(exactFilters(filters, workspaceId) as never);
  return query.select(listColumns).orderBy('voters_fts.rowid').limit(perPage).offset(offset).execute();
}

/**
 * A deep page: skip rows inside an index that holds the filter columns and the id, then read only the page's
 * rows (reading every skipped row from the table is what makes OFFSET slow). Skip from whichever end is nearer
 * (the total is exact).
 */
function deepPage(
  db: Executor,
  workspaceId: number,
  filters: VoterFilters,
  total: number,
  offset: number,
  perPage: number,
): Promise<ListRow[]> {
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
