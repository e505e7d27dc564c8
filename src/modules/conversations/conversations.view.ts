import type { ConversationRow } from '../../db/schema.ts';
import type { Executor } from '../../db/types.ts';
import { conversationRef } from '../../refs.ts';

export interface ConversationView extends ConversationRow {
  assigned_to_name: string | null;
}

/** A conversation with its assignee's name (lists read it in their own query). */
export async function conversationView(db: Executor, row: ConversationRow): Promise<ConversationView> {
  const user =
    row.assigned_to === null
      ? undefined
      : await db.selectFrom('users').select('name').where('id', '=', row.assigned_to).executeTakeFirst();
  return { ...row, assigned_to_name: user?.name ?? null };
}

export function conversationItem(row: ConversationView) {
  return {
    id: conversationRef(row.id),
    channel: row.channel,
    address: row.address,
    voter_id: row.voter_id === null ? null : Number(row.voter_id),
    voter_name: row.voter_name,
    status: row.status,
    assigned_to: row.assigned_to === null ? null : Number(row.assigned_to),
    assigned_to_name: row.assigned_to_name,
    unread_count: Number(row.unread_count),
    last_message_at: row.last_message_at,
    last_message_preview: row.last_message_preview,
    last_inbound_at: row.last_inbound_at,
    grievance_id: row.grievance_id === null ? null : Number(row.grievance_id),
    created_at: row.created_at,
  };
}
