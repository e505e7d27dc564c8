import {
  type ExpressionBuilder,
  type Insertable,
  type SelectQueryBuilder,
  type Updateable,
  sql,
} from 'kysely';
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

/** The FTS5 query for a term on SQLite, or undefined when the term is too short for trigrams. */
function ftsMatch(term: string): string | undefined {
  const digits = phoneDigits(term);
  if ([...term].length < 3 || (digits !== undefined && digits.length < 3)) return undefined;
  return digits
    ? `{name email}: ${ftsPhrase(term)} OR phone: ${ftsPhrase(digits)}`
    : `{name email}: ${ftsPhrase(term)}`;
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

function hasExactFilters(filters: VoterFilters): boolean {
  return [filters.constituency, filters.booth, filters.ward].some((v) => v !== undefined && v.trim() !== '');
}

function exactFilters(filters: VoterFilters) {
  return (eb: ExpressionBuilder<Database, 'voters'>) => {
    const and = [];
    const constituency = filters.constituency?.trim();
    const booth = filters.booth?.trim();
    const ward = filters.ward?.trim();
    if (constituency) and.push(eb('voters.constituency_key', '=', constituency.toLowerCase()));
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

/** Below this many matches a PostgreSQL search page is read through the trigram indexes (see voterPage). */
const RARE_MATCHES = 5000;

const listColumns = [
  'voters.id',
  'voters.name',
  'voters.phone',
  'voters.constituency',
  'voters.booth',
  'voters.ward',
] as const;
type ListRow = Pick<VoterRow, 'id' | 'name' | 'phone' | 'constituency' | 'booth' | 'ward'>;

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
  total: number,
): Promise<ListRow[]> {
  const term = filters.search?.trim();
  const match = term && !isPostgres(db) ? ftsMatch(term) : undefined;
  if (match) {
    let query = db
      .selectFrom('voters_fts')
      .innerJoin('voters', 'voters.id', 'voters_fts.rowid')
      .where(sql<boolean>`voters_fts MATCH ${match}`)
      .where('voters.workspace_id', '=', workspaceId);
    if (hasExactFilters(filters)) query = query.where(exactFilters(filters) as never);
    return query
      .select(listColumns)
      .orderBy('voters_fts.rowid')
      .limit(perPage)
      .offset((page - 1) * perPage)
      .execute();
  }
  // PostgreSQL cannot estimate how many rows a trigram search matches. Walking the primary key until a
  // page is full is right for common terms and slow for rare ones; the exact count, already known, tells
  // which. `id + 0` hides the key order from the planner, so a rare term is read through its trigram
  // indexes and sorted.
  const rare = isPostgres(db) && Boolean(term) && total <= RARE_MATCHES;
  return filteredVoters(db, workspaceId, filters)
    .select(listColumns)
    .orderBy(rare ? sql`voters.id + 0` : sql`voters.id`)
    .limit(perPage)
    .offset((page - 1) * perPage)
    .execute();
}

/**
 * The exact number of matching voters. Without filters it is the trigger-kept count. A SQLite search with
 * no other filter counts FTS hits directly when the workspace owns every voter row (the usual embedded
 * deployment: one campaign office), skipping a lookup per hit to check the workspace.
 */
export async function countVoters(db: Executor, workspaceId: number, filters: VoterFilters): Promise<number> {
  const term = filters.search?.trim();
  if (!term && !hasExactFilters(filters)) {
    const row = await db
      .selectFrom('voter_counts')
      .select('total')
      .where('workspace_id', '=', workspaceId)
      .executeTakeFirst();
    return Number(row?.total ?? 0);
  }
  const match = term && !isPostgres(db) && !hasExactFilters(filters) ? ftsMatch(term) : undefined;
  if (match) {
    const owner = await db
      .selectFrom('voter_counts')
      .select((eb) => [
        'total',
        eb
          .selectFrom('voter_counts')
          .select((e) => e.fn.sum<number>('total').as('all'))
          .as('all'),
      ])
      .where('workspace_id', '=', workspaceId)
      .executeTakeFirst();
    if (owner && Number(owner.total) === Number(owner.all)) {
      const row = await db
        .selectFrom('voters_fts')
        .select((eb) => eb.fn.countAll<number>().as('total'))
        .where(sql<boolean>`voters_fts MATCH ${match}`)
        .executeTakeFirstOrThrow();
      return Number(row.total);
    }
  }
  const row = await filteredVoters(db, workspaceId, filters)
    .select((eb) => eb.fn.countAll<number>().as('total'))
    .executeTakeFirstOrThrow();
  return Number(row.total);
}

export async function listVoters(
  db: Executor,
  workspaceId: number,
  filters: VoterFilters,
  page: number,
  perPage: number,
): Promise<{ rows: ListRow[]; total: number }> {
  const total = await countVoters(db, workspaceId, filters);
  const rows = await voterPage(db, workspaceId, filters, page, perPage, total);
  return { rows, total };
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
