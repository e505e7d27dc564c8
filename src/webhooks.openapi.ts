import { type TSchema, Type } from 'typebox';
import { Timestamp, Ref } from './http/schemas.ts';
import { Conversation } from './modules/conversations/conversations.schemas.ts';
import { Grievance } from './modules/grievances/grievances.schemas.ts';
import { MessageItem } from './modules/messages/messages.schemas.ts';
import { InboundItem } from './modules/inbound/inbound.schemas.ts';
import { ProcessedPayment } from './modules/payments/payments.schemas.ts';
import { SurveyResponse } from './modules/surveys/surveys.schemas.ts';
import { PrivacyRequest } from './modules/privacy/privacy.schemas.ts';

/** The message as GET /api/messages/{id} shows it (with error_code and error_message once failed). */
const MessageData = MessageItem;

const PingData = Type.Object({ webhook_id: Type.Integer(), message: Type.String() });

const headers = [
  {
    name: 'webhook-id',
    in: 'header' as const,
    required: true,
    description: '`evt_<n>`: the same on every attempt and every endpoint; deduplicate on it.',
    schema: { type: 'string' },
  },
  {
    name: 'webhook-timestamp',
    in: 'header' as const,
    required: true,
    description: 'Unix seconds of the attempt.',
    schema: { type: 'string' },
  },
  {
    name: 'webhook-signature',
    in: 'header' as const,
    required: true,
    description:
      '`v1,<base64 HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<body>">` keyed with the base64-decoded secret after `whsec_`.',
    schema: { type: 'string' },
  },
];

function event(type: string, data: TSchema, when: string) {
  return {
    post: {
      tags: ['Webhooks'],
      summary: when,
      parameters: headers,
      requestBody: {
        required: true,
        content: {
          'application/json': {
            schema: Type.Object({ type: Type.Literal(type), timestamp: Timestamp, data }),
          },
        },
      },
      responses: {
        '2XX': { description: 'Received. Anything else (or no answer in 10 s) is retried.' },
        '410': { description: 'Gone: the endpoint is disabled and receives nothing more.' },
      },
    },
  };
}

/** The OpenAPI 3.1 `webhooks` object: what each event delivers to a registered endpoint. */
export const webhookEventsOpenApi = {
  'message.delivered': event('message.delivered', MessageData, 'A message reached `delivered`'),
  'message.failed': event('message.failed', MessageData, 'A message reached `failed`'),
  'grievance.created': event('grievance.created', Grievance, 'A grievance was recorded'),
  'grievance.resolved': event('grievance.resolved', Grievance, 'A grievance moved to `resolved`'),
  'payment.processed': event('payment.processed', ProcessedPayment, 'A payment added credits'),
  'message.received': event(
    'message.received',
    InboundItem,
    "A reply came in (POST /api/inbound, a provider's inbound callback)",
  ),
  'channel_account.failed': event(
    'channel_account.failed',
    Type.Object({
      id: Ref('cha'),
      name: Type.String(),
      provider: Type.String(),
      error_code: Type.Literal('auth_failed'),
      error_message: Type.String({ description: "The provider's own code and text." }),
      failed_at: Timestamp,
    }),
    "A provider refused a channel account's credentials; the account is switched off",
  ),
  'conversation.created': event('conversation.created', Conversation, 'A contact wrote for the first time'),
  'conversation.assigned': event(
    'conversation.assigned',
    Conversation,
    'A conversation was assigned (on arrival by coverage, or by PATCH)',
  ),
  'survey.response.completed': event(
    'survey.response.completed',
    SurveyResponse,
    'A survey response answered every question (docs/surveys.md)',
  ),
  'privacy_request.due_soon': event(
    'privacy_request.due_soon',
    PrivacyRequest,
    'A data-principal request still open 7 days before its due_at (docs/privacy.md)',
  ),
  ping: event('ping', PingData, 'POST /api/webhooks/{id}/test'),
};
