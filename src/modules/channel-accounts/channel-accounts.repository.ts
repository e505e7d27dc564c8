import type { Insertable, Updateable } from 'kysely';
import { pageOf } from '../../db/paginate.ts';
import type { ChannelAccountRow, ChannelAccountTable } from '../../db/schema.ts';
import type { MessageChannel } from '../../domain.ts';
import type { Executor } from '../../db/types.ts';

export async function insertAccount(db: Executor, values: Insertable<ChannelAccountTable>) {
  return db.insertInto('channel_accounts').values(values).returningAll().executeTakeFirstOrThrow();
}

export async function findAccount(
  db: Executor,
  workspaceId: number,
  id: number,
): Promise<ChannelAccountRow | undefined> {
  return db
    .selectFrom('channel_accounts')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .executeTakeFirst();
}

/** Any workspace's account by id: callbacks (whose token proves the account) and the delivery worker. */
export async function accountById(db: Executor, id: number): Promise<ChannelAccountRow | undefined> {
  return db.selectFrom('channel_accounts').selectAll().where('id', '=', id).executeTakeFirst();
}

export async function listAccounts(db: Executor, workspaceId: number, page: number, perPage: number) {
  return pageOf(
    db.selectFrom('channel_accounts').where('workspace_id', '=', workspaceId),
    (q) => q.selectAll().orderBy('id', 'asc'),
    page,
    perPage,
  );
}

export async function updateAccount(
  db: Executor,
  workspaceId: number,
  id: number,
  values: Updateable<ChannelAccountTable>,
): Promise<ChannelAccountRow | undefined> {
  return db
    .updateTable('channel_accounts')
    .set(values)
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
}

export async function deleteAccount(db: Executor, workspaceId: number, id: number): Promise<boolean> {
  const result = await db
    .deleteFrom('channel_accounts')
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .executeTakeFirst();
  return Number(result.numDeletedRows) > 0;
}

/** Every channel account of the workspace (the caller picks out the defaults it moves away). */
export async function accountsOfWorkspace(db: Executor, workspaceId: number): Promise<ChannelAccountRow[]> {
  return db.selectFrom('channel_accounts').selectAll().where('workspace_id', '=', workspaceId).execute();
}

/** The workspace's default active account for `channel`, if it has one. */
export async function defaultAccount(
  db: Executor,
  workspaceId: number,
  channel: MessageChannel,
): Promise<ChannelAccountRow | undefined> {
  const rows = await db
    .selectFrom('channel_accounts')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('disabled_at', 'is', null)
    .where('default_for', 'like', `%"${channel}"%`)
    .execute();
  return rows.find((row) => (JSON.parse(row.default_for) as string[]).includes(channel));
}

/** The accounts with these ids (the delivery worker's batch names them). */
export function accountsByIds(db: Executor, ids: number[]): Promise<ChannelAccountRow[]> {
  return ids.length === 0
    ? Promise.resolve([])
    : db.selectFrom('channel_accounts').selectAll().where('id', 'in', ids).execute();
}

/** Switches an account off for refused credentials; false when it was off already. */
export async function disableAccount(
  db: Executor,
  id: number,
  reason: string,
  now: string,
): Promise<boolean> {
  const moved = await db
    .updateTable('channel_accounts')
    .set({
      disabled_at: now,
      disabled_reason: `credentials refused: ${reason}`.slice(0, 500),
      updated_at: now,
    })
    .where('id', '=', id)
    .where('disabled_at', 'is', null)
    .returning('id')
    .executeTakeFirst();
  return moved !== undefined;
}

/**
 * Takes the key of each of `channels`' default for `accountId` (insert, or update where another account held
 * it). On PostgreSQL a concurrent change of the same channel's default waits here until this one commits, so the
 * accounts it reads next are the committed ones: one default per channel, whatever the race.
 */
export async function claimDefaults(
  db: Executor,
  workspaceId: number,
  accountId: number,
  channels: readonly string[],
  now: string,
): Promise<void> {
  for (const channel of [...channels].sort()) {
    await db
      .insertInto('channel_defaults')
      .values({ workspace_id: workspaceId, channel, channel_account_id: accountId, updated_at: now })
      .onConflict((oc) =>
        oc
          .columns(['workspace_id', 'channel'])
          .doUpdateSet({ channel_account_id: accountId, updated_at: now }),
      )
      .execute();
  }
  // The channels this account is no longer the default of.
  await db
    .deleteFrom('channel_defaults')
    .where('channel_account_id', '=', accountId)
    .$if(channels.length > 0, (q) => q.where('channel', 'not in', [...channels]))
    .execute();
}
