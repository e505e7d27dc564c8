import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import formbody from '@fastify/formbody';
import { Type } from 'typebox';
import type { TwilioSettings } from '../../config.ts';
import { AppError } from '../../errors.ts';
import { Success } from '../../http/schemas.ts';
import { twilioOutcome, verifyTwilioSignature } from '../../providers/twilio.ts';
import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.ts';
import { optOutByProvider, TWILIO_UNSUBSCRIBED } from '../opt-outs/opt-outs.service.ts';
import { parseRef } from './messages.rules.ts';
import type { MessagesService } from './messages.service.ts';

/**
 * Delivery-status callbacks of real providers. Twilio posts form fields to the StatusCallback URL it was
 * given (ours carries the message id in its query string) and signs them with X-Twilio-Signature; a request
 * whose signature does not verify is refused and changes nothing.
 */
export const callbackRoutes: FastifyPluginAsyncTypebox<{
  messages: MessagesService;
  twilio: TwilioSettings;
  db: Kysely<Database>;
}> = async (app, { messages, twilio, db }) => {
  await app.register(formbody);

  app.post(
    '/providers/twilio/status',
    {
      config: { permission: 'public', rateLimit: 'callback' },
      schema: {
        tags: ['Provider callbacks'],
        summary: 'Twilio message and call status callback (signed with X-Twilio-Signature)',
        querystring: Type.Object({ message: Type.String({ maxLength: 40 }) }),
        body: Type.Record(Type.String(), Type.String()),
        response: { 200: Success(Type.Object({ status: Type.Union([Type.String(), Type.Null()]) })) },
      },
    },
    async (request) => {
      const base = twilio.publicBaseUrl ?? `${request.protocol}://${request.host}`;
      const url = `${base}${request.originalUrl}`;
      const signature = request.headers['x-twilio-signature'];
      if (
        !verifyTwilioSignature(
          twilio.authToken,
          url,
          request.body,
          typeof signature === 'string' ? signature : undefined,
        )
      ) {
        throw new AppError('forbidden', 'The X-Twilio-Signature does not match this request.');
      }
      const id = parseRef('msg', request.query.message);
      const outcome = twilioOutcome(request.body);
      if (id !== undefined && outcome && outcome.status !== 'sent') {
        await messages.applyReports([
          outcome.status === 'delivered'
            ? { messageId: id, status: 'delivered' }
            : { messageId: id, status: 'failed', error: outcome.error, errorCode: outcome.code },
        ]);
        if (request.body.ErrorCode === TWILIO_UNSUBSCRIBED) await optOutByProvider(db, id);
      }
      const status = outcome?.status ?? null;
      return { success: true as const, data: { status } };
    },
  );
};
