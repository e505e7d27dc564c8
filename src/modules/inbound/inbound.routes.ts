import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import formbody from '@fastify/formbody';
import { Type } from 'typebox';
import type { TwilioSettings } from '../../config.ts';
import { AppError } from '../../errors.ts';
import { authOf } from '../../http/guard.ts';
import { Page, Success } from '../../http/schemas.ts';
import { verifyTwilioSignature } from '../../providers/twilio.ts';
import { actorOf } from '../audit/audit.repository.ts';
import { InboundBody, InboundItem, InboundQuery } from './inbound.schemas.ts';
import type { InboundService } from './inbound.service.ts';

const keywordsNote =
  'A reply whose whole text (trimmed, any case, trailing punctuation dropped) is STOP, STOPALL, UNSUBSCRIBE, ' +
  'CANCEL, END or QUIT (Hindi बंद, रोकें, रुको) opts the sender out of that channel (`source: "keyword"`); START, ' +
  'UNSTOP (शुरू) removes a keyword opt-out. Any longer text is a message, never a keyword. Every reply is kept ' +
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

export const TWILIO_INBOUND_PATH = '/api/providers/twilio/inbound';

/**
 * Twilio's incoming-message webhook (configure the number's "A message comes in" URL as
 * <PUBLIC_BASE_URL>/api/providers/twilio/inbound). Signed with X-Twilio-Signature like the status callback;
 * answers empty TwiML, so Twilio sends no automatic reply of its own.
 */
export const twilioInboundRoutes: FastifyPluginAsyncTypebox<{
  inbound: InboundService;
  twilio: TwilioSettings;
}> = async (app, { inbound, twilio }) => {
  await app.register(formbody);

  app.post(
    '/providers/twilio/inbound',
    {
      config: { permission: 'public', rateLimit: 'callback' },
      schema: {
        tags: ['Provider callbacks'],
        summary: 'Twilio incoming SMS / WhatsApp message (signed with X-Twilio-Signature)',
        description: `Form fields From, Body, MessageSid (WhatsApp senders as \`whatsapp:+91...\`); a replay of a MessageSid already received changes nothing. ${keywordsNote}`,
        security: [],
        body: Type.Record(Type.String(), Type.String()),
        produces: ['text/xml'],
        response: {
          200: {
            description: 'Empty TwiML: no automatic reply.',
            content: { 'text/xml': { schema: { type: 'string' } } },
          },
        },
      },
    },
    async (request, reply) => {
      const base = twilio.publicBaseUrl ?? `${request.protocol}://${request.host}`;
      const signature = request.headers['x-twilio-signature'];
      if (
        !verifyTwilioSignature(
          twilio.authToken,
          `${base}${request.originalUrl}`,
          request.body,
          typeof signature === 'string' ? signature : undefined,
        )
      ) {
        throw new AppError('forbidden', 'The X-Twilio-Signature does not match this request.');
      }
      const rawFrom = request.body.From ?? '';
      const whatsapp = rawFrom.startsWith('whatsapp:');
      await inbound.receiveFromProvider(
        {
          channel: whatsapp ? 'whatsapp' : 'sms',
          from: whatsapp ? rawFrom.slice('whatsapp:'.length) : rawFrom,
          body: (request.body.Body ?? '').slice(0, 5000),
          // Twilio retries and replays carry the same MessageSid: the message is stored once.
          providerMessageId: (request.body.MessageSid ?? request.body.SmsSid)?.slice(0, 64) || undefined,
        },
        'twilio',
        request.ip ?? null,
      );
      return reply.type('text/xml').send('<?xml version="1.0" encoding="UTF-8"?><Response></Response>');
    },
  );
};
