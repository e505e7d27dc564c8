import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Kysely } from 'kysely';
import { Type } from 'typebox';
import type { Database } from '../../db/schema.ts';
import { notFound } from '../../errors.ts';
import { Success } from '../../http/schemas.ts';
import { addOptOut } from './opt-outs.service.ts';
import { readUnsubscribeToken } from './unsubscribe.ts';

/**
 * The one-click unsubscribe endpoint every campaign email's List-Unsubscribe header points at. Mail clients
 * POST `List-Unsubscribe=One-Click` (form-encoded) to it; the address is opted out of email with source
 * `unsubscribe_link`, without signing in. A GET changes nothing (link scanners follow links).
 */
export const unsubscribeRoutes: FastifyPluginAsyncTypebox<{ db: Kysely<Database>; appKey: Buffer }> = async (
  app,
  { db, appKey },
) => {
  app.addContentTypeParser(
    'application/x-www-form-urlencoded',
    { parseAs: 'string' },
    (_request, body, done) => {
      const text = typeof body === 'string' ? body : body.toString('utf8');
      done(null, Object.fromEntries(new URLSearchParams(text)));
    },
  );

  app.post(
    '/unsubscribe/:token',
    {
      config: { permission: 'public' },
      schema: {
        tags: ['Consent'],
        summary: 'One-click unsubscribe from campaign email (RFC 8058; the signed link of List-Unsubscribe)',
        description:
          'Mail clients send `List-Unsubscribe=One-Click` as a form; any body is accepted. Opts the address out of ' +
          'email in the workspace that sent it (`source: "unsubscribe_link"`); repeating it changes nothing.',
        security: [],
        params: Type.Object({ token: Type.String({ minLength: 1, maxLength: 700 }) }),
        response: {
          200: Success(Type.Object({ channel: Type.Literal('email'), unsubscribed: Type.Literal(true) })),
        },
      },
    },
    async (request) => {
      const target = readUnsubscribeToken(appKey, request.params.token);
      if (!target) throw notFound('Unsubscribe link');
      await db.transaction().execute(async (trx) => {
        const workspace = await trx
          .selectFrom('workspaces')
          .select('id')
          .where('id', '=', target.workspaceId)
          .executeTakeFirst();
        if (!workspace) throw notFound('Unsubscribe link');
        await addOptOut(
          trx,
          target.workspaceId,
          { userId: null, ip: request.ip ?? null },
          target.email,
          'email',
          'unsubscribe_link',
          'One-click unsubscribe link.',
        );
      });
      return {
        success: true as const,
        message: 'You are unsubscribed: no more email will be sent to this address.',
        data: { channel: 'email' as const, unsubscribed: true as const },
      };
    },
  );
};
