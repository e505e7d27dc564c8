import { Type } from 'typebox';
import { fieldsOfSchema } from '../../providers/adapter.ts';
import { adapters, providerNames } from '../../providers/registry.ts';
import { PageQuery, Timestamp, RefInput, Ref } from '../../http/schemas.ts';
import { ChannelSchema } from '../messages/messages.schemas.ts';

const ProviderSchema = Type.Enum([...providerNames], {
  description: adapters.map((a) => `${a.name} (${a.label}: ${a.channels.join(', ')})`).join('; ') + '.',
});

/** Each provider's fields as `{ a, b? }` (optional ones marked), for the descriptions below. */
const shapeOf = (schema: (typeof adapters)[number]['settings']) =>
  `\`{ ${fieldsOfSchema(schema)
    .map(([name, , required]) => (required ? name : `${name}?`))
    .join(', ')} }\``;
const perProvider = (part: 'settings' | 'credentials') =>
  adapters
    .filter((a) => fieldsOfSchema(a[part]).length > 0)
    .map((a) => `${a.name} ${shapeOf(a[part])}`)
    .join('; ');

const Channels = Type.Array(ChannelSchema, { maxItems: 4, uniqueItems: true });

const Settings = Type.Record(
  Type.String({ maxLength: 40 }),
  Type.Union([Type.String({ maxLength: 500 }), Type.Integer(), Type.Boolean()]),
  {
    description:
      `The provider's non-secret fields: ${perProvider('settings')}; others \`{}\`. Each provider's schema, with ` +
      'what each channel needs, is in GET /api/channel-accounts/providers. A PATCH merges the keys it gives into ' +
      "the account's.",
    maxProperties: 20,
  },
);

const Credentials = Type.Record(Type.String({ maxLength: 40 }), Type.String({ maxLength: 2000 }), {
  description:
    `Secrets, written only (never returned; \`credentials_set\` lists the keys set): ${perProvider('credentials')}. ` +
    'Encrypted at rest with the service key; tried with the provider only when a message or a test send uses ' +
    'them. A PATCH replaces the keys it gives.',
  maxProperties: 10,
});

const Rate = Type.Union([Type.Integer({ minimum: 1, maximum: 100_000 }), Type.Null()], {
  description:
    'Messages per second through this account, across every API and worker process (through Redis where REDIS_URL is set); null: no limit of ours.',
});

export const ChannelAccountItem = Type.Object(
  {
    id: Ref('cha'),
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
    templates_only: Type.Boolean({
      description:
        'true where the account sends templates only on its SMS or WhatsApp channel: a DLT gateway that sends ' +
        'its registered templates only, any SMS while DLT_ENFORCE is on, WhatsApp (outside the 24-hour window a ' +
        'session opens only with an approved template). A reply there is `{ template_id, variables }`.',
    }),
    disabled_reason: Type.Union([Type.String(), Type.Null()], {
      description: 'Why the account is switched off; null while active.',
    }),
    callback_urls: Type.Record(Type.String(), Type.String(), {
      description:
        "Where the provider sends delivery reports and replies, each carrying the account's secret token: " +
        adapters
          .filter((a) => a.callbacks.length > 0)
          .map((a) => `${a.name} \`{ ${a.callbacks.join(', ')} }\``)
          .join('; ') +
        '. PATCH `{ rotate_callback_token: true }` changes the token (the old URLs stop working).',
    }),
    verify_token: Type.Optional(
      Type.String({
        description: `The token to give the provider with the webhook URL (${adapters
          .filter((a) => a.verifyToken)
          .map((a) => a.name)
          .join(', ')} only).`,
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
  id: RefInput('cha'),
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
          'A `tpl_<n>` template of the channel (required through a provider that sends only its own templates: one with its provider_template_ids).',
      }),
    ),
  },
  { additionalProperties: false },
);

export const TestSendResult = Type.Object(
  {
    id: Ref('msg', '`msg_<n>`: the test message, in the message history.'),
    channel: ChannelSchema,
    to: Type.String(),
    provider: Type.String(),
    provider_message_id: Type.Union([Type.String(), Type.Null()], {
      description: "The provider's id for it.",
    }),
  },
  { title: 'ChannelAccountTestResult' },
);

const ProviderField = Type.Object(
  {
    name: Type.String(),
    type: Type.Enum(['text', 'integer', 'boolean'], { description: 'text, a whole number, or true/false.' }),
    required: Type.Boolean({ description: 'Required on every account of the provider.' }),
    required_for: Type.Array(ChannelSchema, {
      description: 'The channels that need it (an account is for them only with it).',
    }),
    description: Type.Union([Type.String(), Type.Null()]),
    label: Type.Object(
      { en: Type.String(), hi: Type.String() },
      { description: 'Its name as an office reads it, in English and Hindi (the console shows it).' },
    ),
    hint: Type.Object(
      { en: Type.Union([Type.String(), Type.Null()]), hi: Type.Union([Type.String(), Type.Null()]) },
      { description: 'What to give, in English (the description) and Hindi.' },
    ),
    max_length: Type.Optional(Type.Integer()),
    minimum: Type.Optional(Type.Integer()),
    maximum: Type.Optional(Type.Integer()),
    spaces: Type.Optional(Type.Boolean({ description: 'false: the value has no spaces.' })),
  },
  { title: 'ProviderField' },
);

export const ProviderDescription = Type.Object(
  {
    name: Type.String({ description: "The account's `provider` value." }),
    label: Type.String(),
    channels: Type.Array(ChannelSchema),
    settings: Type.Array(ProviderField, { description: 'Non-secret settings (returned on the account).' }),
    credentials: Type.Array(ProviderField, { description: 'Secrets (written only).' }),
    callbacks: Type.Array(Type.String(), {
      description: 'The kinds of its callback URLs (`callback_urls`).',
    }),
    templates: Type.Union(
      [
        Type.Object({
          sends: Type.Enum(['only', 'also'], {
            description: 'only: it sends nothing but its own templates (provider_template_ids.<name>).',
          }),
          id_label: Type.String(),
          id_label_hi: Type.String({ description: 'The same in Hindi.' }),
        }),
        Type.Null(),
      ],
      { description: 'Whether it keeps templates of its own, and what their id there is.' },
    ),
    verify_token: Type.Boolean({ description: 'Its accounts get a `verify_token` for the webhook.' }),
    delivery_reports: Type.Boolean({
      description: "false: it reports no delivery (a mail server): `sent` is a message's last status.",
    }),
  },
  { title: 'ProviderDescription' },
);

/** What `GET /api/channel-accounts/providers` says of each provider: its adapter's declarations. */
export function describeProviders() {
  const fields = (adapter: (typeof adapters)[number], part: 'settings' | 'credentials') =>
    fieldsOfSchema(adapter[part]).map(([name, field, required]) => ({
      name,
      type:
        field.type === 'integer'
          ? ('integer' as const)
          : field.type === 'boolean'
            ? ('boolean' as const)
            : ('text' as const),
      required,
      required_for: adapter.channels.filter((c) => adapter.channelSettings?.[c]?.includes(name)),
      description: (field as { description?: string }).description ?? null,
      label: adapter.fieldText?.[name]?.label ?? { en: name, hi: name },
      hint: {
        en: (field as { description?: string }).description ?? null,
        hi: adapter.fieldText?.[name]?.hint_hi ?? null,
      },
      ...(field.maxLength !== undefined ? { max_length: field.maxLength } : {}),
      ...(field.minimum !== undefined ? { minimum: field.minimum } : {}),
      ...(field.maximum !== undefined ? { maximum: field.maximum } : {}),
      ...(field.type === 'string' ? { spaces: field.pattern === undefined } : {}),
    }));
  return adapters.map((adapter) => ({
    name: adapter.name,
    label: adapter.label,
    channels: [...adapter.channels],
    settings: fields(adapter, 'settings'),
    credentials: fields(adapter, 'credentials'),
    callbacks: [...adapter.callbacks],
    templates: adapter.templates
      ? {
          sends: adapter.templates.sends,
          id_label: adapter.templates.idLabel,
          id_label_hi: adapter.templates.idLabelHi ?? adapter.templates.idLabel,
        }
      : null,
    verify_token: adapter.verifyToken === true,
    delivery_reports: adapter.noDeliveryReports !== true,
  }));
}

export const ChannelLogEntry = Type.Object(
  {
    id: Type.Integer(),
    at: Type.String({ format: 'date-time' }),
    direction: Type.Union([Type.Literal('out'), Type.Literal('in')], {
      description: '`out`: a call we made to the provider; `in`: a call the provider made to us.',
    }),
    kind: Type.Union(
      [
        Type.Literal('send'),
        Type.Literal('status'),
        Type.Literal('inbound'),
        Type.Literal('test'),
        Type.Literal('survey'),
      ],
      { description: 'What the exchange was: a send, a status report, a reply, a test send, a survey step.' },
    ),
    method: Type.String(),
    url: Type.String({ description: 'Secret query values and our callback token are `***`.' }),
    status: Type.Union([Type.Integer(), Type.Null()], { description: 'The HTTP status; null: no answer.' }),
    duration_ms: Type.Union([Type.Integer(), Type.Null()]),
    request: Type.String({
      description:
        'The body (or query) sent, cut at 4 KB and redacted: credentials, tokens and signatures `***`, phone numbers and email addresses with their last 4 characters, message texts and template values `[n characters]`.',
    }),
    response: Type.String({ description: 'The answer, cut at 4 KB and redacted the same way.' }),
    message_id: Type.Union([Ref('msg'), Type.Null()]),
    error_code: Type.Union([Type.String(), Type.Null()], {
      description: "The message's error_code when the exchange refused it.",
    }),
  },
  { title: 'ChannelLogEntry' },
);

export const ChannelLogQuery = Type.Object({ ...PageQuery.properties });
