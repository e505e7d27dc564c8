import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { authOf } from '../../http/guard.ts';
import { IdParams, Page, PageQuery, Success } from '../../http/schemas.ts';
import { CreatePaymentBody, Payment, ProcessedPayment } from './payments.schemas.ts';
import type { PaymentsService } from './payments.service.ts';

export const paymentsRoutes: FastifyPluginAsyncTypebox<{ payments: PaymentsService }> = async (
  app,
  { payments },
) => {
  const tags = ['Payments'];

  app.post(
    '/payments',
    {
      config: { permission: 'payments:manage' },
      schema: {
        tags,
        summary: 'Buy credits',
        description:
          'The `sandbox` gateway completes the payment at once: the credits are added (credit ledger entries `purchase`, reference `payment:<id>`) and `payment.processed` is emitted, all in one transaction. Answers the payment and the new balance.',
        body: CreatePaymentBody,
        response: { 201: Success(ProcessedPayment) },
      },
    },
    async (request, reply) => {
      const auth = authOf(request);
      const data = await payments.create(auth.workspaceId, auth.userId, request.body);
      return reply.code(201).send({ success: true, message: 'Payment completed; credits added.', data });
    },
  );

  app.get(
    '/payments',
    {
      config: { permission: 'payments:manage' },
      schema: {
        tags,
        summary: "The workspace's payments, newest first",
        querystring: PageQuery,
        response: { 200: Success(Page(Payment)) },
      },
    },
    async (request) => ({
      success: true as const,
      data: await payments.list(authOf(request).workspaceId, request.query.page, request.query.per_page),
    }),
  );

  app.get(
    '/payments/:id',
    {
      config: { permission: 'payments:manage' },
      schema: { tags, summary: 'Read one payment', params: IdParams, response: { 200: Success(Payment) } },
    },
    async (request) => ({
      success: true as const,
      data: await payments.get(authOf(request).workspaceId, request.params.id),
    }),
  );
};
