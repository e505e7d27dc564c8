import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { authOf } from '../../http/guard.ts';
import { actorOf } from '../audit/audit.repository.ts';
import { Done, IdParams, Success } from '../../http/schemas.ts';
import {
  CreateVoterBody,
  CreatedVoter,
  ListVotersQuery,
  UpdateVoterBody,
  UpdatedVoter,
  Voter,
  VoterPage,
} from './voters.schemas.ts';
import type { VotersService } from './voters.service.ts';
import { seesSensitive } from './voters.rules.ts';

interface VotersRouteDeps {
  voters: VotersService;
}

const tags = ['Voters'];

export const votersRoutes: FastifyPluginAsyncTypebox<VotersRouteDeps> = async (app, deps) => {
  for (const routes of [voterReadingRoutes, voterChangingRoutes]) await routes(app, deps);
};

const voterReadingRoutes: FastifyPluginAsyncTypebox<VotersRouteDeps> = async (app, { voters }) => {
  app.get(
    '/voters',
    {
      config: { permission: 'voters:read' },
      schema: {
        tags,
        summary: 'List voters, filtered and paged (ordered by id)',
        description:
          'A volunteer lists only their part of the roll: the voters of their coverage (wards, booths, constituencies), those they added, and the contacts of conversations assigned to them. With `search`, matches are counted exactly up to 10,000; above that `total` is 10,000 and `total_exact` is false.',
        querystring: ListVotersQuery,
        response: { 200: Success(VoterPage) },
      },
    },
    async (request) => {
      const { page, per_page, ...raw } = request.query;
      const auth = authOf(request);
      const sensitive = seesSensitive(auth.role);
      const filters = await voters.filters(auth.workspaceId, raw, sensitive);
      // A volunteer lists only their part of the roll.
      const scope = await voters.scopeOf(auth);
      return {
        success: true as const,
        data: await voters.list(auth.workspaceId, { ...filters, scope }, page, per_page, sensitive),
      };
    },
  );

  app.get(
    '/voters/:id',
    {
      config: { permission: 'voters:read' },
      schema: { tags, summary: 'Read one voter', params: IdParams, response: { 200: Success(Voter) } },
    },
    async (request) => {
      const auth = authOf(request);
      return {
        success: true as const,
        data: await voters.get(
          auth.workspaceId,
          request.params.id,
          await voters.scopeOf(auth),
          seesSensitive(auth.role),
        ),
      };
    },
  );

  app.post(
    '/voters',
    {
      config: { permission: 'voters:write' },
      schema: {
        tags,
        summary: 'Add a voter',
        description:
          'The same name (case-insensitive, spaces collapsed) with the same phone is the same voter: 409.',
        body: CreateVoterBody,
        response: { 201: Success(CreatedVoter) },
      },
    },
    async (request, reply) => {
      const auth = authOf(request);
      const data = await voters.create(auth.workspaceId, request.body, auth.userId);
      return reply.code(201).send({ success: true, message: 'Voter created.', data });
    },
  );
};

const voterChangingRoutes: FastifyPluginAsyncTypebox<VotersRouteDeps> = async (app, { voters }) => {
  app.put(
    '/voters/:id',
    {
      config: { permission: 'voters:write' },
      schema: {
        tags,
        summary: "Update any subset of a voter's fields",
        params: IdParams,
        body: UpdateVoterBody,
        response: { 200: Success(UpdatedVoter) },
      },
    },
    async (request) => {
      const auth = authOf(request);
      const data = await voters.update(
        auth.workspaceId,
        request.params.id,
        request.body,
        await voters.scopeOf(auth),
        seesSensitive(auth.role),
      );
      return { success: true as const, message: 'Voter updated.', data };
    },
  );

  app.delete(
    '/voters/:id',
    {
      config: { permission: 'voters:delete' },
      schema: {
        tags,
        summary: 'Delete a voter',
        params: IdParams,
        response: { 200: Done },
      },
    },
    async (request) => {
      await voters.remove(authOf(request).workspaceId, request.params.id, actorOf(request));
      return { success: true as const, message: 'Voter deleted.' };
    },
  );
};
