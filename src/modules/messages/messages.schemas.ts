import { Type } from 'typebox';
import { messageChannels, messageErrorCodes, messageStatuses } from '../../domain.ts';
import { PageQuery, RowId, Timestamp, RefInput, DateOrDateTime, Ref } from '../../http/schemas.ts';
import { providerNames } from '../../providers/registry.ts';

export const ChannelSchema = Type.Enum([...messageChannels], {
  title: 'Channel',
  description: 'whatsapp, sms, email or ivr.',
});
export const MessageStatusSchema = Type.Enum([...messageStatuses], {
  title: 'MessageStatus',
  description: 'queued -> sent -> delivered | failed.',
});

export const MessageText = Type.String({ minLength: 1, maxLength: 5000 });
export const Subject = Type.String({ minLength: 1, maxLength: 200, description: 'Email subject.' });
export const MediaUrl = Type.String({
  minLength: 1,
  maxLength: 2000,
  format: 'uri',
  description: 'An https URL of an image or document (WhatsApp).',
});
export const TemplateId = Type.String({
  minLength: 1,
  maxLength: 200,
  description:
    'A template of this workspace (`tpl_<n>`, used instead of `message` and rendered per recipient), or a WhatsApp provider template name.',
});
export const ChannelAccountId = RefInput(
  'cha',
  "The channel account to send through (`cha_<n>`: an active account of the workspace for the channel); default: the workspace's default account for the channel, else the deployment's provider.",
);
export const SegmentId = Type.Union([RowId, Type.String({ pattern: '^[0-9]{1,15}$' })], {
  description: 'A segment of your workspace, whose voters are evaluated when the message goes out.',
});

export const SendBody = Type.Object(
  {
    channel: ChannelSchema,
    to: Type.String({
      minLength: 1,
      maxLength: 254,
      description: 'E.164 phone for sms, whatsapp and ivr; an email address for email.',
    }),
    message: Type.Optional(MessageText),
    subject: Type.Optional(Subject),
    template_id: Type.Optional(TemplateId),
    media_url: Type.Optional(MediaUrl),
    channel_account_id: Type.Optional(ChannelAccountId),
  },
  { additionalProperties: false },
);

const CarriedBy = {
  channel_account_id: Type.Union([Ref('cha'), Type.Null()], {
    description: "The channel account that carries it (`cha_<n>`); null for the deployment's provider.",
  }),
  provider: Type.Union([Type.String(), Type.Null()], {
    description: `The provider that took it (${providerNames.join(', ')}); null before.`,
  }),
  provider_message_id: Type.Union([Type.String(), Type.Null()], {
    description: "The provider's own id for it, once it has one.",
  }),
};

export const SendResult = Type.Object(
  {
    id: Ref('msg'),
    status: MessageStatusSchema,
    channel: ChannelSchema,
    to: Type.String(),
    ...CarriedBy,
  },
  { title: 'SendResult' },
);

export const Recipients = Type.Array(Type.String({ minLength: 1, maxLength: 254 }), {
  minItems: 1,
  description: 'Phones (E.164) or email addresses; deduplicated; at most BROADCAST_MAX_RECIPIENTS.',
});

export const BroadcastBody = Type.Object(
  {
    channel: ChannelSchema,
    message: Type.Optional(MessageText),
    recipients: Type.Optional(Recipients),
    segment_id: Type.Optional(SegmentId),
    subject: Type.Optional(Subject),
    template_id: Type.Optional(TemplateId),
    media_url: Type.Optional(MediaUrl),
    channel_account_id: Type.Optional(ChannelAccountId),
  },
  { additionalProperties: false },
);

export const BroadcastResult = Type.Object(
  {
    campaign_id: Ref('camp'),
    total_recipients: Type.Integer({
      description:
        'Explicit recipients (deduplicated) plus the segment voters with an address for the channel; a phone shared by several voters gets one message, and the campaign is trued up (and refunded) when its outbox is filled.',
    }),
    status: Type.Literal('queued'),
  },
  { title: 'BroadcastResult' },
);

export const MessageErrorCodeSchema = Type.Enum([...messageErrorCodes], {
  title: 'MessageErrorCode',
  description:
    'Why a failed message failed: `cancelled` (its campaign was cancelled before it went out), ' +
    '`invalid_recipient` (the provider says the address cannot receive messages), `provider_rejected` ' +
    '(the provider refused the message), `undeliverable` (the provider reported a failure, or could not be ' +
    'reached after every retry), `opted_out` (the recipient opted out), `silence_period` (held back by the ' +
    "silence period before polling), `dnd` (the number is on India's do-not-disturb registry), `dlt_rejected` " +
    '(the text or ids did not match a registered DLT template), `outside_session` (WhatsApp free text outside the ' +
    '24-hour window), `rate_limited` (the provider refused for throughput, after retries), `auth_failed` (the ' +
    "channel account's credentials were refused; the account is switched off), `no_consent` (PRIVACY_REQUIRE_CONSENT: " +
    'a broadcast, campaign or survey message to a voter whose consent is not `given`).',
});

export const HistoryQuery = Type.Object({
  ...PageQuery.properties,
  channel: Type.Optional(ChannelSchema),
  status: Type.Optional(MessageStatusSchema),
  campaign_id: Type.Optional(RefInput('camp', 'Only the messages of this campaign (`camp_<n>`).')),
  to: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 254,
      description: 'Only messages to this recipient: a phone (read as E.164) or an email address.',
    }),
  ),
  voter_id: Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: Number.MAX_SAFE_INTEGER,
      description: "Only messages to this voter's phone or email.",
    }),
  ),
  date_from: Type.Optional(
    DateOrDateTime('ISO 8601 date (from its start) or date-time with its zone, inclusive.'),
  ),
  date_to: Type.Optional(DateOrDateTime('ISO 8601 date (to its end) or date-time with its zone, inclusive.')),
});

export const FailuresQuery = Type.Object({
  since: Type.Optional(DateOrDateTime('ISO 8601 date or date-time with its zone (default: 24 hours ago).')),
  until: Type.Optional(DateOrDateTime('ISO 8601 date or date-time with its zone (default: now).')),
  campaign_id: Type.Optional(RefInput('camp')),
});

export const FailureCounts = Type.Array(
  Type.Object(
    {
      error_code: Type.String(),
      count: Type.Integer(),
      kind: Type.Union([Type.Literal('stopped'), Type.Literal('failed')], {
        description:
          "`stopped`: the office's own rules stopped them (opted_out, silence_period, cancelled, quiet_hours, no_consent); `failed`: a provider or an address failed them.",
      }),
    },
    { title: 'FailureCount' },
  ),
  { description: 'Failed messages by error code, most first, each marked stopped or failed.' },
);

export const MessageItem = Type.Object(
  {
    id: Ref('msg'),
    channel: ChannelSchema,
    to: Type.String(),
    message: Type.String(),
    status: MessageStatusSchema,
    error_code: Type.Union([MessageErrorCodeSchema, Type.Null()], {
      description: 'Why it failed (see MessageErrorCode); null unless `failed`.',
    }),
    error_message: Type.Union([Type.String(), Type.Null()], {
      description:
        'The failure in words; on a `sent` message, what the provider said short of a final word (e.g. no answer came). Null otherwise.',
    }),
    sent_at: Type.Union([Timestamp, Type.Null()], {
      description: 'When a provider accepted it; null for a message that never went out.',
    }),
    created_at: Timestamp,
    updated_at: Timestamp,
    campaign_id: Type.Union([Ref('camp'), Type.Null()], {
      description: '`camp_<n>` for a message of a campaign or broadcast; null for a single send.',
    }),
    ...CarriedBy,
  },
  { title: 'Message' },
);

export const MessageParams = Type.Object({
  id: RefInput('msg'),
});
