import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { IdParams, Page, Success } from '../../http/schemas.ts';
import {
  CreateGrievanceBody,
  Grievance,
  ListGrievancesQuery,
  UpdateGrievanceBody,
} from './grievances.schemas.ts';
import type { GrievancesService } from './grievances.service.ts';
import { authOf } from '../../http/guard.ts';

interface GrievancesRouteDeps {
  grievances: GrievancesService;
}

const tags = ['Grievances'];

export const grievancesRoutes: FastifyPluginAsyncTypebox<GrievancesRouteDeps> = async (app, deps) => {
  for (const routes of [grievanceReadingRoutes, grievanceChangingRoutes]) await routes(app, deps);
};

const grievanceReadingRoutes: FastifyPluginAsyncTypebox<GrievancesRouteDeps> = async (
  app,
  { grievances },
) => {
  app.get(
    '/grievances',
    {
      config: { permission: 'grievances:read' },
      schema: {
        tags,
        summary: 'List grievances, filtered and paged (newest first)',
        querystring: ListGrievancesQuery,
        response: { 200: Success(Page(Grievance)) },
      },
    },
    async (request) => {
      const { page, per_page, ...filters } = request.query;
      const auth = authOf(request);
      // A volunteer: those they opened, those assigned to them, and those of voters in their part of the roll.
      const scope = await grievances.scopeOf(auth);
      return {
        success: true as const,
        data: await grievances.list(auth.workspaceId, { ...filters, scope }, page, per_page),
      };
    },
  );

  app.get(
    '/grievances/:id',
    {
      config: { permission: 'grievances:read' },
      schema: {
        tags,
        summary: 'Read one grievance',
        params: IdParams,
        response: { 200: Success(Grievance) },
      },
    },
    async (request) => {
      const auth = authOf(request);
      return {
        success: true as const,
        data: await grievances.get(auth.workspaceId, request.params.id, await grievances.scopeOf(auth)),
      };
    },
  );

  app.post(
    '/grievances',
    {
      config: { permission: 'grievances:write' },
      schema: {
        tags,
        summary: 'Record a grievance',
        description:
          'It starts `open`, with `due_at` from its priority (urgent 24 h, high 3 days, normal 7 days, low 14 days). Emits `grievance.created`.',
        body: CreateGrievanceBody,
        response: { 201: Success(Grievance) },
      },
    },
    async (request, reply) => {
      const auth = authOf(request);
      const data = await grievances.create(auth.workspaceId, request.body, undefined, auth.userId);
      return reply.code(201).send({ success: true, message: 'Grievance created.', data });
    },
  );
};

const grievanceChangingRoutes: FastifyPluginAsyncTypebox<GrievancesRouteDeps> = async (
  app,
  { grievances },
) => {
  app.patch(
    '/grievances/:id',
    {
      config: { permission: 'grievances:write' },
      schema: {
        tags,
        summary: 'Update a grievance, move it through its lifecycle, assign it',
        description:
          'Status: open -> in_progress -> resolved -> closed, resolved -> open (reopen); closed is final; another move is 422. Moving to resolved sets resolved_at and emits `grievance.resolved`; reopening clears resolved_at. A new priority recomputes due_at from created_at.',
        params: IdParams,
        body: UpdateGrievanceBody,
        response: { 200: Success(Grievance) },
      },
    },
    async (request) => {
      const auth = authOf(request);
      return {
        success: true as const,
        message: 'Grievance updated.',
        data: await grievances.update(
          auth.workspaceId,
          request.params.id,
          request.body,
          await grievances.scopeOf(auth),
        ),
      };
    },
  );
};
