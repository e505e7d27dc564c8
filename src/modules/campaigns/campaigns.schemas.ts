import { Type } from 'typebox';
import { campaignStatuses } from '../../domain.ts';
import { Timestamp, RefInput, Ref } from '../../http/schemas.ts';
import { PageQuery } from '../../http/schemas.ts';
import {
  ChannelAccountId,
  ChannelSchema,
  MessageStatusSchema,
  MediaUrl,
  MessageText,
  Recipients,
  SegmentId,
  Subject,
  TemplateId,
} from '../messages/messages.schemas.ts';

export const CampaignStatusSchema = Type.Enum([...campaignStatuses], {
  title: 'CampaignStatus',
  description:
    'draft -> (scheduled) -> queued (credits reserved) -> sending -> completed; cancelled stops what has not gone out.',
});

export const CreateCampaignBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 200 }),
    channel: ChannelSchema,
    message: Type.Optional(MessageText),
    recipients: Type.Optional(Recipients),
    segment_id: Type.Optional(SegmentId),
    scheduled_at: Type.Optional(
      Type.String({
        format: 'date-time',
        description: 'A future ISO 8601 date-time: the campaign is `scheduled` and starts then by itself.',
      }),
    ),
    template_id: Type.Optional(TemplateId),
    media_url: Type.Optional(MediaUrl),
    subject: Type.Optional(Subject),
    channel_account_id: Type.Optional(ChannelAccountId),
  },
  { additionalProperties: false },
);

const orNull = <T extends Parameters<typeof Type.Union>[0][number]>(schema: T, description: string) =>
  Type.Optional(Type.Union([schema, Type.Null()], { description }));

export const UpdateCampaignBody = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    message: Type.Optional(MessageText),
    recipients: orNull(
      Recipients,
      'Replaces the explicit recipients; null removes them (a segment_id must remain).',
    ),
    segment_id: orNull(SegmentId, 'Another segment; null removes it (recipients must remain).'),
    scheduled_at: orNull(
      Type.String({ format: 'date-time' }),
      'A future ISO 8601 date-time makes the campaign `scheduled`; null makes it a `draft` again.',
    ),
    subject: orNull(Subject, 'Email subject; null removes it.'),
    template_id: orNull(TemplateId, 'WhatsApp template; null removes it.'),
    media_url: orNull(MediaUrl, 'An https URL; null removes it.'),
    channel_account_id: orNull(
      ChannelAccountId,
      "The channel account (`cha_<n>`); null: the workspace's default when it goes out.",
    ),
  },
  {
    additionalProperties: false,
    minProperties: 1,
    description: 'Only the fields sent change. The channel cannot change: create another campaign instead.',
  },
);

export const CampaignMessagesQuery = Type.Object({
  ...PageQuery.properties,
  status: Type.Optional(MessageStatusSchema),
});

export const CampaignParams = Type.Object({
  id: RefInput('camp'),
});

export const Campaign = Type.Object(
  {
    id: Ref('camp'),
    name: Type.String(),
    channel: ChannelSchema,
    message: Type.String(),
    status: CampaignStatusSchema,
    segment_id: Type.Union([Type.Integer(), Type.Null()]),
    subject: Type.Union([Type.String(), Type.Null()], { description: 'Email subject.' }),
    template_id: Type.Union([Type.String(), Type.Null()], { description: 'WhatsApp template.' }),
    media_url: Type.Union([Type.String({ format: 'uri' }), Type.Null()], {
      description: 'An https URL sent with the message.',
    }),
    channel_account_id: Type.Union([Ref('cha'), Type.Null()], {
      description:
        "The channel account carrying its messages (or that would now); null: the deployment's provider.",
    }),
    provider: Type.Union([Type.String(), Type.Null()], {
      description: 'The provider that carries its messages (`sandbox`: simulated).',
    }),
    simulated: Type.Boolean({
      description: 'true when the sandbox carries it: its messages reach no phone or inbox.',
    }),
    last_error: Type.Union(
      [
        Type.Object(
          { error_code: Type.String(), error_message: Type.String(), at: Timestamp },
          { title: 'CampaignLastError' },
        ),
        Type.Null(),
      ],
      {
        description: "Its messages' latest failure or retry error; null: none.",
      },
    ),
    total_recipients: Type.Integer({ description: 'Counted when the campaign is sent (0 before).' }),
    stats: Type.Object(
      {
        queued: Type.Integer(),
        sent: Type.Integer(),
        delivered: Type.Integer(),
        failed: Type.Integer(),
      },
      { description: 'Its messages by status, live.' },
    ),
    scheduled_at: Type.Union([Timestamp, Type.Null()]),
    created_at: Timestamp,
    started_at: Type.Union([Timestamp, Type.Null()]),
    completed_at: Type.Union([Timestamp, Type.Null()]),
    held_until: Type.Union([Timestamp, Type.Null()], {
      description:
        'While the campaign is held, when the window ends and its messages go out again; null when not held.',
    }),
    held_reason: Type.Union([Type.Literal('quiet_hours'), Type.Literal('silence_period'), Type.Null()], {
      description:
        '`quiet_hours`: a queued or sending sms, whatsapp or ivr campaign (not a service or transactional ' +
        'template) inside QUIET_HOURS: its messages are held until held_until. `silence_period`: such a campaign ' +
        'while a silence period of the workspace is in force (and not quiet hours): messages to voters of those ' +
        'constituencies fail with error_code silence_period until held_until, when the last of those periods ' +
        'ends; the others go out. null otherwise.',
    }),
  },
  { title: 'Campaign' },
);

export const CancelledCampaign = Type.Object(
  {
    ...Campaign.properties,
    in_flight: Type.Integer({
      description:
        "Messages in a provider's call when the cancel committed: they still go (at most one call per account " +
        'lane). Every other message not yet handed over ended `failed` with `cancelled` and was refunded.',
    }),
  },
  { title: 'CancelledCampaign' },
);
