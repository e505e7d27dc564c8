import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { authOf } from '../../http/guard.ts';
import { ChannelSchema } from '../messages/messages.schemas.ts';
import { Done, Page, Success } from '../../http/schemas.ts';
import {
  CreateTemplateBody,
  ListTemplatesQuery,
  TemplateItem,
  TemplateParams,
  UpdateTemplateBody,
} from './templates.schemas.ts';
import type { TemplatesService } from './templates.service.ts';

interface TemplatesRouteDeps {
  templates: TemplatesService;
}

const tags = ['Consent'];

const config = { permission: 'consent:manage' as const };

export const templatesRoutes: FastifyPluginAsyncTypebox<TemplatesRouteDeps> = async (app, deps) => {
  for (const routes of [templateCreationRoutes, templateEditingRoutes]) await routes(app, deps);
};

const templateCreationRoutes: FastifyPluginAsyncTypebox<TemplatesRouteDeps> = async (app, { templates }) => {
  app.post(
    '/templates',
    {
      config,
      schema: {
        tags,
        summary: 'Create a message template',
        description:
          'Send, broadcast and campaigns take `template_id: "tpl_<n>"` instead of `message`: each recipient gets the ' +
          'body rendered from their voter record (variables of a recipient who is not a voter render empty), and ' +
          'credits are counted on the rendered text.',
        body: CreateTemplateBody,
        response: { 201: Success(TemplateItem) },
      },
    },
    async (request, reply) => {
      const data = await templates.create(authOf(request).workspaceId, request.body);
      return reply.code(201).send({ success: true, message: 'Template created.', data });
    },
  );

  app.post(
    '/templates/render',
    {
      config: { permission: 'messages:send' },
      schema: {
        tags,
        summary: 'The text a template (or a body) renders to for a voter, with its SMS parts and credits',
        description:
          'Give `template_id` or `body` (with `channel`, default sms), and optionally `voter_id`. A variable may give a ' +
          'fallback for an empty value: `{{first_name|friend}}`. Without a voter, variables render empty (or their fallback).',
        body: Type.Object(
          {
            template_id: Type.Optional(Type.String({ maxLength: 40 })),
            body: Type.Optional(Type.String({ maxLength: 5000 })),
            voter_id: Type.Optional(Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER })),
            channel: Type.Optional(ChannelSchema),
          },
          { additionalProperties: false },
        ),
        response: {
          200: Success(
            Type.Object(
              {
                channel: ChannelSchema,
                text: Type.String(),
                sms_parts: Type.Union([Type.Integer(), Type.Null()]),
                encoding: Type.Union([Type.String(), Type.Null()], { description: 'gsm7 or ucs2 (SMS).' }),
                credits: Type.Integer(),
              },
              { title: 'RenderedTemplate' },
            ),
          ),
        },
      },
    },
    async (request) => ({
      success: true as const,
      data: await templates.render(authOf(request).workspaceId, request.body),
    }),
  );
};

const templateEditingRoutes: FastifyPluginAsyncTypebox<TemplatesRouteDeps> = async (app, { templates }) => {
  app.get(
    '/templates',
    {
      config,
      schema: {
        tags,
        summary: 'List templates, newest first',
        querystring: ListTemplatesQuery,
        response: { 200: Success(Page(TemplateItem)) },
      },
    },
    async (request) => ({
      success: true as const,
      data: await templates.list(authOf(request).workspaceId, request.query),
    }),
  );

  app.get(
    '/templates/:id',
    {
      config,
      schema: {
        tags,
        summary: 'Read a template',
        params: TemplateParams,
        response: { 200: Success(TemplateItem) },
      },
    },
    async (request) => ({
      success: true as const,
      data: await templates.get(authOf(request).workspaceId, request.params.id),
    }),
  );

  app.patch(
    '/templates/:id',
    {
      config,
      schema: {
        tags,
        summary: 'Change a template (messages already queued keep the text they had)',
        params: TemplateParams,
        body: UpdateTemplateBody,
        response: { 200: Success(TemplateItem) },
      },
    },
    async (request) => ({
      success: true as const,
      message: 'Template updated.',
      data: await templates.update(authOf(request).workspaceId, request.params.id, request.body),
    }),
  );

  app.delete(
    '/templates/:id',
    {
      config,
      schema: {
        tags,
        summary: 'Delete a template',
        params: TemplateParams,
        response: { 200: Done },
      },
    },
    async (request) => {
      await templates.remove(authOf(request).workspaceId, request.params.id);
      return { success: true as const, message: 'Template deleted.' };
    },
  );
};
