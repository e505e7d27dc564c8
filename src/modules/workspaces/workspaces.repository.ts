import type { Executor } from '../../db/types.ts';

export async function insertWorkspace(db: Executor, name: string, now: string): Promise<number> {
  const row = await db
    .insertInto('workspaces')
    .values({ name, created_at: now })
    .returning('id')
    .executeTakeFirstOrThrow();
  return row.id;
}

export async function workspaceExists(db: Executor, workspaceId: number): Promise<boolean> {
  const row = await db.selectFrom('workspaces').select('id').where('id', '=', workspaceId).executeTakeFirst();
  return row !== undefined;
}

export async function workspaceById(db: Executor, workspaceId: number) {
  return db
    .selectFrom('workspaces')
    .select(['id', 'name', 'created_at', 'timezone', 'default_language'])
    .where('id', '=', workspaceId)
    .executeTakeFirst();
}

export async function updateWorkspace(
  db: Executor,
  workspaceId: number,
  changes: { name?: string; timezone?: string | null; default_language?: string },
): Promise<void> {
  await db.updateTable('workspaces').set(changes).where('id', '=', workspaceId).execute();
}

/** The language of the workspace's voters without one (`en` or `hi`). */
export async function defaultLanguage(db: Executor, workspaceId: number): Promise<string> {
  const row = await db
    .selectFrom('workspaces')
    .select('default_language')
    .where('id', '=', workspaceId)
    .executeTakeFirst();
  return row?.default_language ?? 'en';
}
