import { pageOf } from '../../db/paginate.ts';
import type { InboundMessageRow } from '../../db/schema.ts';
import type { MessageChannel } from '../../domain.ts';
import type { Executor } from '../../db/types.ts';

export async function insertInbound(
  db: Executor,
  workspaceId: number,
  values: {
    channel: MessageChannel;
    from: string;
    body: string;
    keyword: 'stop' | 'start' | null;
    provider: string;
    provider_message_id?: string | null | undefined;
    created_at: string;
  },
): Promise<InboundMessageRow | undefined> {
  // A message the provider already delivered here (same provider id) is not stored again: undefined.
  return db
    .insertInto('inbound_messages')
    .values({ workspace_id: workspaceId, ...values })
    .onConflict((oc) => oc.columns(['workspace_id', 'provider', 'provider_message_id']).doNothing())
    .returningAll()
    .executeTakeFirst();
}

export async function listInbound(
  db: Executor,
  workspaceId: number,
  filters: { channel?: MessageChannel | undefined },
  page: number,
  perPage: number,
): Promise<{ rows: InboundMessageRow[]; total: number }> {
  const base = db
    .selectFrom('inbound_messages')
    .where('workspace_id', '=', workspaceId)
    .$if(filters.channel !== undefined, (q) => q.where('channel', '=', filters.channel as MessageChannel));
  return pageOf(base, (q) => q.selectAll().orderBy('id', 'desc'), page, perPage);
}

/**
 * The workspaces that have messaged `address` on `channel`: a reply to the shared provider number names only
 * its sender, and belongs to each of them.
 */
export async function workspacesThatMessaged(
  db: Executor,
  channel: MessageChannel,
  address: string,
): Promise<number[]> {
  const rows = await db
    .selectFrom('messages')
    .select('workspace_id')
    .distinct()
    .where('to', '=', address)
    .where('channel', '=', channel)
    .execute();
  return rows.map((r) => Number(r.workspace_id));
}

/**
 * The workspace that last sent to `address` on `channel` through the deployment's own provider (no channel
 * account): a reply to the deployment's shared number is that workspace's.
 */
export async function lastSenderThroughDeployment(
  db: Executor,
  channel: MessageChannel,
  address: string,
): Promise<number | undefined> {
  const row = await db
    .selectFrom('messages')
    .select('workspace_id')
    .where('to', '=', address)
    .where('channel', '=', channel)
    .where('channel_account_id', 'is', null)
    .orderBy('id', 'desc')
    .limit(1)
    .executeTakeFirst();
  return row ? Number(row.workspace_id) : undefined;
}
