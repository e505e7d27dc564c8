import { pageOf } from '../../db/paginate.ts';
import type { Insertable, Updateable } from 'kysely';
import type { UserRow, UserTable } from '../../db/schema.ts';
import type { Executor } from '../../db/types.ts';

export async function insertUser(db: Executor, values: Insertable<UserTable>): Promise<UserRow> {
  return db.insertInto('users').values(values).returningAll().executeTakeFirstOrThrow();
}

export async function findUser(db: Executor, workspaceId: number, id: number): Promise<UserRow | undefined> {
  return db
    .selectFrom('users')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .executeTakeFirst();
}

/** Sign-in looks a user up across workspaces: email and phone are unique service-wide. */
export async function findUserByEmail(db: Executor, email: string): Promise<UserRow | undefined> {
  return db.selectFrom('users').selectAll().where('email', '=', email).executeTakeFirst();
}

export async function findUserByPhone(db: Executor, phone: string): Promise<UserRow | undefined> {
  return db.selectFrom('users').selectAll().where('phone', '=', phone).executeTakeFirst();
}

/** One page of the workspace's team in id order, optionally only active (or only deactivated) members. */
export async function listUsers(
  db: Executor,
  workspaceId: number,
  page: number,
  perPage: number,
  active?: boolean,
): Promise<{ rows: UserRow[]; total: number }> {
  let query = db.selectFrom('users').where('workspace_id', '=', workspaceId);
  if (active !== undefined) query = query.where('deactivated_at', active ? 'is' : 'is not', null);
  return pageOf(query, (q) => q.selectAll().orderBy('id'), page, perPage);
}

/**
 * Serialises changes to one workspace's team: a write to the workspace's row, first in the transaction. On
 * PostgreSQL it holds the row's lock until commit, so two politicians demoting each other at once take turns
 * and the second sees the first's change; on SQLite the write takes the database's write lock.
 */
export async function lockTeam(db: Executor, workspaceId: number): Promise<void> {
  await db
    .updateTable('workspaces')
    .set((eb) => ({ name: eb.ref('name') }))
    .where('id', '=', workspaceId)
    .execute();
}

/** Active politicians of the workspace other than `exceptUserId`. */
export async function countOtherActivePoliticians(
  db: Executor,
  workspaceId: number,
  exceptUserId: number,
): Promise<number> {
  const row = await db
    .selectFrom('users')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('workspace_id', '=', workspaceId)
    .where('id', '!=', exceptUserId)
    .where('role', '=', 'politician')
    .where('deactivated_at', 'is', null)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

export async function updateUser(
  db: Executor,
  workspaceId: number,
  id: number,
  values: Updateable<UserTable>,
): Promise<UserRow> {
  return db
    .updateTable('users')
    .set(values)
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirstOrThrow();
}
