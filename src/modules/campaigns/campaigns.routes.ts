import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { authOf } from '../../http/guard.ts';
import { Done, Page, PageQuery, Success } from '../../http/schemas.ts';
import { actorOf } from '../audit/audit.repository.ts';
import { MessageItem } from '../messages/messages.schemas.ts';
import {
  Campaign,
  CancelledCampaign,
  CampaignMessagesQuery,
  CampaignParams,
  CreateCampaignBody,
  UpdateCampaignBody,
} from './campaigns.schemas.ts';
import { answerOnce, IdempotencyHeaders } from '../idempotency/idempotency.routes.ts';
import type { IdempotencyService } from '../idempotency/idempotency.service.ts';
import type { CampaignsService } from './campaigns.service.ts';

interface CampaignsRouteDeps {
  campaigns: CampaignsService;
  idempotency: IdempotencyService;
}

const tags = ['Campaigns'];

const config = { permission: 'campaigns:manage' as const };

export const campaignsRoutes: FastifyPluginAsyncTypebox<CampaignsRouteDeps> = async (app, deps) => {
  for (const routes of [campaignReadingRoutes, campaignSendingRoutes, campaignFollowUpRoutes])
    await routes(app, deps);
};

const campaignReadingRoutes: FastifyPluginAsyncTypebox<CampaignsRouteDeps> = async (app, { campaigns }) => {
  app.get(
    '/campaigns',
    {
      config,
      schema: {
        tags,
        summary: 'List campaigns, newest first, with live stats',
        querystring: PageQuery,
        response: { 200: Success(Page(Campaign)) },
      },
    },
    async (request) => {
      const { page, per_page } = request.query;
      return {
        success: true as const,
        data: await campaigns.list(authOf(request).workspaceId, page, per_page),
      };
    },
  );

  app.post(
    '/campaigns',
    {
      config,
      schema: {
        tags,
        summary: 'Create a campaign: a draft, or scheduled with a future scheduled_at',
        description:
          'Recipients as for a broadcast (`recipients` and/or `segment_id`). Nothing is counted or charged until ' +
          'the campaign is sent (POST /api/campaigns/{id}/send, or at `scheduled_at`).',
        body: CreateCampaignBody,
        response: { 201: Success(Campaign) },
      },
    },
    async (request, reply) => {
      const data = await campaigns.create(authOf(request).workspaceId, request.body);
      return reply.code(201).send({ success: true, message: 'Campaign created.', data });
    },
  );

  app.get(
    '/campaigns/:id',
    {
      config,
      schema: {
        tags,
        summary: 'One campaign with live stats',
        params: CampaignParams,
        response: { 200: Success(Campaign) },
      },
    },
    async (request) => {
      return {
        success: true as const,
        data: await campaigns.get(authOf(request).workspaceId, request.params.id),
      };
    },
  );
};

const campaignSendingRoutes: FastifyPluginAsyncTypebox<CampaignsRouteDeps> = async (app, { campaigns }) => {
  app.post(
    '/campaigns/:id/send',
    {
      config,
      schema: {
        tags,
        summary: 'Send a draft or scheduled campaign now',
        description:
          'Counts the recipients, reserves all their credits at once (402 otherwise) and queues the campaign (202).',
        params: CampaignParams,
        response: { 202: Success(Campaign) },
      },
    },
    async (request, reply) => {
      const data = await campaigns.send(authOf(request).workspaceId, request.params.id, actorOf(request));
      return reply.code(202).send({ success: true, message: 'Campaign queued.', data });
    },
  );

  app.post(
    '/campaigns/:id/cancel',
    {
      config,
      schema: {
        tags,
        summary: 'Cancel a campaign: what has not gone out stops and its credits are refunded',
        description:
          'Every message not yet handed to a provider ends `failed` with `cancelled` and is refunded, those a ' +
          "worker had claimed included; only the calls in a provider's hands at that moment still go (`in_flight`).",
        params: CampaignParams,
        response: { 200: Success(CancelledCampaign) },
      },
    },
    async (request) => {
      return {
        success: true as const,
        message: 'Campaign cancelled.',
        data: await campaigns.cancel(authOf(request).workspaceId, request.params.id, actorOf(request)),
      };
    },
  );

  app.patch(
    '/campaigns/:id',
    {
      config,
      schema: {
        tags,
        summary: 'Change a draft or scheduled campaign',
        description:
          'Only a `draft` or `scheduled` campaign changes (409 `conflict` otherwise); the result is checked as a ' +
          'new campaign is. Nothing is counted or charged until it is sent.',
        params: CampaignParams,
        body: UpdateCampaignBody,
        response: { 200: Success(Campaign) },
      },
    },
    async (request) => ({
      success: true as const,
      message: 'Campaign updated.',
      data: await campaigns.update(authOf(request).workspaceId, request.params.id, request.body),
    }),
  );
};

const campaignFollowUpRoutes: FastifyPluginAsyncTypebox<CampaignsRouteDeps> = async (
  app,
  { campaigns, idempotency },
) => {
  app.delete(
    '/campaigns/:id',
    {
      config,
      schema: {
        tags,
        summary: 'Delete a draft or scheduled campaign',
        description:
          'Any other status is 409 `conflict`: a campaign that went out stays as the record of it.',
        params: CampaignParams,
        response: { 200: Done },
      },
    },
    async (request) => {
      await campaigns.remove(authOf(request).workspaceId, request.params.id);
      return { success: true as const, message: 'Campaign deleted.' };
    },
  );

  app.get(
    '/campaigns/:id/messages',
    {
      config,
      schema: {
        tags,
        summary: "A campaign's messages, newest first",
        description: 'Filter `status`. Failed messages say why in `error_code` and `error_message`.',
        params: CampaignParams,
        querystring: CampaignMessagesQuery,
        response: { 200: Success(Page(MessageItem)) },
      },
    },
    async (request) => ({
      success: true as const,
      data: await campaigns.messages(authOf(request).workspaceId, request.params.id, request.query),
    }),
  );

  app.post(
    '/campaigns/:id/retry-failed',
    {
      config,
      schema: {
        tags,
        summary: 'Send a completed or cancelled campaign again to the recipients whose messages failed',
        description:
          'Creates a new campaign (same channel and content) to the recipients whose messages failed with ' +
          '`provider_rejected` or `undeliverable` (not `invalid_recipient`, `opted_out`, `silence_period` or ' +
          '`cancelled`), reserves its credits (402 otherwise) and queues it (202); audited as `campaign.retried`. ' +
          'Another status, or nothing to retry, is 409 `conflict`. A campaign is retried once: while its retry ' +
          'exists and is not cancelled, another call is 409 naming it in `details.retry_campaign_id` (retry that ' +
          "campaign's failures instead). With `Idempotency-Key`, a repeat gets the first answer again.",
        headers: IdempotencyHeaders,
        params: CampaignParams,
        response: { 202: Success(Campaign) },
      },
    },
    (request, reply) =>
      answerOnce(
        idempotency,
        request,
        reply,
        `/campaigns/${request.params.id}/retry-failed`,
        202,
        'Retry campaign queued.',
        (workspaceId) => campaigns.retryFailed(workspaceId, request.params.id, actorOf(request)),
      ),
  );
};
