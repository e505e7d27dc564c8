import { Type } from 'typebox';
import { accountProviders } from '../../domain.ts';
import { PageQuery, Timestamp } from '../../http/schemas.ts';
import { ChannelSchema } from '../messages/messages.schemas.ts';

const ProviderSchema = Type.Enum([...accountProviders], {
  description:
    'msg91 (sms), exotel (sms, ivr), whatsapp_cloud (whatsapp), twilio (sms, whatsapp, ivr), smtp (email), sandbox (all).',
});

const Channels = Type.Array(ChannelSchema, { maxItems: 4, uniqueItems: true });

const Settings = Type.Record(
  Type.String({ maxLength: 40 }),
  Type.Union([Type.String({ maxLength: 500 }), Type.Integer(), Type.Boolean()]),
  {
    description:
      "The provider's non-secret fields: msg91 `{ sender }`; exotel `{ sid, sender, caller_id?, app_id?, dlt_entity_id? }` " +
      '(caller_id and app_id for ivr); whatsapp_cloud `{ phone_number_id, waba_id? }`; twilio `{ account_sid, sms_from?, ' +
      'whatsapp_from?, voice_from? }` (the sender of each channel the account is for); smtp `{ host, port?, secure?, from }`; ' +
      "sandbox `{}`. A PATCH merges the keys it gives into the account's.",
    maxProperties: 20,
  },
);

const Credentials = Type.Record(Type.String({ maxLength: 40 }), Type.String({ maxLength: 2000 }), {
  description:
    'Secrets, written only (never returned; `credentials_set` lists the keys set): msg91 `{ authkey }`; exotel ' +
    '`{ api_key, api_token }`; whatsapp_cloud `{ access_token, app_secret }`; twilio `{ auth_token }`; smtp ' +
    '`{ username?, password? }`. Encrypted at rest with the service key; tried with the provider only when a message ' +
    'or a test send uses them. A PATCH replaces the keys it gives.',
  maxProperties: 10,
});

const Rate = Type.Union([Type.Integer({ minimum: 1, maximum: 100_000 }), Type.Null()], {
  description:
    'Messages per second through this account, across every API and worker process (through Redis where REDIS_URL is set); null: no limit of ours.',
});

export const ChannelAccountItem = Type.Object(
  {
    id: Type.String({ description: '`cha_<n>`' }),
    name: Type.String(),
    provider: ProviderSchema,
    channels: Channels,
    settings: Type.Record(Type.String(), Type.Union([Type.String(), Type.Integer(), Type.Boolean()])),
    credentials_set: Type.Array(Type.String(), { description: 'The names of the credentials that are set.' }),
    default_for: Type.Array(ChannelSchema, {
      description: "The channels for which this is the workspace's default account.",
    }),
    send_rate_per_second: Type.Union([Type.Integer(), Type.Null()]),
    active: Type.Boolean({
      description: 'false once switched off (PATCH active=false, or the provider refused its credentials).',
    }),
    disabled_reason: Type.Union([Type.String(), Type.Null()], {
      description: 'Why the account is switched off; null while active.',
    }),
    callback_urls: Type.Record(Type.String(), Type.String(), {
      description:
        "Where the provider sends delivery reports and replies, each carrying the account's secret token: msg91 " +
        '`{ delivery }`; exotel `{ delivery, call_status, greeting }`; whatsapp_cloud `{ webhook }`; twilio `{ delivery }`. ' +
        'PATCH `{ rotate_callback_token: true }` changes the token (the old URLs stop working).',
    }),
    verify_token: Type.Optional(
      Type.String({
        description: 'whatsapp_cloud only: the Verify token to give Meta with the webhook URL.',
      }),
    ),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { title: 'ChannelAccount' },
);

const Name = Type.String({ minLength: 1, maxLength: 200 });

export const CreateChannelAccountBody = Type.Object(
  {
    name: Name,
    provider: ProviderSchema,
    channels: Type.Optional(
      Type.Array(ChannelSchema, {
        maxItems: 4,
        uniqueItems: true,
        description:
          'The channels the account is for (default: those of the provider that its settings allow).',
      }),
    ),
    settings: Type.Optional(Settings),
    credentials: Type.Optional(Credentials),
    default_for: Type.Optional(
      Type.Array(ChannelSchema, {
        maxItems: 4,
        uniqueItems: true,
        description:
          'Make it the default for these channels (moved from any other account of the workspace).',
      }),
    ),
    send_rate_per_second: Type.Optional(Rate),
    active: Type.Optional(Type.Boolean({ description: 'Default true.' })),
  },
  { additionalProperties: false },
);

export const UpdateChannelAccountBody = Type.Object(
  {
    name: Type.Optional(Name),
    channels: Type.Optional(Channels),
    settings: Type.Optional(Settings),
    credentials: Type.Optional(Credentials),
    default_for: Type.Optional(Type.Array(ChannelSchema, { maxItems: 4, uniqueItems: true })),
    send_rate_per_second: Type.Optional(Rate),
    active: Type.Optional(
      Type.Boolean({ description: 'false switches the account off; true switches it back on.' }),
    ),
    rotate_callback_token: Type.Optional(
      Type.Boolean({
        description: 'true: a new secret token in callback_urls (configure the new URLs at the provider).',
      }),
    ),
  },
  { additionalProperties: false, minProperties: 1 },
);

export const ChannelAccountParams = Type.Object({
  id: Type.String({ minLength: 1, maxLength: 40, description: '`cha_<n>`' }),
});

export const ListChannelAccountsQuery = Type.Object({ ...PageQuery.properties });

export const TestSendBody = Type.Object(
  {
    to: Type.String({
      minLength: 1,
      maxLength: 254,
      description: 'E.164 phone (sms, whatsapp, ivr) or an email address (email).',
    }),
    channel: Type.Optional(ChannelSchema),
    template_id: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 40,
        description:
          'A `tpl_<n>` template of the channel (required through MSG91: one with provider_template_ids.msg91).',
      }),
    ),
  },
  { additionalProperties: false },
);

export const TestSendResult = Type.Object(
  {
    id: Type.String({ description: '`msg_<n>`: the test message, in the message history.' }),
    channel: ChannelSchema,
    to: Type.String(),
    provider: Type.String(),
    provider_message_id: Type.Union([Type.String(), Type.Null()], {
      description: "The provider's id for it.",
    }),
  },
  { title: 'ChannelAccountTestResult' },
);
