import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { authOf } from '../../http/guard.ts';
import { Done, IdParams, Page, Success } from '../../http/schemas.ts';
import { actorOf } from '../audit/audit.repository.ts';
import {
  CreateSilencePeriodBody,
  ListSilencePeriodsQuery,
  SilencePeriodItem,
} from './silence-periods.schemas.ts';
import type { SilencePeriodsService } from './silence-periods.service.ts';

export const silencePeriodsRoutes: FastifyPluginAsyncTypebox<{
  silencePeriods: SilencePeriodsService;
}> = async (app, { silencePeriods }) => {
  const tags = ['Consent'];
  const config = { permission: 'consent:manage' as const };

  app.post(
    '/silence-periods',
    {
      config,
      schema: {
        tags,
        summary: 'Add an election silence period for a constituency',
        description:
          'While it is in force (starts_at <= now < ends_at), broadcast and campaign messages on sms, whatsapp and ' +
          'ivr to voters of that constituency (case-insensitive) are `failed` with `error_code: "silence_period"` ' +
          'and refunded. Single sends and email are not affected.',
        body: CreateSilencePeriodBody,
        response: { 201: Success(SilencePeriodItem) },
      },
    },
    async (request, reply) => {
      const data = await silencePeriods.create(authOf(request).workspaceId, actorOf(request), request.body);
      return reply.code(201).send({ success: true, message: 'Silence period added.', data });
    },
  );

  app.get(
    '/silence-periods',
    {
      config,
      schema: {
        tags,
        summary: 'List silence periods, latest start first',
        querystring: ListSilencePeriodsQuery,
        response: { 200: Success(Page(SilencePeriodItem)) },
      },
    },
    async (request) => ({
      success: true as const,
      data: await silencePeriods.list(authOf(request).workspaceId, request.query),
    }),
  );

  app.delete(
    '/silence-periods/:id',
    {
      config,
      schema: {
        tags,
        summary: 'Remove a silence period',
        params: IdParams,
        response: { 200: Done },
      },
    },
    async (request) => {
      await silencePeriods.remove(authOf(request).workspaceId, actorOf(request), request.params.id);
      return { success: true as const, message: 'Silence period removed.' };
    },
  );
};
