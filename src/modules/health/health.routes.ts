import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { Db } from '../../db/connect.ts';
import { AppError } from '../../errors.ts';
import { Success } from '../../http/schemas.ts';

const Health = Type.Object({
  status: Type.Literal('ok'),
  database: Type.Literal('ok'),
  dialect: Type.String({ description: 'sqlite or postgres' }),
});

export const healthRoutes: FastifyPluginAsyncTypebox<{ db: Db }> = async (app, { db }) => {
  app.get(
    '/healthz',
    {
      config: { permission: 'public' },
      schema: {
        tags: ['Health'],
        summary: 'Health check: 200 when the database answers, 503 service_unavailable when it does not',
        response: { 200: Success(Health) },
      },
    },
    async (request) => {
      try {
        await db.ping();
      } catch (error) {
        request.log.error({ err: error }, 'health check: database unreachable');
        throw new AppError('service_unavailable', 'The database cannot be reached.', {
          database: 'unreachable',
        });
      }
      return {
        success: true as const,
        message: 'Service is healthy.',
        data: { status: 'ok' as const, database: 'ok' as const, dialect: db.dialect },
      };
    },
  );
};
