import { Type } from 'typebox';
import { PageQuery, RowId, Timestamp, Ref } from '../../http/schemas.ts';
import { webhookEventTypes } from './webhooks.events.ts';

const NullableString = Type.Union([Type.String(), Type.Null()]);

const eventList = (more = '') =>
  Type.Array(Type.Union(webhookEventTypes.map((type) => Type.Literal(type))), {
    minItems: 1,
    uniqueItems: true,
    description: `Event types to receive: any of ${webhookEventTypes.join(', ')}.${more}`,
  });

const fields = {
  url: Type.String({
    minLength: 1,
    maxLength: 2048,
    format: 'uri',
    description:
      'https (or http) URL. Its host must not be or resolve to a loopback, private, link-local, unique-local or IPv4-mapped address (unless WEBHOOK_ALLOW_PRIVATE_URLS=true).',
  }),
  description: Type.Union([Type.String({ maxLength: 500 }), Type.Null()]),
};

export const CreateWebhookBody = Type.Object(
  {
    url: fields.url,
    events: Type.Optional(eventList(' Default: all.')),
    description: Type.Optional(fields.description),
  },
  { additionalProperties: false },
);

export const UpdateWebhookBody = Type.Object(
  {
    url: Type.Optional(fields.url),
    events: Type.Optional(eventList()),
    description: Type.Optional(fields.description),
    active: Type.Optional(
      Type.Boolean({
        description: 'false stops deliveries (they wait, pending); true resumes them, also after a 410.',
      }),
    ),
  },
  { additionalProperties: false, minProperties: 1 },
);

export const Webhook = Type.Object(
  {
    id: Type.Integer(),
    url: Type.String({ format: 'uri' }),
    events: Type.Array(Type.String()),
    description: NullableString,
    active: Type.Boolean(),
    disabled_reason: Type.Union([Type.String(), Type.Null()], {
      description: 'Why the endpoint stopped receiving: a 410 answer, or turned off through PATCH.',
    }),
    paused_until: Type.Union([Timestamp, Type.Null()], {
      description:
        'Set while the circuit breaker holds the endpoint: after 3 attempts in a row with no answer within ' +
        'WEBHOOK_TIMEOUT_SECONDS its deliveries wait (retries unspent) until then; 30 s, doubling with each ' +
        'further timeout up to 30 min. Any answer clears it; so does PATCH active=true.',
    }),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { title: 'Webhook' },
);

export const CreatedWebhook = Type.Object(
  {
    ...Webhook.properties,
    secret: Type.String({
      description:
        'The signing secret, `whsec_<base64>`. Shown only in this answer: store it now. Verify deliveries with it (Standard Webhooks).',
    }),
  },
  { title: 'CreatedWebhook' },
);

export const Delivery = Type.Object(
  {
    id: Type.Integer(),
    event_id: Ref('evt', 'The `webhook-id` header of the delivery, `evt_<n>`.'),
    event_type: Type.String(),
    status: Type.Union([Type.Literal('pending'), Type.Literal('succeeded'), Type.Literal('failed')]),
    attempts: Type.Integer(),
    last_status_code: Type.Union([Type.Integer(), Type.Null()]),
    last_error: NullableString,
    last_attempt_at: Type.Union([Timestamp, Type.Null()]),
    next_attempt_at: Type.Union([Timestamp, Type.Null()], { description: 'When pending: the next attempt.' }),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { title: 'WebhookDelivery' },
);

export const DeliveryParams = Type.Object({
  id: RowId,
  delivery_id: RowId,
});

export const ListQuery = PageQuery;

export const TestResult = Type.Object(
  {
    event_id: Ref('evt'),
    delivery_id: Type.Integer(),
    status: Type.Literal('pending'),
  },
  { title: 'WebhookTestResult' },
);
