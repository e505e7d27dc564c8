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
  const rows = await db
    .selectFrom('voters')
    .select(['id', 'name', 'relation_type', 'relation_name', 'birth_date', 'birth_key'])
    .where('workspace_id', '=', workspaceId)
    .where('household_key', '=', voter.household_key)
    .where('id', '!=', voter.id)
    .orderBy('id')
    .limit(50)
    .execute();
  return rows.map((r) => ({
    id: Number(r.id),
    name: r.name,
    relation_type: r.relation_type,
    relation_name: r.relation_name,
    age: ageOf(r.birth_date, r.birth_key),
  }));
}
