import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { authOf } from '../../http/guard.ts';
import { Page, PageQuery, Success } from '../../http/schemas.ts';
import { CreateUserBody, User } from './users.schemas.ts';
import type { UsersService } from './users.service.ts';

export const usersRoutes: FastifyPluginAsyncTypebox<{ users: UsersService }> = async (app, { users }) => {
  const tags = ['Users'];

  app.post(
    '/users',
    {
      config: { permission: 'team:manage' },
      schema: {
        tags,
        summary: 'Add a team member (manager or volunteer) to your workspace',
        body: CreateUserBody,
        response: { 201: Success(User) },
      },
    },
    async (request, reply) => {
      const data = await users.createMember(authOf(request).workspaceId, request.body);
      return reply.code(201).send({ success: true, message: 'Team member added.', data });
    },
  );

  app.get(
    '/users',
    {
      config: { permission: 'team:manage' },
      schema: {
        tags,
        summary: "List your workspace's team",
        querystring: PageQuery,
        response: { 200: Success(Page(User)) },
      },
    },
    async (request) => {
      const { page, per_page } = request.query;
      return { success: true as const, data: await users.list(authOf(request).workspaceId, page, per_page) };
    },
  );
};
