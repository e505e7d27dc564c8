import { Type } from 'typebox';
import { Timestamp } from '../../http/schemas.ts';
import { ChannelSchema } from '../messages/messages.schemas.ts';

/** A conversation as the API shows it (and the webhook events `conversation.created` and `.assigned` carry it). */
export const Conversation = Type.Object(
  {
    id: Type.String({ description: '`conv_<n>`' }),
    channel: ChannelSchema,
    address: Type.String({ description: "The contact's phone (E.164) or email address." }),
    voter_id: Type.Union([Type.Integer(), Type.Null()], {
      description: "The workspace's voter with that address (the oldest where several share it), or null.",
    }),
    voter_name: Type.Union([Type.String(), Type.Null()]),
    status: Type.Union([Type.Literal('open'), Type.Literal('closed')]),
    assigned_to: Type.Union([Type.Integer(), Type.Null()], {
      description: 'A user id, or null: unassigned.',
    }),
    assigned_to_name: Type.Union([Type.String(), Type.Null()]),
    unread_count: Type.Integer({ description: 'Inbound messages since the assignee last read the thread.' }),
    last_message_at: Timestamp,
    last_message_preview: Type.String(),
    last_inbound_at: Type.Union([Timestamp, Type.Null()]),
    grievance_id: Type.Union([Type.Integer(), Type.Null()]),
    created_at: Timestamp,
  },
  { title: 'Conversation' },
);
