import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { authOf } from '../../http/guard.ts';
import { Page, PageQuery, Success } from '../../http/schemas.ts';
import { actorOf } from '../audit/audit.repository.ts';
import { Campaign, CampaignParams, CreateCampaignBody } from './campaigns.schemas.ts';
import type { CampaignsService } from './campaigns.service.ts';

export const campaignsRoutes: FastifyPluginAsyncTypebox<{ campaigns: CampaignsService }> = async (
  app,
  { campaigns },
) => {
  const tags = ['Campaigns'];
  const config = { permission: 'campaigns:manage' as const };

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
        params: CampaignParams,
        response: { 200: Success(Campaign) },
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
};
