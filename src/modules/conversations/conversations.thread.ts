import { sql } from 'kysely';
import type { ConversationRow, InboundMessageRow, VoterRow } from '../../db/schema.ts';
import type { MessageChannel } from '../../domain.ts';
import type { Executor } from '../../db/types.ts';
import { placeKey, type PlaceKind } from '../../lib/place.ts';
import { withPlaceAliases } from '../places/places.repository.ts';
import { coverageOf } from '../users/users.schemas.ts';
import { emitEvent } from '../webhooks/webhooks.events.ts';
import { conversationItem, conversationView } from './conversations.view.ts';

const preview = (text: string) => text.replace(/\s+/g, ' ').trim().slice(0, 200);

/** The workspace's voter with this address on the channel (the oldest where several share it), or none. */
export async function voterOf(db: Executor, workspaceId: number, channel: MessageChannel, address: string) {
  return db
    .selectFrom('voters')
    .select(['id', 'name', 'ward', 'booth', 'constituency', 'constituency_key'])
    .where('workspace_id', '=', workspaceId)
    .where(channel === 'email' ? 'email' : 'phone', '=', address)
    .orderBy('id')
    .limit(1)
    .executeTakeFirst();
}

/**
 * Links the workspace's conversations whose contact has since become a voter (added, imported, or given that
 * phone or email): a contact who wrote before they were on the roll is linked once they are.
 */
export async function linkNewVoters(db: Executor, workspaceId: number): Promise<number> {
  const found = await sql<{
    conversation_id: number;
    id: number;
    name: string;
    ward: string | null;
    booth: string | null;
    constituency_key: string | null;
  }>`SELECT c.id AS conversation_id, v.id, v.name, v.ward, v.booth, v.constituency_key
      FROM conversations c JOIN voters v ON v.workspace_id = c.workspace_id AND v.phone = c.address
     WHERE c.workspace_id = ${workspaceId} AND c.voter_id IS NULL AND c.channel <> 'email'
    UNION ALL
    SELECT c.id AS conversation_id, v.id, v.name, v.ward, v.booth, v.constituency_key
      FROM conversations c JOIN voters v ON v.workspace_id = c.workspace_id AND v.email = c.address
     WHERE c.workspace_id = ${workspaceId} AND c.voter_id IS NULL AND c.channel = 'email'
    ORDER BY 1, 2`.execute(db);
  let linked = 0;
  let last: number | undefined;
  for (const voter of found.rows) {
    if (Number(voter.conversation_id) === last) continue;
    last = Number(voter.conversation_id);
    const done = await db
      .updateTable('conversations')
      .set({
        voter_id: Number(voter.id),
        voter_name: voter.name,
        voter_ward: voter.ward,
        voter_booth: voter.booth,
        voter_constituency_key: voter.constituency_key,
      })
      .where('id', '=', last)
      .where('voter_id', 'is', null)
      .executeTakeFirst();
    linked += Number(done.numUpdatedRows);
  }
  return linked;
}

/** Links the workspace's unlinked conversations with this voter's phone or email to the voter. */
export async function linkVoter(
  db: Executor,
  workspaceId: number,
  voter: Pick<VoterRow, 'id' | 'name' | 'phone' | 'email' | 'ward' | 'booth' | 'constituency_key'>,
): Promise<void> {
  await db
    .updateTable('conversations')
    .set({
      voter_id: Number(voter.id),
      voter_name: voter.name,
      voter_ward: voter.ward,
      voter_booth: voter.booth,
      voter_constituency_key: voter.constituency_key,
    })
    .where('workspace_id', '=', workspaceId)
    .where('voter_id', 'is', null)
    .where((eb) =>
      eb.or([
        eb.and([eb('channel', '<>', 'email'), eb('address', '=', voter.phone)]),
        ...(voter.email ? [eb.and([eb('channel', '=', 'email'), eb('address', '=', voter.email)])] : []),
      ]),
    )
    .execute();
}

/**
 * Who gets a new conversation with this voter: the active volunteer whose coverage holds the voter's ward,
 * booth or constituency (compared as place keys) with the fewest open conversations (the lowest id on a tie);
 * none when no coverage holds it.
 */
export async function assigneeFor(
  db: Executor,
  workspaceId: number,
  voter: { ward: string | null; booth: string | null; constituency: string | null },
): Promise<number | null> {
  const volunteers = await db
    .selectFrom('users')
    .select(['id', 'coverage'])
    .where('workspace_id', '=', workspaceId)
    .where('role', '=', 'volunteer')
    .where('deactivated_at', 'is', null)
    .where('coverage', 'is not', null)
    .orderBy('id')
    .execute();
  if (volunteers.length === 0) return null;
  // Each of the voter's places by any of its names (a volunteer covering "वाराणसी" covers "Varanasi").
  const names = async (kind: PlaceKind, value: string | null) =>
    new Set(value ? await withPlaceAliases(db, workspaceId, kind, [placeKey(value)]) : []);
  const [wards, booths, constituencies] = await Promise.all([
    names('ward', voter.ward),
    names('booth', voter.booth),
    names('constituency', voter.constituency),
  ]);
  const has = (list: string[], keys: Set<string>) => list.some((item) => keys.has(placeKey(item)));
  const covering = volunteers.filter((v) => {
    const c = coverageOf(v);
    return has(c.wards, wards) || has(c.booths, booths) || has(c.constituencies, constituencies);
  });
  if (covering.length === 0) return null;
  const ids = covering.map((v) => v.id);
  const loads = await db
    .selectFrom('conversations')
    .select(['assigned_to', sql<number>`count(*)`.as('open')])
    .where('workspace_id', '=', workspaceId)
    .where('status', '=', 'open')
    .where('assigned_to', 'in', ids)
    .groupBy('assigned_to')
    .execute();
  const load = new Map(loads.map((l) => [Number(l.assigned_to), Number(l.open)]));
  let best = ids[0]!;
  for (const id of ids) if ((load.get(id) ?? 0) < (load.get(best) ?? 0)) best = id;
  return best;
}

/**
 * Files an inbound message in its conversation (one per workspace, channel and address), in the caller's
 * transaction: a new contact opens one (linked to their voter, assigned by coverage, with the message they
 * answered and earlier single sends to them), a closed one reopens. Emits `conversation.created` and
 * `conversation.assigned`.
 */
export async function threadInbound(
  trx: Executor,
  workspaceId: number,
  inbound: InboundMessageRow,
  channelAccountId: number | null,
  now: string,
): Promise<ConversationRow> {
  const find = () => conversationFor(trx, workspaceId, inbound.channel, inbound.from);
  let conversation = await find();
  if (!conversation) {
    const voter = await voterOf(trx, workspaceId, inbound.channel, inbound.from);
    const assignee = voter ? await assigneeFor(trx, workspaceId, voter) : null;
    const created = await trx
      .insertInto('conversations')
      .values({
        workspace_id: workspaceId,
        channel: inbound.channel,
        address: inbound.from,
        voter_id: voter?.id ?? null,
        voter_name: voter?.name ?? null,
        voter_ward: voter?.ward ?? null,
        voter_booth: voter?.booth ?? null,
        voter_constituency_key: voter?.constituency_key ?? null,
        status: 'open',
        assigned_to: assignee,
        unread_count: 1,
        last_message_at: now,
        // A withheld survey answer (a sensitive value) is not previewed to whoever lists the conversations.
        last_message_preview: preview(Number(inbound.withheld) === 1 ? '' : inbound.body),
        last_inbound_at: now,
        channel_account_id: channelAccountId,
        grievance_id: null,
        created_at: now,
        updated_at: now,
      })
      .onConflict((oc) => oc.columns(['workspace_id', 'channel', 'address']).doNothing())
      .returningAll()
      .executeTakeFirst();
    if (created) {
      await joinEarlierSends(trx, workspaceId, inbound, created.id);
      await linkInbound(trx, inbound.id, created.id);
      const view = await conversationView(trx, created);
      const live = { assignedTo: assignee };
      await emitEvent(trx, workspaceId, 'conversation.created', conversationItem(view), now, live);
      if (assignee !== null)
        await emitEvent(trx, workspaceId, 'conversation.assigned', conversationItem(view), now, live);
      return created;
    }
    conversation = await find();
    if (!conversation) throw new Error('conversation vanished');
  }
  const updated = await trx
    .updateTable('conversations')
    .set((eb) => ({
      status: 'open',
      unread_count: eb('unread_count', '+', 1),
      last_message_at: now,
      // A withheld survey answer (a sensitive value) is not previewed to whoever lists the conversations.
      last_message_preview: preview(Number(inbound.withheld) === 1 ? '' : inbound.body),
      last_inbound_at: now,
      channel_account_id: channelAccountId ?? conversation.channel_account_id,
      updated_at: now,
    }))
    .where('id', '=', conversation.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  await linkInbound(trx, inbound.id, conversation.id);
  return updated;
}

/** The message a new conversation's first reply answered (the last one sent) and the single sends before it join the thread. */
async function joinEarlierSends(
  trx: Executor,
  workspaceId: number,
  inbound: Pick<InboundMessageRow, 'channel' | 'from'>,
  conversationId: number,
): Promise<void> {
  const last = await trx
    .selectFrom('messages')
    .select('id')
    .where('workspace_id', '=', workspaceId)
    .where('to', '=', inbound.from)
    .where('channel', '=', inbound.channel)
    .orderBy('id', 'desc')
    .limit(1)
    .executeTakeFirst();
  if (!last) return;
  await trx
    .updateTable('messages')
    .set({ conversation_id: conversationId })
    .where('workspace_id', '=', workspaceId)
    .where('to', '=', inbound.from)
    .where('channel', '=', inbound.channel)
    .where('conversation_id', 'is', null)
    .where((eb) => eb.or([eb('campaign_id', 'is', null), eb('id', '=', last.id)]))
    .execute();
}

async function linkInbound(trx: Executor, inboundId: number, conversationId: number) {
  await trx
    .updateTable('inbound_messages')
    .set({ conversation_id: conversationId })
    .where('id', '=', inboundId)
    .execute();
}

/** The workspace's conversation with this contact on this channel, if there is one. */
export async function conversationFor(
  db: Executor,
  workspaceId: number,
  channel: MessageChannel,
  address: string,
): Promise<ConversationRow | undefined> {
  return db
    .selectFrom('conversations')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('channel', '=', channel)
    .where('address', '=', address)
    .executeTakeFirst();
}

export async function touchOutbound(db: Executor, conversationId: number, body: string, now: string) {
  await db
    .updateTable('conversations')
    .set({ last_message_at: now, last_message_preview: preview(body), updated_at: now })
    .where('id', '=', conversationId)
    .execute();
}

/** Deactivating a member: their open conversations go back to the unassigned queue. */
export async function unassignOpen(db: Executor, workspaceId: number, userId: number, now: string) {
  await db
    .updateTable('conversations')
    .set({ assigned_to: null, updated_at: now })
    .where('workspace_id', '=', workspaceId)
    .where('assigned_to', '=', userId)
    .where('status', '=', 'open')
    .execute();
}
