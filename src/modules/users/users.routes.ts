import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { authOf } from '../../http/guard.ts';
import { IdParams, Page, Success } from '../../http/schemas.ts';
import { actorOf } from '../audit/audit.repository.ts';
import { Type } from 'typebox';
import { CreateUserBody, ListUsersQuery, TeamMember, UpdateUserBody, User } from './users.schemas.ts';
import type { UsersService } from './users.service.ts';

const LAST_POLITICIAN =
  'A change that would leave the workspace without an active politician is 409 `conflict`.';

interface UsersRouteDeps {
  users: UsersService;
}

const tags = ['Users'];

const config = { permission: 'team:manage' as const };

export const usersRoutes: FastifyPluginAsyncTypebox<UsersRouteDeps> = async (app, deps) => {
  for (const routes of [userCreationRoutes, userChangingRoutes]) await routes(app, deps);
};

const userCreationRoutes: FastifyPluginAsyncTypebox<UsersRouteDeps> = async (app, { users }) => {
  app.post(
    '/users',
    {
      config,
      schema: {
        tags,
        summary: 'Add a team member (manager or volunteer) to your workspace',
        body: CreateUserBody,
        response: { 201: Success(User) },
      },
    },
    async (request, reply) => {
      const data = await users.createMember(authOf(request).workspaceId, request.body, actorOf(request));
      return reply.code(201).send({ success: true, message: 'Team member added.', data });
    },
  );

  app.get(
    '/users',
    {
      config: { permission: 'team:read' },
      schema: {
        tags,
        summary: "List your workspace's team, active and deactivated members",
        description:
          'Politicians get each member whole; managers (to assign conversations) get id, name, role, active and coverage only. Only politicians change the team.',
        querystring: ListUsersQuery,
        response: { 200: Success(Page(Type.Union([User, TeamMember]))) },
      },
    },
    async (request) => {
      const { page, per_page, active } = request.query;
      const auth = authOf(request);
      const list = await users.list(auth.workspaceId, page, per_page, active);
      if (auth.role === 'politician') return { success: true as const, data: list };
      return {
        success: true as const,
        data: {
          ...list,
          data: list.data.map(({ id, name, role, active, coverage }) => ({
            id,
            name,
            role,
            active,
            coverage,
          })),
        },
      };
    },
  );

  app.get(
    '/users/:id',
    {
      config,
      schema: { tags, summary: 'Read a team member', params: IdParams, response: { 200: Success(User) } },
    },
    async (request) => ({
      success: true as const,
      data: await users.get(authOf(request).workspaceId, request.params.id),
    }),
  );
};

const userChangingRoutes: FastifyPluginAsyncTypebox<UsersRouteDeps> = async (app, { users }) => {
  app.patch(
    '/users/:id',
    {
      config,
      schema: {
        tags,
        summary: 'Rename a team member, change their role, or (de)activate them',
        description:
          '`active: false` revokes every token of the user at once; their sign-in then answers as wrong ' +
          'credentials. `active: true` lets them sign in again (no old token comes back). A role change takes ' +
          `effect on their next request. ${LAST_POLITICIAN}`,
        params: IdParams,
        body: UpdateUserBody,
        response: { 200: Success(User) },
      },
    },
    async (request) => {
      const data = await users.update(
        authOf(request).workspaceId,
        request.params.id,
        request.body,
        actorOf(request),
      );
      return { success: true as const, message: 'Team member updated.', data };
    },
  );

  app.delete(
    '/users/:id',
    {
      config,
      schema: {
        tags,
        summary: 'Deactivate a team member (the same as PATCH with active: false)',
        description: `The user is kept (the audit log names them) but can no longer sign in. ${LAST_POLITICIAN}`,
        params: IdParams,
        response: { 200: Success(User) },
      },
    },
    async (request) => {
      const data = await users.update(
        authOf(request).workspaceId,
        request.params.id,
        { active: false },
        actorOf(request),
      );
      return { success: true as const, message: 'Team member deactivated.', data };
    },
  );
};
