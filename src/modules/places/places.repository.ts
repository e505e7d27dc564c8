import { type ExpressionBuilder, type Expression, sql, type SqlBool } from 'kysely';
import type { Database, PlaceRow } from '../../db/schema.ts';
import type { Executor } from '../../db/types.ts';
import type { PlaceKind } from '../../lib/place.ts';

// A workspace's places and how a value is matched against them (the contract's fourth part, "Places").

export async function insertPlace(db: Executor, values: Omit<PlaceRow, 'id'>): Promise<PlaceRow> {
  return db.insertInto('places').values(values).returningAll().executeTakeFirstOrThrow();
}

export async function findPlace(
  db: Executor,
  workspaceId: number,
  id: number,
): Promise<PlaceRow | undefined> {
  return db
    .selectFrom('places')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .executeTakeFirst();
}

/** A page of the workspace's places, of one kind or all, in name order within each kind. */
export async function listPlaces(
  db: Executor,
  workspaceId: number,
  query: { kind?: PlaceKind | undefined; page: number; per_page: number },
): Promise<{ rows: PlaceRow[]; total: number }> {
  let base = db.selectFrom('places').where('workspace_id', '=', workspaceId);
  if (query.kind) base = base.where('kind', '=', query.kind);
  const [rows, count] = await Promise.all([
    base
      .selectAll()
      .orderBy('kind')
      .orderBy('name')
      .orderBy('id')
      .limit(query.per_page)
      .offset((query.page - 1) * query.per_page)
      .execute(),
    base.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
  ]);
  return { rows, total: Number(count.n) };
}

export async function updatePlace(
  db: Executor,
  workspaceId: number,
  id: number,
  values: Partial<Pick<PlaceRow, 'name' | 'aliases' | 'code' | 'updated_at'>>,
): Promise<PlaceRow | undefined> {
  return db
    .updateTable('places')
    .set(values)
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
}

export async function deletePlace(db: Executor, workspaceId: number, id: number): Promise<boolean> {
  await db
    .deleteFrom('place_names')
    .where('workspace_id', '=', workspaceId)
    .where('place_id', '=', id)
    .execute();
  const result = await db
    .deleteFrom('places')
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .executeTakeFirst();
  return Number(result.numDeletedRows) === 1;
}

/**
 * A place's names (its name and aliases, as keys) replace the ones it had. A key another place of the kind
 * holds is refused by the table's key (a unique violation for the caller to answer 409).
 */
export async function setPlaceNames(
  db: Executor,
  place: { id: number; workspace_id: number; kind: string },
  keys: readonly string[],
): Promise<void> {
  await db.deleteFrom('place_names').where('place_id', '=', place.id).execute();
  if (keys.length === 0) return;
  await db
    .insertInto('place_names')
    .values(
      keys.map((key) => ({ workspace_id: place.workspace_id, kind: place.kind, key, place_id: place.id })),
    )
    .execute();
}

/** Of `keys`, the place of the kind that holds each (key -> the place's name), where one does. */
export async function placesHolding(
  db: Executor,
  workspaceId: number,
  kind: PlaceKind,
  keys: readonly string[],
): Promise<Map<string, { id: number; name: string }>> {
  const out = new Map<string, { id: number; name: string }>();
  if (keys.length === 0) return out;
  const rows = await db
    .selectFrom('place_names as n')
    .innerJoin('places as p', 'p.id', 'n.place_id')
    .select(['n.key', 'p.id', 'p.name'])
    .where('n.workspace_id', '=', workspaceId)
    .where('n.kind', '=', kind)
    .where('n.key', 'in', [...keys])
    .execute();
  for (const row of rows) out.set(row.key, { id: Number(row.id), name: row.name });
  return out;
}

/** Whether the workspace has any place of the kind (where it has none, nothing is an unknown place). */
export async function kindsWithPlaces(db: Executor, workspaceId: number): Promise<Set<PlaceKind>> {
  const rows = await db
    .selectFrom('places')
    .select('kind')
    .distinct()
    .where('workspace_id', '=', workspaceId)
    .execute();
  return new Set(rows.map((r) => r.kind as PlaceKind));
}

/**
 * `keys` with every other name of the places they name: the keys a column is compared with, for callers that
 * hold a set of keys in memory (the silence periods in force).
 */
export async function withPlaceAliases(
  db: Executor,
  workspaceId: number,
  kind: PlaceKind,
  keys: readonly string[],
): Promise<string[]> {
  if (keys.length === 0) return [];
  const rows = await db
    .selectFrom('place_names as n1')
    .innerJoin('place_names as n2', 'n2.place_id', 'n1.place_id')
    .select('n2.key')
    .where('n1.workspace_id', '=', workspaceId)
    .where('n1.kind', '=', kind)
    .where('n1.key', 'in', [...keys])
    .execute();
  return [...new Set([...keys, ...rows.map((r) => r.key)])];
}

/**
 * The condition "`column` (a place key: voters.ward_key, ...) names the same place as one of `keys`": it equals
 * one of them, or another name or alias of a place of the workspace one of them names. In SQL, so that a
 * voter query stays one statement; both parts are lookups on the column's index.
 */
export function matchesPlace<DB extends Database, TB extends keyof DB>(
  eb: ExpressionBuilder<DB, TB>,
  column: Expression<string | null> | string,
  workspaceId: number,
  kind: PlaceKind,
  keys: readonly string[],
): Expression<SqlBool> {
  const ref = typeof column === 'string' ? sql.ref(column) : column;
  const list = [...new Set(keys)];
  return eb.or([
    sql<SqlBool>`${ref} IN (${sql.join(list)})`,
    sql<SqlBool>`${ref} IN (SELECT n2.key FROM place_names n1 JOIN place_names n2 ON n2.place_id = n1.place_id
      WHERE n1.workspace_id = ${workspaceId} AND n1.kind = ${kind} AND n1.key IN (${sql.join(list)}))`,
  ]);
}
