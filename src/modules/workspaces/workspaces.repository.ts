import { randomBytes } from 'node:crypto';
import type { Executor } from '../../db/types.ts';

/** A workspace's public id: 16 random characters (the public privacy page's address; guessing one is hopeless). */
export const newPublicId = () => randomBytes(12).toString('base64url');

export async function insertWorkspace(db: Executor, name: string, now: string): Promise<number> {
  const row = await db
    .insertInto('workspaces')
    .values({ name, created_at: now, public_id: newPublicId() })
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
    .select([
      'id',
      'name',
      'created_at',
      'timezone',
      'default_language',
      'public_id',
      'retention_messages_days',
      'retention_inbound_days',
      'retention_visits_days',
      'retention_survey_responses_days',
    ])
    .where('id', '=', workspaceId)
    .executeTakeFirst();
}

export async function updateWorkspace(
  db: Executor,
  workspaceId: number,
  changes: {
    name?: string;
    timezone?: string | null;
    default_language?: string;
    retention_messages_days?: number | null;
    retention_inbound_days?: number | null;
    retention_visits_days?: number | null;
    retention_survey_responses_days?: number | null;
  },
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

/** A workspace made without a public id (by a test's or an operator's own INSERT) gets one when first read. */
export async function givePublicId(db: Executor, workspaceId: number): Promise<string> {
  await db
    .updateTable('workspaces')
    .set({ public_id: newPublicId() })
    .where('id', '=', workspaceId)
    .where('public_id', 'is', null)
    .execute();
  const row = await db
    .selectFrom('workspaces')
    .select('public_id')
    .where('id', '=', workspaceId)
    .executeTakeFirstOrThrow();
  return row.public_id!;
}
