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

/**
 * Case-insensitive substring search of name or email (and phone digits), served by an index: pg_trgm GIN
 * indexes on PostgreSQL, the FTS5 trigram table on SQLite. Trigrams need three characters; a shorter term
 * falls back to LIKE within the workspace's rows.
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
    const usesIndex = [...term].length >= 3 && (!digits || digits.length >= 3);
    if (usesIndex) {
      const match = digits
        ? `{name email}: ${ftsPhrase(term)} OR phone: ${ftsPhrase(digits)}`
        : `{name email}: ${ftsPhrase(term)}`;
      return eb(
        'voters.id',
        'in',
        sql<number>`(SELECT rowid FROM voters_fts WHERE voters_fts MATCH ${match})`,
      );
    }
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
 * The voters of a workspace that match `filters`, as a query to select from, count, stream or INSERT ...
 * SELECT from (segments and broadcasts expand through this, set-based in the database).
 */
export function filteredVoters(
  db: Executor,
  workspaceId: number,
  filters: VoterFilters,
): SelectQueryBuilder<Database, 'voters', object> {
  let query = db.selectFrom('voters').where('voters.workspace_id', '=', workspaceId);
  if (filters.constituency !== undefined && filters.constituency.trim() !== '') {
    query = query.where('voters.constituency_key', '=', filters.constituency.trim().toLowerCase());
  }
  if (filters.booth !== undefined && filters.booth.trim() !== '')
    query = query.where('voters.booth', '=', filters.booth.trim());
  if (filters.ward !== undefined && filters.ward.trim() !== '')
    query = query.where('voters.ward', '=', filters.ward.trim());
  const term = filters.search?.trim();
  if (term) query = query.where(searchCondition(db, term));
  return query;
}

export async function listVoters(
  db: Executor,
  workspaceId: number,
  filters: VoterFilters,
  page: number,
  perPage: number,
): Promise<{
  rows: Pick<VoterRow, 'id' | 'name' | 'phone' | 'constituency' | 'booth' | 'ward'>[];
  total: number;
}> {
  const base = filteredVoters(db, workspaceId, filters);
  const [rows, count] = await Promise.all([
    base
      .select([
        'voters.id',
        'voters.name',
        'voters.phone',
        'voters.constituency',
        'voters.booth',
        'voters.ward',
      ])
      .orderBy('voters.id')
      .limit(perPage)
      .offset((page - 1) * perPage)
      .execute(),
    base.select((eb) => eb.fn.countAll<number>().as('total')).executeTakeFirstOrThrow(),
  ]);
  return { rows, total: Number(count.total) };
}

export async function countVoters(db: Executor, workspaceId: number, filters: VoterFilters): Promise<number> {
  const row = await filteredVoters(db, workspaceId, filters)
    .select((eb) => eb.fn.countAll<number>().as('total'))
    .executeTakeFirstOrThrow();
  return Number(row.total);
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
