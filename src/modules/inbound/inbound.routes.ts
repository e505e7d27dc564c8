import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { authOf } from '../../http/guard.ts';
import { Page, Success } from '../../http/schemas.ts';
import { actorOf } from '../audit/audit.repository.ts';
import { InboundBody, InboundItem, InboundQuery } from './inbound.schemas.ts';
import type { InboundService } from './inbound.service.ts';

export const keywordsNote =
  'A reply whose whole text (trimmed, any case, trailing punctuation dropped) is STOP, STOPALL, UNSUBSCRIBE, ' +
  'CANCEL, END or QUIT (Hindi बंद, रोकें, रुको) opts the sender out of that channel (`source: "keyword"`); START, ' +
  'UNSTOP (शुरू) removes a keyword opt-out. ERASE (मिटाएँ) and MYDATA (मेरा डेटा) record a data-principal request ' +
  '(erasure, access; `received_via: "keyword"`). Any longer text is a message, never a keyword. Every reply is kept ' +
  '(GET /api/messages/inbound) and emitted as `message.received` to webhooks.';

export const inboundRoutes: FastifyPluginAsyncTypebox<{ inbound: InboundService }> = async (
  app,
  { inbound },
) => {
  const tags = ['Consent'];

  app.post(
    '/inbound',
    {
      config: { permission: 'consent:manage' },
      schema: {
        tags,
        summary: 'Record a reply from a voter (what the sandbox provider’s replies use)',
        description: keywordsNote,
        body: InboundBody,
        response: { 201: Success(InboundItem) },
      },
    },
    async (request, reply) => {
      const data = await inbound.receive(authOf(request).workspaceId, actorOf(request), request.body);
      return reply.code(201).send({ success: true, message: 'Reply recorded.', data });
    },
  );

  app.get(
    '/messages/inbound',
    {
      config: { permission: 'messages:read' },
      schema: {
        tags: ['Messaging'],
        summary: 'Replies received, newest first',
        querystring: InboundQuery,
        response: { 200: Success(Page(InboundItem)) },
      },
    },
    async (request) => ({
      success: true as const,
      data: await inbound.list(authOf(request).workspaceId, request.query),
    }),
  );
};
