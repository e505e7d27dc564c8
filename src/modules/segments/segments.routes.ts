import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { authOf } from '../../http/guard.ts';
import { Done, IdParams, Page, PageQuery, Success } from '../../http/schemas.ts';
import { CreateSegmentBody, Segment, SegmentWithCount, UpdateSegmentBody } from './segments.schemas.ts';
import type { SegmentsService } from './segments.service.ts';

interface SegmentsRouteDeps {
  segments: SegmentsService;
}

const tags = ['Segments'];

const config = { permission: 'segments:manage' as const };

export const segmentsRoutes: FastifyPluginAsyncTypebox<SegmentsRouteDeps> = async (app, deps) => {
  for (const routes of [segmentEditingRoutes, segmentDeletionRoutes]) await routes(app, deps);
};

const segmentEditingRoutes: FastifyPluginAsyncTypebox<SegmentsRouteDeps> = async (app, { segments }) => {
  app.post(
    '/segments',
    {
      config,
      schema: {
        tags,
        summary: 'Save a named voter filter for broadcasts and campaigns',
        body: CreateSegmentBody,
        response: { 201: Success(SegmentWithCount) },
      },
    },
    async (request, reply) => {
      const data = await segments.create(authOf(request).workspaceId, request.body);
      return reply.code(201).send({ success: true, message: 'Segment created.', data });
    },
  );

  app.get(
    '/segments',
    {
      config,
      schema: {
        tags,
        summary: 'List segments',
        querystring: PageQuery,
        response: { 200: Success(Page(Segment)) },
      },
    },
    async (request) => ({
      success: true as const,
      data: await segments.list(authOf(request).workspaceId, request.query.page, request.query.per_page),
    }),
  );

  app.get(
    '/segments/:id',
    {
      config,
      schema: {
        tags,
        summary: 'Read a segment with its current voter count',
        params: IdParams,
        response: { 200: Success(SegmentWithCount) },
      },
    },
    async (request) => ({
      success: true as const,
      data: await segments.get(authOf(request).workspaceId, request.params.id),
    }),
  );

  app.patch(
    '/segments/:id',
    {
      config,
      schema: {
        tags,
        summary: 'Rename a segment or change its filters',
        description: 'Campaigns already sent keep the voters they counted; later sends use the new filters.',
        params: IdParams,
        body: UpdateSegmentBody,
        response: { 200: Success(SegmentWithCount) },
      },
    },
    async (request) => ({
      success: true as const,
      message: 'Segment updated.',
      data: await segments.update(authOf(request).workspaceId, request.params.id, request.body),
    }),
  );
};

const segmentDeletionRoutes: FastifyPluginAsyncTypebox<SegmentsRouteDeps> = async (app, { segments }) => {
  app.delete(
    '/segments/:id',
    {
      config,
      schema: {
        tags,
        summary: 'Delete a segment',
        params: IdParams,
        response: { 200: Done },
      },
    },
    async (request) => {
      await segments.remove(authOf(request).workspaceId, request.params.id);
      return { success: true as const, message: 'Segment deleted.' };
    },
  );
};
