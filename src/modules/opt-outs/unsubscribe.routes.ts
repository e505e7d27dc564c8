import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply } from 'fastify';
import type { Kysely } from 'kysely';
import { Type } from 'typebox';
import type { Database } from '../../db/schema.ts';
import { notFound } from '../../errors.ts';
import { Success } from '../../http/schemas.ts';
import { html, languageOf, page, PAGE_CSP, type PageLanguage } from '../../http/public-page.ts';
import { defaultLanguage, workspaceExists } from '../workspaces/workspaces.repository.ts';
import { addOptOut } from './opt-outs.service.ts';
import { readUnsubscribeToken } from './unsubscribe.ts';

/**
 * The longest token accepted: a 254-character address of 4-byte UTF-8 characters, its workspace id and the
 * signature, base64url-encoded, fit in it (the router's MAX_PATH_PARAM in app.ts allows it).
 */
const Token = Type.Object({ token: Type.String({ minLength: 1, maxLength: 2048 }) });

/** The page's words in English and Hindi (the request's Accept-Language chooses). */
const words = {
  en: {
    invalidTitle: 'This unsubscribe link is not valid',
    invalidBody: 'The link is incomplete or was altered. Copy the whole link from the email and try again.',
    title: 'Unsubscribe from campaign email',
    stop: (email: string) => `Stop all campaign email to <strong>${email}</strong> from this office.`,
    button: 'Unsubscribe from email',
    doneTitle: 'You are unsubscribed',
    done: (email: string) => `No more campaign email will be sent to <strong>${email}</strong>.`,
  },
  hi: {
    invalidTitle: 'यह सदस्यता-समाप्ति लिंक मान्य नहीं है',
    invalidBody: 'लिंक अधूरा है या बदला गया है। ईमेल से पूरा लिंक कॉपी करके फिर कोशिश करें।',
    title: 'अभियान ईमेल की सदस्यता समाप्त करें',
    stop: (email: string) => `इस कार्यालय से <strong>${email}</strong> पर अभियान ईमेल भेजना बंद करें।`,
    button: 'ईमेल की सदस्यता समाप्त करें',
    doneTitle: 'आपकी सदस्यता समाप्त हो गई है',
    done: (email: string) => `<strong>${email}</strong> पर अब कोई अभियान ईमेल नहीं भेजा जाएगा।`,
  },
} as const;
type Language = PageLanguage;

/**
 * The page's language: the voter's own (`language` of the workspace's voter with the link's address, when it is
 * Hindi or English); a voter without one gets the workspace's `default_language` (fifth part); an address that
 * is no voter's, the request's Accept-Language.
 */
async function pageLanguage(
  db: Kysely<Database>,
  target: { workspaceId: number; email: string },
  header: string | undefined,
): Promise<Language> {
  const voter = await db
    .selectFrom('voters')
    .select('language')
    .where('workspace_id', '=', target.workspaceId)
    .where('email', '=', target.email)
    .orderBy('id')
    .limit(1)
    .executeTakeFirst();
  if (!voter) return languageOf(header);
  if (voter.language === 'hi' || voter.language === 'en') return voter.language;
  return (await defaultLanguage(db, target.workspaceId)) === 'hi' ? 'hi' : 'en';
}

interface UnsubscribeRouteDeps {
  db: Kysely<Database>;
  appKey: Buffer;
}

/**
 * The one-click unsubscribe endpoint every campaign email's List-Unsubscribe header and footer point at. Mail
 * clients POST `List-Unsubscribe=One-Click` (RFC 8058: multipart/form-data or a form); any body of any type is
 * accepted and ignored. The address is opted out of email with source `unsubscribe_link`, without signing in.
 * A GET changes nothing (link scanners follow links): it shows the person a page with a button that posts.
 */
export const unsubscribeRoutes: FastifyPluginAsyncTypebox<UnsubscribeRouteDeps> = async (app, deps) => {
  // Any body, of any content type (multipart/form-data, a form, text/plain, JSON, none): read and ignored.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, _body, done) => done(null, undefined));
  for (const routes of [unsubscribePageRoutes, unsubscribeRequestRoutes]) await routes(app, deps);
};

const unsubscribePageRoutes: FastifyPluginAsyncTypebox<UnsubscribeRouteDeps> = async (
  app,
  { db, appKey },
) => {
  app.get(
    '/unsubscribe/:token',
    {
      config: { permission: 'public' },
      schema: {
        tags: ['Consent'],
        summary: 'The page of a one-click unsubscribe link (for a person who clicks it)',
        description:
          'An HTML page naming the address and the channel, with a button that posts the one-click request, in Hindi ' +
          "or English (the voter's `language`, else the request's Accept-Language). " +
          'Changes nothing by itself. An unknown or altered link is 404: a page saying so for a browser ' +
          '(`Accept: text/html`), the error envelope otherwise.',
        security: [],
        params: Token,
        response: {
          200: { description: 'The page', content: { 'text/html': { schema: Type.String() } } },
        },
      },
    },
    async (request, reply) => {
      const target = readUnsubscribeToken(appKey, request.params.token);
      const lang = target
        ? await pageLanguage(db, target, request.headers['accept-language'])
        : languageOf(request.headers['accept-language']);
      const w = words[lang];
      if (!target) {
        // A person (a browser asks for HTML) reads a page; any other client gets the error envelope.
        if (!/\btext\/html\b/.test(request.headers.accept ?? '')) throw notFound('Unsubscribe link');
        return (reply as FastifyReply)
          .code(404)
          .header('content-security-policy', PAGE_CSP)
          .type('text/html; charset=utf-8')
          .send(page(w.invalidTitle, `<p>${w.invalidBody}</p>`, lang));
      }
      reply.header('content-security-policy', PAGE_CSP).type('text/html; charset=utf-8');
      return page(
        w.title,
        `<p>${w.stop(html(target.email))}</p>
<form method="post"><button type="submit">${w.button}</button></form>`,
        lang,
      );
    },
  );
};

const unsubscribeRequestRoutes: FastifyPluginAsyncTypebox<UnsubscribeRouteDeps> = async (
  app,
  { db, appKey },
) => {
  app.post(
    '/unsubscribe/:token',
    {
      config: { permission: 'public' },
      schema: {
        tags: ['Consent'],
        summary: 'One-click unsubscribe from campaign email (RFC 8058; the signed link of List-Unsubscribe)',
        description:
          'Mail clients send `List-Unsubscribe=One-Click` as multipart/form-data or a form; any body of any type ' +
          'is accepted. Opts the address out of email in the workspace that sent it (`source: ' +
          '"unsubscribe_link"`); repeating it changes nothing. Answers JSON, or the confirmation page when the ' +
          "request came from the link's page (a browser form post, `Accept: text/html`). The token fits any " +
          'address (up to 2,048 characters).',
        security: [],
        params: Token,
        response: {
          200: Success(Type.Object({ channel: Type.Literal('email'), unsubscribed: Type.Literal(true) })),
        },
      },
    },
    async (request, reply) => {
      const target = readUnsubscribeToken(appKey, request.params.token);
      if (!target) throw notFound('Unsubscribe link');
      await db.transaction().execute(async (trx) => {
        if (!(await workspaceExists(trx, target.workspaceId))) throw notFound('Unsubscribe link');
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
      if (/\btext\/html\b/.test(request.headers.accept ?? '')) {
        const lang = await pageLanguage(db, target, request.headers['accept-language']);
        return reply
          .header('content-security-policy', PAGE_CSP)
          .type('text/html; charset=utf-8')
          .serializer((payload: unknown) => String(payload))
          .send(page(words[lang].doneTitle, `<p>${words[lang].done(html(target.email))}</p>`, lang) as never);
      }
      return {
        success: true as const,
        message: 'You are unsubscribed: no more email will be sent to this address.',
        data: { channel: 'email' as const, unsubscribed: true as const },
      };
    },
  );
};
