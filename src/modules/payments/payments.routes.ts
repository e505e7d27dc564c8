import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { authOf } from '../../http/guard.ts';
import { IdParams, Page, PageQuery, Success } from '../../http/schemas.ts';
import { actorOf } from '../audit/audit.repository.ts';
import { CreatePaymentBody, Payment, ProcessedPayment } from './payments.schemas.ts';
import { answerOnce, IdempotencyHeaders } from '../idempotency/idempotency.routes.ts';
import type { IdempotencyService } from '../idempotency/idempotency.service.ts';
import type { PaymentsService } from './payments.service.ts';

export const paymentsRoutes: FastifyPluginAsyncTypebox<{
  payments: PaymentsService;
  idempotency: IdempotencyService;
}> = async (app, { payments, idempotency }) => {
  const tags = ['Payments'];

  app.post(
    '/payments',
    {
      config: { permission: 'payments:manage' },
      schema: {
        tags,
        summary: 'Buy credits (recorded; no payment provider is set, so nothing is charged)',
        description:
          'No payment provider is built: a payment records credits and charges nothing (`charged: false`, and the answer says so). The `sandbox` gateway completes the payment at once: the credits are added (credit ledger entries `purchase`, reference `payment:<id>`) and `payment.processed` is emitted, all in one transaction. Answers the payment and the new balance. Send an `Idempotency-Key` to make retries safe: a repeat with the same key and body answers the first payment again and buys nothing.',
        headers: IdempotencyHeaders,
        body: CreatePaymentBody,
        response: { 201: Success(ProcessedPayment) },
      },
    },
    (request, reply) =>
      answerOnce(
        idempotency,
        request,
        reply,
        '/payments',
        201,
        'Credits recorded. No payment provider is set, so nothing was charged.',
        (workspaceId) => payments.create(workspaceId, authOf(request).userId, request.body, actorOf(request)),
      ),
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
