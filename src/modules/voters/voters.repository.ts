import type { Insertable, Updateable } from 'kysely';
import type { VoterRow, VoterTable } from '../../db/schema.ts';
import type { Executor } from '../../db/types.ts';
import { compiledOnce } from '../../db/compiled-once.ts';
import { ageOf } from './voter-record.rules.ts';

/** `name` lower-cased with runs of spaces collapsed: with the phone, a voter's identity. */
export function nameKey(name: string): string {
  return name.trim().replace(/\s+/g, ' ').toLowerCase();
}

/** `GET /api/voters/{id}` runs this on every call: built and compiled once (db/compiled-once.ts). */
const voterById = compiledOnce((db, workspaceId: number, id: number) =>
  db.selectFrom('voters').selectAll().where('workspace_id', '=', workspaceId).where('id', '=', id),
);

export function findVoter(db: Executor, workspaceId: number, id: number): Promise<VoterRow | undefined> {
  return voterById.first(db, workspaceId, id);
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

/** The other voters of `voter`'s household (the same household_key), at most 50, in id order. */
/** The voter's household, read with the voter: built and compiled once. */
const household = compiledOnce((db, workspaceId: number, key: string, id: number) =>
  db
    .selectFrom('voters')
    .select(['id', 'name', 'relation_type', 'relation_name', 'birth_date', 'birth_key'])
    .where('workspace_id', '=', workspaceId)
    .where('household_key', '=', key)
    .where('id', '!=', id)
    .orderBy('id')
    .limit(50),
);

export async function householdOf(
  db: Executor,
  workspaceId: number,
  voter: Pick<VoterRow, 'id' | 'household_key'>,
): Promise<
  Array<{
    id: number;
    name: string;
    relation_type: string | null;
    relation_name: string | null;
    age: number | null;
  }>
> {
  if (!voter.household_key) return [];
  const rows = await household.all(db, workspaceId, voter.household_key, voter.id);
  return rows.map((r) => ({
    id: Number(r.id),
    name: r.name,
    relation_type: r.relation_type,
    relation_name: r.relation_name,
    age: ageOf(r.birth_date, r.birth_key),
  }));
}

/** The first voter (lowest id) of each address among `addresses`, by phone or email: id and language. */
export async function votersByAddress(
  db: Executor,
  workspaceId: number,
  column: 'phone' | 'email',
  addresses: readonly string[],
): Promise<Map<string, { id: number; language: string | null }>> {
  const out = new Map<string, { id: number; language: string | null }>();
  if (addresses.length === 0) return out;
  const rows = await db
    .selectFrom('voters')
    .select(['id', column, 'language'])
    .where('workspace_id', '=', workspaceId)
    .where(column, 'in', [...addresses])
    .orderBy('id')
    .execute();
  for (const v of rows) {
    const address = (v as Record<string, unknown>)[column] as string;
    if (!out.has(address)) out.set(address, { id: Number(v.id), language: v.language });
  }
  return out;
}

/** A voter's places as they are now (a survey answer keeps them, to count results where the voter was). */
export function voterPlaces(db: Executor, workspaceId: number, id: number) {
  return db
    .selectFrom('voters')
    .select(['booth', 'ward', 'constituency', 'part_number'])
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .executeTakeFirst();
}

/** The booths of these voters, by id. */
export async function voterBooths(
  db: Executor,
  workspaceId: number,
  ids: readonly number[],
): Promise<Map<number, string | null>> {
  if (ids.length === 0) return new Map();
  const rows = await db
    .selectFrom('voters')
    .select(['id', 'booth'])
    .where('workspace_id', '=', workspaceId)
    .where('id', 'in', [...ids])
    .execute();
  return new Map(rows.map((v) => [Number(v.id), v.booth] as const));
}

/**
 * Marks the voter changed before its tags or field values are written: the update holds the voter's row until
 * the caller's transaction commits, so a delete waits and then takes the new rows with it (there is no foreign
 * key to do it on PostgreSQL, migration 039). False when the voter is gone.
 */
export async function touchVoter(
  db: Executor,
  workspaceId: number,
  id: number,
  now: string,
): Promise<boolean> {
  const done = await db
    .updateTable('voters')
    .set({ updated_at: now })
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .executeTakeFirst();
  return Number(done.numUpdatedRows) > 0;
}
