import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { authOf } from '../../http/guard.ts';
import { IdempotencyService } from './idempotency.service.ts';

export const IdempotencyHeaders = Type.Object({
  'idempotency-key': Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 255,
      description:
        'Makes the request safe to retry: a repeat with the same key and body returns the first answer and does nothing again.',
    }),
  ),
});

/**
 * Answers a request that does something once per Idempotency-Key (send, broadcast, payments): a repeat with
 * the same key and body gets the first answer again (with `Idempotent-Replayed: true`) and does nothing.
 */
// The return type is left to inference: it is what a typed route handler accepts back.
export async function answerOnce(
  idempotency: IdempotencyService,
  request: FastifyRequest,
  reply: FastifyReply,
  route: string,
  status: 201 | 202,
  message: string,
  work: (workspaceId: number) => Promise<unknown>,
) {
  const { workspaceId } = authOf(request);
  const answer = await idempotency.run(
    workspaceId,
    request.headers['idempotency-key'] as string | undefined,
    IdempotencyService.fingerprint('POST', route, request.body),
    async () => ({ status, body: { success: true, message, data: await work(workspaceId) } }),
  );
  if (answer.replayed) reply.header('idempotent-replayed', 'true');
  return reply.code(answer.status).send(answer.body);
}
