import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { authOf } from '../../http/guard.ts';
import { Done, IdParams, Page, PageQuery, Success } from '../../http/schemas.ts';
import {
  CreateWebhookBody,
  CreatedWebhook,
  Delivery,
  DeliveryParams,
  TestResult,
  UpdateWebhookBody,
  Webhook,
} from './webhooks.schemas.ts';
import { actorOf } from '../audit/audit.repository.ts';
import type { WebhooksService } from './webhooks.service.ts';

interface WebhooksRouteDeps {
  webhooks: WebhooksService;
}

const tags = ['Webhooks'];

const config = { permission: 'webhooks:manage' as const };

export const webhooksRoutes: FastifyPluginAsyncTypebox<WebhooksRouteDeps> = async (app, deps) => {
  for (const routes of [webhookEditingRoutes, webhookDeliveryRoutes, webhookTestRoutes])
    await routes(app, deps);
};

const webhookEditingRoutes: FastifyPluginAsyncTypebox<WebhooksRouteDeps> = async (app, { webhooks }) => {
  app.post(
    '/webhooks',
    {
      config,
      schema: {
        tags,
        summary: 'Register an endpoint; the answer shows its signing secret once',
        body: CreateWebhookBody,
        response: { 201: Success(CreatedWebhook) },
      },
    },
    async (request, reply) => {
      const data = await webhooks.create(authOf(request).workspaceId, request.body, actorOf(request));
      return reply.code(201).send({
        success: true,
        message: 'Webhook created. Store the secret now: it is not shown again.',
        data,
      });
    },
  );

  app.get(
    '/webhooks',
    {
      config,
      schema: {
        tags,
        summary: "List the workspace's endpoints",
        querystring: PageQuery,
        response: { 200: Success(Page(Webhook)) },
      },
    },
    async (request) => ({
      success: true as const,
      data: await webhooks.list(authOf(request).workspaceId, request.query.page, request.query.per_page),
    }),
  );

  app.get(
    '/webhooks/:id',
    {
      config,
      schema: { tags, summary: 'Read one endpoint', params: IdParams, response: { 200: Success(Webhook) } },
    },
    async (request) => ({
      success: true as const,
      data: await webhooks.get(authOf(request).workspaceId, request.params.id),
    }),
  );

  app.patch(
    '/webhooks/:id',
    {
      config,
      schema: {
        tags,
        summary: 'Change the URL, events, description, or turn the endpoint off and on',
        params: IdParams,
        body: UpdateWebhookBody,
        response: { 200: Success(Webhook) },
      },
    },
    async (request) => ({
      success: true as const,
      message: 'Webhook updated.',
      data: await webhooks.update(
        authOf(request).workspaceId,
        request.params.id,
        request.body,
        actorOf(request),
      ),
    }),
  );
};

const webhookDeliveryRoutes: FastifyPluginAsyncTypebox<WebhooksRouteDeps> = async (app, { webhooks }) => {
  app.delete(
    '/webhooks/:id',
    {
      config,
      schema: {
        tags,
        summary: 'Delete an endpoint and its delivery log',
        params: IdParams,
        response: { 200: Done },
      },
    },
    async (request) => {
      await webhooks.remove(authOf(request).workspaceId, request.params.id, actorOf(request));
      return { success: true as const, message: 'Webhook deleted.' };
    },
  );

  app.get(
    '/webhooks/:id/deliveries',
    {
      config,
      schema: {
        tags,
        summary: 'The delivery log, newest first',
        params: IdParams,
        querystring: PageQuery,
        response: { 200: Success(Page(Delivery)) },
      },
    },
    async (request) => ({
      success: true as const,
      data: await webhooks.deliveries(
        authOf(request).workspaceId,
        request.params.id,
        request.query.page,
        request.query.per_page,
      ),
    }),
  );

  app.post(
    '/webhooks/:id/deliveries/:delivery_id/retry',
    {
      config,
      schema: {
        tags,
        summary: 'Send a delivery again now',
        description:
          'The delivery becomes pending and due now, with the same webhook-id. Its attempt count goes on: a delivery that had exhausted the schedule gets this one attempt.',
        params: DeliveryParams,
        response: { 202: Success(Delivery) },
      },
    },
    async (request, reply) => {
      const data = await webhooks.retry(
        authOf(request).workspaceId,
        request.params.id,
        request.params.delivery_id,
      );
      return reply.code(202).send({ success: true, message: 'Delivery queued.', data });
    },
  );
};

const webhookTestRoutes: FastifyPluginAsyncTypebox<WebhooksRouteDeps> = async (app, { webhooks }) => {
  app.post(
    '/webhooks/:id/test',
    {
      config,
      schema: {
        tags,
        summary: 'Send a ping event to this endpoint',
        description: 'Queues a `ping` event (`data`: `{ webhook_id, message }`) for this endpoint only.',
        params: IdParams,
        response: { 202: Success(TestResult) },
      },
    },
    async (request, reply) => {
      const data = await webhooks.test(authOf(request).workspaceId, request.params.id);
      return reply.code(202).send({ success: true, message: 'Ping queued.', data });
    },
  );
};
