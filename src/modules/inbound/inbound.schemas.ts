import { Type } from 'typebox';
import { PageQuery, Timestamp, Ref } from '../../http/schemas.ts';
import { ChannelSchema } from '../messages/messages.schemas.ts';

export const InboundItem = Type.Object(
  {
    id: Ref('in'),
    channel: ChannelSchema,
    from: Type.String({ description: 'E.164 phone, or lower-cased email.' }),
    body: Type.String({
      description:
        'The text; empty where `withheld` (in webhooks and the live stream; managers and politicians read it here).',
    }),
    keyword: Type.Union([Type.Literal('stop'), Type.Literal('start'), Type.Null()], {
      description: '`stop` when the reply opted the sender out, `start` when it opted back in.',
    }),
    withheld: Type.Boolean({
      description:
        "true for a voter's answer to a survey question that saves to support_level or a sensitive field: a sensitive value, which volunteers, webhooks and the live stream never get.",
    }),
    created_at: Timestamp,
  },
  { title: 'InboundMessage' },
);

export const InboundBody = Type.Object(
  {
    channel: ChannelSchema,
    from: Type.String({
      minLength: 1,
      maxLength: 254,
      description: 'The sender: a phone, or an email address.',
    }),
    body: Type.String({ maxLength: 5000 }),
  },
  { additionalProperties: false },
);

export const InboundQuery = Type.Object({
  ...PageQuery.properties,
  channel: Type.Optional(ChannelSchema),
});
