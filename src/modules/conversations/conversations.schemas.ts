import { Type } from 'typebox';
import { Timestamp, Ref } from '../../http/schemas.ts';
import { ChannelSchema } from '../messages/messages.schemas.ts';

/** A conversation as the API shows it (and the webhook events `conversation.created` and `.assigned` carry it). */
export const Conversation = Type.Object(
  {
    id: Ref('conv'),
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

/** One conversation as its page reads it: with how a reply can go now. */
export const ConversationDetail = Type.Object(
  {
    ...Conversation.properties,
    opted_out: Type.Boolean({
      description:
        'true while the contact is opted out of the channel (a STOP in the thread, say): replies are refused until they send START.',
    }),
    reply: Type.Object(
      {
        templates_only: Type.Boolean({
          description:
            'true where a reply must be a template (`{ template_id, variables }`): SMS through a DLT gateway ' +
            '(a gateway of registered templates only, or any while DLT_ENFORCE is on), WhatsApp more than 24 hours after the contact last wrote.',
        }),
        reason: Type.Union([Type.Literal('dlt'), Type.Literal('whatsapp_window'), Type.Null()]),
        provider: Type.String({ description: 'The provider a reply goes through now.' }),
        provider_label: Type.String({ description: 'Its name as people write it.' }),
        voter_values: Type.Record(Type.String(), Type.String(), {
          description:
            "Each template variable's value for the contact's voter (empty where none): a variable left out of a reply's `variables` takes it.",
        }),
        template_ids: Type.Array(Type.String(), {
          description:
            "The workspace's templates for the channel that the provider can send (registered or approved there), " +
            'in the order to offer them.',
        }),
      },
      { title: 'ConversationReply' },
    ),
  },
  { title: 'ConversationDetail' },
);
