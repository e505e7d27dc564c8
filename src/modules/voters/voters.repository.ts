import type { Insertable, Updateable } from 'kysely';
import type { VoterRow, VoterTable } from '../../db/schema.ts';
import type { Executor } from '../../db/types.ts';
import { compiledOnce } from '../../db/compiled-once.ts';

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
