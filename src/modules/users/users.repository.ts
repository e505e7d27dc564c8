import type { Insertable } from 'kysely';
import type { UserRow, UserTable } from '../../db/schema.ts';
import type { Executor } from '../../db/types.ts';
import { workspacePage } from '../../db/paginate.ts';

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

export function listUsers(db: Executor, workspaceId: number, page: number, perPage: number) {
  return workspacePage(db, 'users', workspaceId, page, perPage);
}
