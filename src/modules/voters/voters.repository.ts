import { once } from 'node:events';
import type SQLite from 'better-sqlite3';
import {
  type ExpressionBuilder,
  type Insertable,
  type Kysely,
  type SelectQueryBuilder,
  type Updateable,
  sql,
} from 'kysely';
import type pg from 'pg';
import { escapeLiteral } from 'pg';
import {
  type CopyStreamQuery,
  type CopyToStreamQuery,
  from as copyFrom,
  to as copyTo,
} from 'pg-copy-streams';
import type { Db } from '../../db/connect.ts';
import { isPostgres } from '../../db/dialect.ts';
import type { Database, VoterRow, VoterTable } from '../../db/schema.ts';
import type { Executor } from '../../db/types.ts';

/** The filter object shared by the list, export, segments and broadcasts. */
export interface VoterFilters {
  constituency?: string | undefined;
  booth?: string | undefined;
  ward?: string | undefined;
  search?: string | undefined;
}

/** `name` lower-cased with runs of spaces collapsed: with the phone, a voter's identity. */
export function nameKey(name: string): string {
  return name.trim().replace(/\s+/g, ' ').toLowerCase();
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
 * Case-insensitive substring search of name or email (and phone digits), served by an index: pg_trgm GIN
 * indexes on PostgreSQL, the FTS5 trigram table on SQLite. Trigrams need three characters; a shorter term
 * falls back to LIKE over the workspace's rows (a scan: slow at millions of voters).
 */
function searchCondition(db: Executor, term: string) {
  const digits = phoneDigits(term);
  return (eb: ExpressionBuilder<Database, 'voters'>) => {
    if (isPostgres(db)) {
      const like = likePattern(term);
      const ors = [eb('voters.name', 'ilike', like), eb('voters.email', 'ilike', like)];
      if (digits) ors.push(eb('voters.phone', 'like', likePattern(digits)));
      return eb.or(ors);
    }
    const match = ftsMatch(term);
    if (match)
      return eb(
        'voters.id',
        'in',
        sql<number>`(SELECT rowid FROM voters_fts WHERE voters_fts MATCH ${match})`,
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
 * The exact filters as they are compared: trimmed, the constituency lower-cased (as `constituency_key`), an
 * empty one left out. The SQL (exactFilters) starts from this.
 */
function exactValues(filters: VoterFilters): Partial<Record<'constituency_key' | 'booth' | 'ward', string>> {
  const values: ReturnType<typeof exactValues> = {};
  const constituency = filters.constituency?.trim();
  const booth = filters.booth?.trim();
  const ward = filters.ward?.trim();
  if (constituency) values.constituency_key = constituency.toLowerCase();
  if (booth) values.booth = booth;
  if (ward) values.ward = ward;
  return values;
}

/** Whether `filters` has a constituency, booth or ward to match. */
export function hasExactFilters(filters: VoterFilters): boolean {
  return Object.keys(exactValues(filters)).length > 0;
}

function exactFilters(filters: VoterFilters) {
  const { constituency_key, booth, ward } = exactValues(filters);
  return (eb: ExpressionBuilder<Database, 'voters'>) => {
    const and = [];
    if (constituency_key) and.push(eb('voters.constituency_key', '=', constituency_key));
    if (booth) and.push(eb('voters.booth', '=', booth));
    if (ward) and.push(eb('voters.ward', '=', ward));
    return eb.and(and);
  };
}

/**
 * The voters of a workspace that match `filters`, as a query to select from, count, stream or INSERT ...
 * SELECT from (segments and broadcasts expand through this, set-based in the database).
 */
export function filteredVoters(
  db: Executor,
  workspaceId: number,
  filters: VoterFilters,
): SelectQueryBuilder<Database, 'voters', object> {
  let query = db.selectFrom('voters').where('voters.workspace_id', '=', workspaceId);
  if (hasExactFilters(filters)) query = query.where(exactFilters(filters));
  const term = filters.search?.trim();
  if (term) query = query.where(searchCondition(db, term));
  return query;
}

/** A list with a search counts its matches exactly up to this many; above, its total is this figure. */
export const SEARCH_TOTAL_CAP = 10_000;

/** Up to this many matches, a PostgreSQL search reads every matching id and pages through them. */
const RARE_MATCHES = 5000;

/** From this offset on, pages without a search are read through a deferred join (see voterPage). */
const DEFERRED_JOIN_OFFSET = 1000;

const listColumns = [
  'voters.id',
  'voters.name',
  'voters.phone',
  'voters.constituency',
  'voters.booth',
  'voters.ward',
] as const;
type ListRow = Pick<VoterRow, 'id' | 'name' | 'phone' | 'constituency' | 'booth' | 'ward'>;

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
    if (hasExactFilters(filters)) query = query.where(exactFilters(filters) as never);
    return query.select(listColumns).orderBy('voters_fts.rowid').limit(perPage).offset(offset).execute();
  }
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
            .orderBy('voters.id', 'desc')
            .limit(perPage + Math.min(0, fromEnd))
            .offset(Math.max(0, fromEnd))
        : ids.orderBy('voters.id').limit(perPage).offset(offset);
    return db
      .selectFrom('voters')
      .select(listColumns)
      .where('voters.id', 'in', ids)
      .orderBy('voters.id')
      .execute();
  }
  if (count.ids) {
    // A PostgreSQL search with few matches: their ids are known, so a page is a lookup by id. (PostgreSQL
    // cannot estimate how many rows a trigram search matches; walking the primary key until a page is full,
    // below, is right for common terms and slow for rare ones.)
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
  return filteredVoters(db, workspaceId, filters)
    .select(listColumns)
    .orderBy('voters.id')
    .limit(perPage)
    .offset(offset)
    .execute();
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
  const matches = filteredVoters(db, workspaceId, filters);
  const row =
    cap === undefined
      ? await matches.select((eb) => eb.fn.countAll<number>().as('total')).executeTakeFirstOrThrow()
      : await capped(matches.select(sql<number>`1`.as('one')) as never);
  return Number(row.total);
}

/** The exact number of the workspace's voters that match `filters` (segments, export planning). */
export async function countVoters(db: Executor, workspaceId: number, filters: VoterFilters): Promise<number> {
  const filtered = Boolean(filters.search?.trim()) || hasExactFilters(filters);
  return filtered ? countMatches(db, workspaceId, filters) : workspaceTotal(db, workspaceId);
}

/**
 * A page of the list and its total. Without a search the total is exact (the trigger-kept count, or a count
 * over the covering indexes); with one, matches are counted up to SEARCH_TOTAL_CAP and `exact` says whether
 * the total is the true count.
 */
export async function listVoters(
  db: Executor,
  workspaceId: number,
  filters: VoterFilters,
  page: number,
  perPage: number,
): Promise<{ rows: ListRow[]; total: number; exact: boolean }> {
  const term = filters.search?.trim();
  let count: ListCount;
  if (term) {
    const found = await countMatches(db, workspaceId, filters, SEARCH_TOTAL_CAP);
    count = { total: Math.min(found, SEARCH_TOTAL_CAP), exact: found <= SEARCH_TOTAL_CAP };
    if (isPostgres(db) && found <= RARE_MATCHES) {
      // A rare term on PostgreSQL: every matching id, found through the trigram indexes and then sorted, so
      // each page is a lookup. A common term only counts (capped).
      const rows = await filteredVoters(db, workspaceId, filters)
        .select('voters.id')
        .orderBy(sql`voters.id + 0`)
        .execute();
      count = { total: rows.length, exact: true, ids: rows.map((r) => Number(r.id)) };
    }
  } else {
    const total = hasExactFilters(filters)
      ? await countMatches(db, workspaceId, filters)
      : await workspaceTotal(db, workspaceId);
    count = { total, exact: true };
  }
  const rows = await voterPage(db, workspaceId, filters, page, perPage, count);
  return { rows, total: count.total, exact: count.exact };
}

export async function findVoter(
  db: Executor,
  workspaceId: number,
  id: number,
): Promise<VoterRow | undefined> {
  return db
    .selectFrom('voters')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .executeTakeFirst();
}

export async function findVoterByIdentity(
  db: Executor,
  workspaceId: number,
  phone: string,
  key: string,
): Promise<Pick<VoterRow, 'id'> | undefined> {
  return db
    .selectFrom('voters')
    .select('id')
    .where('workspace_id', '=', workspaceId)
    .where('phone', '=', phone)
    .where('name_key', '=', key)
    .executeTakeFirst();
}

export async function insertVoter(db: Executor, values: Insertable<VoterTable>): Promise<VoterRow> {
  return db.insertInto('voters').values(values).returningAll().executeTakeFirstOrThrow();
}

export async function updateVoter(
  db: Executor,
  workspaceId: number,
  id: number,
  values: Updateable<VoterTable>,
): Promise<VoterRow | undefined> {
  return db
    .updateTable('voters')
    .set(values)
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
}

export async function deleteVoter(db: Executor, workspaceId: number, id: number): Promise<boolean> {
  const result = await db
    .deleteFrom('voters')
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .executeTakeFirst();
  return Number(result.numDeletedRows) === 1;
}

/** The columns of an export, in order. */
export const exportColumns = [
  'id',
  'name',
  'phone',
  'email',
  'constituency',
  'booth',
  'ward',
  'address',
  'created_at',
  'updated_at',
] as const;

export type ExportRow = [
  number,
  string,
  string,
  string | null,
  string | null,
  string | null,
  string | null,
  string | null,
  string,
  string,
];

// On PostgreSQL the timestamps are formatted by the server (as toISOString would): parsing two timestamptz
// per row into Dates in JS costs more than the rest of the row.
const isoUtc = (column: 'created_at' | 'updated_at') =>
  sql<string>`to_char(${sql.ref(`voters.${column}`)} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`.as(
    column,
  );

function exportSelection(dialect: Db['dialect']) {
  const plain = exportColumns.slice(0, 8).map((c) => `voters.${c}` as const);
  return dialect === 'postgres'
    ? [...plain, isoUtc('created_at'), isoUtc('updated_at')]
    : [...plain, 'voters.created_at' as const, 'voters.updated_at' as const];
}

/**
 * The voters matching `filters`, in id order, as batches of rows (keyset pagination on id). Each batch is
 * one short query, so no cursor or iterator stays open between batches: the single SQLite connection stays
 * free for other requests while the consumer is slow, and PostgreSQL holds no connection meanwhile. Rows
 * come from the driver as arrays (no per-row objects): on SQLite a prepared statement in raw mode under
 * Kysely's connection lock, on PostgreSQL rowMode 'array'.
 */
export async function* exportVoterBatches(
  db: Db,
  workspaceId: number,
  filters: VoterFilters,
  batchSize = 2000,
): AsyncGenerator<ExportRow[]> {
  // The text is the same for every batch (only `after`, the parameter after the filters', moves): built
  // once, and on SQLite prepared once.
  const { sql: text, parameters } = filteredVoters(db.kysely, workspaceId, filters)
    .select(exportSelection(db.dialect))
    .where('voters.id', '>', -1)
    .orderBy('voters.id')
    .limit(batchSize)
    .compile();
  const values = [...parameters];
  const afterAt = values.length - 2;
  if (values[afterAt] !== -1 || values[afterAt + 1] !== batchSize)
    throw new Error('unexpected parameter order');
  let statement: SQLite.Statement | undefined;
  for (let after = 0; ;) {
    values[afterAt] = after;
    let rows: ExportRow[];
    if (db.raw.dialect === 'sqlite') {
      const { sqlite } = db.raw;
      rows = await db.kysely.connection().execute(async () => {
        statement ??= sqlite.prepare(text).raw(true);
        return statement.all(...values) as ExportRow[];
      });
    } else {
      rows = (await db.raw.bulk.query<ExportRow>({ text, values, rowMode: 'array' })).rows;
    }
    if (rows.length === 0) return;
    const full = rows.length === batchSize;
    after = rows[rows.length - 1]![0];
    // Nothing here refers to the batch while the consumer has it: a paused export holds it only as long
    // as its consumer does.
    yield rows;
    if (!full) return;
  }
}

/**
 * A formula guard in SQL with exactly the rules of `guardFormula` (src/lib/csv.ts): a value whose first
 * character after any leading apostrophes is = + - @ tab or CR, and which is not a plain number, gets one
 * more leading apostrophe. The cheap first-character test comes first, so almost every value skips the
 * regular expressions.
 */
function sqlFormulaGuard(column: string): string {
  return `CASE WHEN ascii(${column}) IN (61, 43, 45, 64, 9, 13, 39) THEN
      CASE WHEN ${column} ~ '^''*[-=+@\\t\\r]'
            AND ltrim(${column}, '''') !~ '^[+-]?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)([eE][+-]?[0-9]+)?$'
        THEN '''' || ${column} ELSE ${column} END
    ELSE ${column} END`;
}

/** A bind parameter of a compiled query as an SQL literal, for the one statement that takes none (COPY). */
function literal(value: unknown): string {
  if (typeof value === 'number' && Number.isSafeInteger(value)) return String(value);
  if (typeof value === 'string') return escapeLiteral(value);
  throw new Error(`cannot inline a ${typeof value} into COPY`);
}

/**
 * PostgreSQL: the CSV export as the database writes it, `COPY (SELECT ...) TO STDOUT (FORMAT csv, HEADER)`,
 * with the formula guard and the timestamps' format in the query, so no row passes through JS. COPY takes
 * no bind parameters: the filter values are inlined as escaped literals. One pooled connection is held
 * until the consumer has taken the last byte (backpressure reaches the server); a consumer that stops
 * early (a client that went away) closes that connection, which ends the COPY on the server.
 */
export async function* copyVotersCsv(
  db: Kysely<Database>,
  pool: pg.Pool,
  workspaceId: number,
  filters: VoterFilters,
): AsyncGenerator<Buffer> {
  const compiled = filteredVoters(db, workspaceId, filters)
    .select([
      'voters.id',
      // A phone is always E.164 (+ and digits): a plain number, never guarded, and testing a million of
      // them (every one starts with +) would cost more than the rest of the guard.
      ...exportColumns
        .slice(1, 8)
        .map((c) =>
          c === 'phone'
            ? sql.ref<string>('voters.phone').as(c)
            : sql.raw<string>(sqlFormulaGuard(`voters.${c}`)).as(c),
        ),
      isoUtc('created_at'),
      isoUtc('updated_at'),
    ])
    .orderBy('voters.id')
    .compile();
  const select = compiled.sql.replace(/\$(\d+)/g, (_, n: string) =>
    literal(compiled.parameters[Number(n) - 1]),
  );
  const client = await pool.connect();
  let stream: CopyToStreamQuery | undefined;
  let finished = false;
  try {
    stream = client.query(copyTo(`COPY (${select}) TO STDOUT (FORMAT csv, HEADER)`));
    for await (const chunk of stream) yield chunk as Buffer;
    finished = true;
  } finally {
    if (finished) {
      client.release();
    } else {
      stream?.destroy();
      client.release(new Error('the CSV export stopped before its end'));
    }
  }
}

/**
 * The workspace's voter count (the trigger-kept one) and its lowest and highest voter id (each one step in
 * the (workspace_id, id) index): what an export split over id ranges is planned from.
 */
export async function voterIdSpan(
  db: Executor,
  workspaceId: number,
): Promise<{ total: number; min: number | null; max: number | null }> {
  const ids = (fn: 'min' | 'max') =>
    db
      .selectFrom('voters')
      .where('voters.workspace_id', '=', workspaceId)
      .select((eb) => eb.fn[fn]<number>('voters.id').as('id'));
  const row = await db
    .selectFrom('voter_counts')
    .where('workspace_id', '=', workspaceId)
    .select(['total', ids('min').as('min'), ids('max').as('max')])
    .executeTakeFirst();
  return {
    total: Number(row?.total ?? 0),
    min: row?.min == null ? null : Number(row.min),
    max: row?.max == null ? null : Number(row.max),
  };
}

/**
 * SQLite: the statement of one keyset batch of an export inside an id range, for a thread with its own
 * connection. It is exportVoterBatches' filtered query with an upper bound on the id: the statement's last
 * three parameters (after id, up to id, batch size) are left out of `parameters` for the reader to append.
 */
export function exportRangeStatement(
  db: Db,
  workspaceId: number,
  filters: VoterFilters,
): { sql: string; parameters: unknown[] } {
  const marks = [-1, -2, -3];
  const { sql: text, parameters } = filteredVoters(db.kysely, workspaceId, filters)
    .select(exportSelection(db.dialect))
    .where('voters.id', '>', marks[0]!)
    .where('voters.id', '<=', marks[1]!)
    .orderBy('voters.id')
    .limit(marks[2]!)
    .compile();
  const tail = parameters.slice(-3);
  if (tail.some((value, i) => value !== marks[i])) throw new Error('unexpected parameter order');
  return { sql: text, parameters: parameters.slice(0, -3) };
}

/** One checked row of an import file, ready to write. */
export interface StagedVoter {
  /** Line of the file where the row starts: the later of two rows with one identity wins. */
  line: number;
  name: string;
  name_key: string;
  phone: string;
  email: string | null;
  constituency: string | null;
  constituency_key: string | null;
  booth: string | null;
  ward: string | null;
  address: string | null;
}

/**
 * An import in progress: rows are staged as the file streams in, and only `apply` touches `voters`, so a
 * file refused part-way (413, not UTF-8, ...) is `abort`ed and leaves the voters as they were.
 */
export interface VoterImport {
  stage(rows: readonly StagedVoter[]): Promise<void>;
  /**
   * Upserts the staged rows on the identity (the later line wins; a field a row leaves empty is kept);
   * returns how many voters were created.
   */
  apply(now: string): Promise<{ imported: number }>;
  /** A dry run: how many voters `apply` would create; then the staged rows are dropped and nothing is written. */
  preview(): Promise<{ imported: number }>;
  abort(): Promise<void>;
}

const stagedColumns = [
  'line',
  'name',
  'name_key',
  'phone',
  'email',
  'constituency',
  'constituency_key',
  'booth',
  'ward',
  'address',
] as const;

/** The optional fields: an import row with none of them (an empty cell, or a column the file lacks) keeps it. */
const mergedColumns = ['email', 'constituency', 'constituency_key', 'booth', 'ward', 'address'] as const;

/** An import changes only what the file says: the name (same identity, maybe other case) and each value given. */
const upsertSet = [
  'name = excluded.name',
  ...mergedColumns.map((c) => `${c} = coalesce(excluded.${c}, voters.${c})`),
  'updated_at = excluded.updated_at',
].join(', ');

/** A row that would not change is left alone: its updated_at stays, and no search-index work is done. */
function changedCondition(distinct: 'IS NOT' | 'IS DISTINCT FROM'): string {
  return [
    `voters.name ${distinct} excluded.name`,
    ...mergedColumns.map((c) => `(excluded.${c} IS NOT NULL AND voters.${c} ${distinct} excluded.${c})`),
  ].join(' OR ');
}

export async function startVoterImport(db: Db, workspaceId: number): Promise<VoterImport> {
  return db.raw.dialect === 'sqlite'
    ? startSqliteImport(db.kysely, db.raw.sqlite, workspaceId)
    : startPostgresImport(db.raw.bulk, workspaceId);
}

let stagingSeq = 0;
/** Rows applied per SQLite transaction; between two, other requests get the connection. */
const SQLITE_APPLY_CHUNK = 20_000;
/** Page cache while applying an import (KiB). */
const SQLITE_IMPORT_CACHE_KIB = 65_536;

/**
 * SQLite: rows are staged in a TEMP table (this connection only, outside the database file), each batch in
 * one synchronous transaction taken under Kysely's connection lock; `apply` then runs set-based
 * INSERT ... SELECT ... ON CONFLICT DO UPDATE in chunks of lines, each a synchronous transaction.
 */
async function startSqliteImport(
  kysely: Kysely<Database>,
  sqlite: SQLite.Database,
  workspaceId: number,
): Promise<VoterImport> {
  const table = `temp.voters_import_${++stagingSeq}`;
  const locked = <T>(fn: () => T): Promise<T> => kysely.connection().execute(async () => fn());
  const insert = await locked(() => {
    sqlite.exec(
      `CREATE TABLE ${table} (line INTEGER PRIMARY KEY, name TEXT, name_key TEXT, phone TEXT, email TEXT,
        constituency TEXT, constituency_key TEXT, booth TEXT, ward TEXT, address TEXT)`,
    );
    return sqlite.prepare(
      `INSERT OR REPLACE INTO ${table} (${stagedColumns.join(', ')}) VALUES (${stagedColumns.map(() => '?').join(', ')})`,
    );
  });
  let lastLine = 0;
  const stageAll = sqlite.transaction((rows: readonly StagedVoter[]) => {
    for (const r of rows) {
      insert.run(
        r.line,
        r.name,
        r.name_key,
        r.phone,
        r.email,
        r.constituency,
        r.constituency_key,
        r.booth,
        r.ward,
        r.address,
      );
    }
  });
  const drop = () =>
    locked(() => {
      sqlite.exec(`DROP TABLE IF EXISTS ${table}`);
    });
  return {
    stage: async (rows) => {
      if (rows.length === 0) return;
      await locked(() => stageAll(rows));
      lastLine = rows[rows.length - 1]!.line;
    },
    apply: async (now) => {
      // Ids only grow (AUTOINCREMENT), and nothing else writes during a synchronous chunk: the rows above the
      // highest id before the chunk are the ones it created (counted over those rows only, not the table).
      const maxId = sqlite.prepare('SELECT coalesce(max(id), 0) FROM voters').pluck();
      const createdSince = sqlite.prepare('SELECT count(*) FROM voters WHERE id > ?').pluck();
      const upsert = sqlite.prepare(
        `INSERT INTO voters (workspace_id, ${stagedColumns.slice(1).join(', ')}, created_at, updated_at)
         SELECT ?, ${stagedColumns.slice(1).join(', ')}, ?, ? FROM ${table}
         WHERE line >= ? AND line < ? ORDER BY line
         ON CONFLICT (workspace_id, phone, name_key) DO UPDATE SET ${upsertSet}
         WHERE ${changedCondition('IS NOT')}`,
      );
      const chunk = sqlite.transaction((from: number, to: number) => {
        const before = maxId.get() as number;
        upsert.run(workspaceId, now, now, from, to);
        return createdSince.get(before) as number;
      });
      let imported = 0;
      // Each row lands in six b-trees (table, five indexes) plus the search index, at scattered places once
      // they outgrow SQLite's default 2 MiB page cache: a larger cache for the bulk step saves most of the I/O.
      const cacheSize = sqlite.pragma('cache_size', { simple: true }) as number;
      try {
        for (let from = 0; from <= lastLine; from += SQLITE_APPLY_CHUNK) {
          imported += await locked(() => {
            sqlite.pragma(`cache_size = -${SQLITE_IMPORT_CACHE_KIB}`);
            try {
              return chunk(from, from + SQLITE_APPLY_CHUNK);
            } finally {
              sqlite.pragma(`cache_size = ${cacheSize}`);
            }
          });
        }
      } finally {
        await drop();
      }
      // An import changes the shape of the tables: fresh statistics keep the planner on the right indexes.
      // A large one is analyzed in full (about a second at a million voters); after any other, `optimize`
      // analyzes the tables whose size changed much or that have no statistics yet (the first import into
      // a new database: without them every search took 1.3-2.6 s until a restart).
      await locked(() =>
        lastLine >= ANALYZE_AFTER_ROWS ? sqlite.exec('ANALYZE voters') : sqlite.pragma('optimize = 0x10002'),
      );
      return { imported };
    },
    preview: async () => {
      try {
        const count = sqlite.prepare(newIdentities(table, '?')).pluck();
        return { imported: await locked(() => count.get(workspaceId) as number) };
      } finally {
        await drop();
      }
    },
    abort: drop,
  };
}

/** The staged identities that no voter of the workspace has yet: what an apply would create. */
const newIdentities = (table: string, workspace: string) =>
  `SELECT count(*) AS imported FROM (SELECT DISTINCT phone, name_key FROM ${table}) s
   WHERE NOT EXISTS (SELECT 1 FROM voters v WHERE v.workspace_id = ${workspace} AND v.phone = s.phone AND v.name_key = s.name_key)`;

/** An import of at least this many rows refreshes the table's statistics on PostgreSQL. */
const ANALYZE_AFTER_ROWS = 10_000;

const COPY_SPECIAL = /[\\\t\n\r]/;
const COPY_SPECIAL_G = /[\\\t\n\r]/g;
const copyEscapes: Record<string, string> = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r' };

/** A value in COPY's text format. */
function copyValue(value: string | number | null): string {
  if (value === null) return '\\N';
  if (typeof value === 'number') return String(value);
  return COPY_SPECIAL.test(value) ? value.replace(COPY_SPECIAL_G, (c) => copyEscapes[c]!) : value;
}

/**
 * PostgreSQL: one transaction on one pooled connection for the whole import. Rows stream into a temporary
 * table through COPY; `apply` is one set-based upsert (per identity: the last line's name and, per field, the last value
 * given, as SQLite's upsert in line order gives)
 * and COMMIT; `abort` rolls everything back.
 */
async function startPostgresImport(pool: pg.Pool, workspaceId: number): Promise<VoterImport> {
  const client = await pool.connect();
  let copy: CopyStreamQuery | undefined;
  let done = false;
  const release = (error?: Error) => {
    if (done) return;
    done = true;
    client.release(error);
  };
  try {
    await client.query('BEGIN');
    await client.query(
      `CREATE TEMP TABLE voters_import (line integer, name text, name_key text, phone text, email text,
        constituency text, constituency_key text, booth text, ward text, address text) ON COMMIT DROP`,
    );
    copy = client.query(copyFrom(`COPY voters_import (${stagedColumns.join(', ')}) FROM STDIN`));
  } catch (error) {
    release(error as Error);
    throw error;
  }
  const stream = copy;
  let failure: Error | undefined;
  stream.on('error', (error: Error) => {
    failure ??= error;
  });
  let staged = 0;
  const finished = new Promise<void>((resolve, reject) => {
    stream.on('finish', resolve);
    stream.on('error', reject);
  });
  finished.catch(() => {});

  return {
    stage: async (rows) => {
      if (failure) throw failure;
      let text = '';
      for (const r of rows) {
        text += `${r.line}\t${copyValue(r.name)}\t${copyValue(r.name_key)}\t${copyValue(r.phone)}\t${copyValue(r.email)}\t${copyValue(r.constituency)}\t${copyValue(r.constituency_key)}\t${copyValue(r.booth)}\t${copyValue(r.ward)}\t${copyValue(r.address)}\n`;
      }
      staged += rows.length;
      if (!stream.write(text)) await once(stream, 'drain');
    },
    apply: async (now) => {
      try {
        stream.end();
        await finished;
        const result = await client.query<{ imported: number }>(
          `WITH src AS (
             SELECT max(line) AS line, phone, name_key, (array_agg(name ORDER BY line DESC))[1] AS name,
               ${mergedColumns.map((c) => `(array_agg(${c} ORDER BY line DESC) FILTER (WHERE ${c} IS NOT NULL))[1] AS ${c}`).join(',\n               ')}
             FROM voters_import GROUP BY phone, name_key
           ), up AS (
             INSERT INTO voters (workspace_id, ${stagedColumns.slice(1).join(', ')}, created_at, updated_at)
             SELECT $1, ${stagedColumns.slice(1).join(', ')}, $2, $2 FROM src ORDER BY line
             ON CONFLICT (workspace_id, phone, name_key) DO UPDATE SET ${upsertSet}
             WHERE ${changedCondition('IS DISTINCT FROM')}
             RETURNING (xmax = 0) AS inserted
           )
           SELECT count(*) FILTER (WHERE inserted) AS imported FROM up`,
          [workspaceId, now],
        );
        await client.query('COMMIT');
        // Without fresh statistics after a bulk load the planner guesses a handful of rows per workspace
        // and picks plans (bitmap scan + sort) that make the export's keyset pages quadratic. Autovacuum
        // would get there later; a large import analyzes at once. VACUUM also sets the visibility map, so
        // counting a filtered list is an index-only scan instead of a visit to every matching row.
        if (staged >= ANALYZE_AFTER_ROWS) await client.query('VACUUM (ANALYZE) voters');
        release();
        return { imported: Number(result.rows[0]?.imported ?? 0) };
      } catch (error) {
        await client.query('ROLLBACK').catch(() => {});
        release(error as Error);
        throw error;
      }
    },
    preview: async () => {
      try {
        stream.end();
        await finished;
        const result = await client.query<{ imported: string }>(newIdentities('voters_import', '$1'), [
          workspaceId,
        ]);
        await client.query('ROLLBACK');
        release();
        return { imported: Number(result.rows[0]?.imported ?? 0) };
      } catch (error) {
        await client.query('ROLLBACK').catch(() => {});
        release(error as Error);
        throw error;
      }
    },
    abort: async () => {
      if (done) return;
      try {
        if (!stream.writableEnded) {
          stream.end();
          await finished.catch(() => {});
        }
        await client.query('ROLLBACK');
        release();
      } catch (error) {
        // A connection in an unknown state is closed rather than returned to the pool.
        release(error as Error);
      }
    },
  };
}
