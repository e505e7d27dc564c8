import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { authOf } from '../../http/guard.ts';
import { Page, Success } from '../../http/schemas.ts';
import { actorOf } from '../audit/audit.repository.ts';
import type { CampaignsService } from '../campaigns/campaigns.service.ts';
import { answerOnce, IdempotencyHeaders } from '../idempotency/idempotency.routes.ts';
import type { IdempotencyService } from '../idempotency/idempotency.service.ts';
import {
  BroadcastBody,
  BroadcastResult,
  FailureCounts,
  FailuresQuery,
  HistoryQuery,
  MessageItem,
  MessageParams,
  SendBody,
  SendResult,
} from './messages.schemas.ts';
import type { MessagesService } from './messages.service.ts';

export interface MessagesRoutesOptions {
  messages: MessagesService;
  campaigns: CampaignsService;
  idempotency: IdempotencyService;
}

const tags = ['Messaging'];

export const messagesRoutes: FastifyPluginAsyncTypebox<MessagesRoutesOptions> = async (app, deps) => {
  for (const routes of [messageSendingRoutes, messageReadingRoutes]) await routes(app, deps);
};

const messageSendingRoutes: FastifyPluginAsyncTypebox<MessagesRoutesOptions> = async (
  app,
  { messages, campaigns, idempotency },
) => {
  app.post(
    '/messages/send',
    {
      config: { permission: 'messages:send' },
      schema: {
        tags,
        summary: 'Send one message now',
        description:
          'Reserves the credits (SMS per segment: GSM-7 160/153, otherwise 70/67; WhatsApp and email 1; IVR free), ' +
          'hands the message to the channel provider within the request and answers `sent`. A provider refusal is ' +
          '502 `provider_error`: the message is kept as `failed` and refunded. Not enough credits: 402 ' +
          '`insufficient_credits`, nothing sent. Send an `Idempotency-Key` to make retries safe.',
        headers: IdempotencyHeaders,
        body: SendBody,
        response: { 201: Success(SendResult) },
      },
    },
    (request, reply) =>
      answerOnce(idempotency, request, reply, '/messages/send', 201, 'Message sent.', (workspaceId) =>
        messages.send(workspaceId, request.body),
      ),
  );

  app.post(
    '/messages/broadcast',
    {
      config: { permission: 'messages:send' },
      schema: {
        tags,
        summary: 'Send one message to many recipients (a campaign sent at once)',
        description:
          '`recipients` (deduplicated, each valid for the channel, at most BROADCAST_MAX_RECIPIENTS) and/or ' +
          '`segment_id` (its voters are evaluated now; voters without an address for the channel are skipped). ' +
          'Creates a campaign, reserves the credits of every recipient at once (402 otherwise) and answers 202 ' +
          '`queued`; the delivery worker sends. Follow it with GET /api/campaigns/{campaign_id}.',
        headers: IdempotencyHeaders,
        body: BroadcastBody,
        response: { 202: Success(BroadcastResult) },
      },
    },
    (request, reply) =>
      answerOnce(
        idempotency,
        request,
        reply,
        '/messages/broadcast',
        202,
        'Broadcast queued.',
        (workspaceId) => campaigns.broadcast(workspaceId, request.body, actorOf(request)),
      ),
  );
};

const messageReadingRoutes: FastifyPluginAsyncTypebox<MessagesRoutesOptions> = async (app, { messages }) => {
  app.get(
    '/messages/history',
    {
      config: { permission: 'messages:read' },
      schema: {
        tags,
        summary: "Your workspace's messages, newest first",
        description:
          'Filters: `channel`, `status`, `campaign_id`, `to` (a phone, read as E.164, or an email address), `voter_id` ' +
          "(the voter's phone and email), and " +
          '`date_from` / `date_to` (ISO 8601 dates or date-times, inclusive; a date covers its whole UTC day) on ' +
          'when the message was created. A failed message says why in `error_code` and `error_message`.',
        querystring: HistoryQuery,
        response: { 200: Success(Page(MessageItem)) },
      },
    },
    async (request) => {
      return {
        success: true as const,
        data: await messages.history(authOf(request).workspaceId, request.query),
      };
    },
  );

  app.get(
    '/messages/failures',
    {
      config: { permission: 'messages:read' },
      schema: {
        tags,
        summary: 'Failed messages by error code over a window (default the last 24 hours)',
        description:
          '`since` and `until` (ISO 8601 dates or date-times) bound when the messages failed; `campaign_id` takes one campaign.',
        querystring: FailuresQuery,
        response: { 200: Success(FailureCounts) },
      },
    },
    async (request) => ({
      success: true as const,
      data: await messages.failures(authOf(request).workspaceId, request.query),
    }),
  );

  app.get(
    '/messages/:id',
    {
      config: { permission: 'messages:read' },
      schema: {
        tags,
        summary: 'One message, with why it failed if it did',
        params: MessageParams,
        response: { 200: Success(MessageItem) },
      },
    },
    async (request) => {
      return {
        success: true as const,
        data: await messages.get(authOf(request).workspaceId, request.params.id),
      };
    },
  );
};
