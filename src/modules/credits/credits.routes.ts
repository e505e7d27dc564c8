import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { authOf } from '../../http/guard.ts';
import { Page, Success } from '../../http/schemas.ts';
import { LedgerEntry, LedgerQuery } from './credits.schemas.ts';
import type { CreditsService } from './credits.service.ts';

export const creditsRoutes: FastifyPluginAsyncTypebox<{ credits: CreditsService }> = async (
  app,
  { credits },
) => {
  app.get(
    '/credits/ledger',
    {
      config: { permission: 'messages:read' },
      schema: {
        tags: ['Credits'],
        summary: 'Where the credits came from and went, newest first',
        description:
          'Every change to the balance: for each channel the `amount`s add up to the balance shown as ' +
          '`credits`. A send or a campaign is charged when it goes out (`charge`, negative) and failed or ' +
          'cancelled messages are refunded (`refund`, positive).',
        querystring: LedgerQuery,
        response: { 200: Success(Page(LedgerEntry)) },
      },
    },
    async (request) => {
      return {
        success: true as const,
        data: await credits.ledger(authOf(request).workspaceId, request.query),
      };
    },
  );
};
