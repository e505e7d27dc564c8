import formbody from '@fastify/formbody';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Kysely } from 'kysely';
import { Type } from 'typebox';
import type { Database } from '../../db/schema.ts';
import { privacyRequestTypes } from '../../domain.ts';
import { AppError, validationError } from '../../errors.ts';
import { limitRequest } from '../../http/guard.ts';
import { html, languageOf, page, type PageLanguage, sendPage, wantsHtml } from '../../http/public-page.ts';
import type { RateLimits } from '../../http/rate-limit.ts';
import { Success } from '../../http/schemas.ts';
import type { PublicAsk, PublicRequests } from './public-requests.ts';

const asks = ['withdraw', ...privacyRequestTypes] as const;

/** The page's words in English and Hindi. */
const words = {
  en: {
    title: (office: string) => `Privacy notice: ${office}`,
    other: { lang: 'hi', label: 'हिन्दी' },
    noNotice: 'This office has not written its privacy notice yet. You can still make a request below.',
    contact: 'Contact',
    rights: 'Your rights',
    rightsText: (days: number) =>
      `Under the Digital Personal Data Protection Act, 2023 you may withdraw your consent at any time (reply STOP to any message, use the unsubscribe link in an email, or this form), and ask this office for a copy of your data, to correct it, to erase it, to nominate someone to act for you, or to hear your grievance. The office answers within ${days} days. If you are not satisfied with its answer, you may complain to the Data Protection Board of India (https://www.dpb.gov.in).`,
    formTitle: 'Make a request',
    address: 'Your phone number or email address',
    ask: 'What would you like?',
    asks: {
      withdraw: 'Withdraw my consent: send me no more messages',
      access: 'A copy of my data',
      correction: 'Correct my data',
      erasure: 'Erase my data',
      nomination: 'Nominate someone to act for me',
      grievance: 'A grievance about how my data is used',
    } satisfies Record<PublicAsk, string>,
    note: 'Details (optional)',
    sendCode: 'Send me a code',
    codeSent:
      'If this address can receive messages, a 6-digit code is on its way to it. It is valid for 10 minutes.',
    code: 'The code you received',
    confirm: 'Confirm',
    withdrawn: 'Your consent is withdrawn. This office will send no more campaign messages to this address.',
    received: (ref: string, due: string) =>
      `Your request ${ref} is received. The office will answer by ${due}.`,
    badAddress: 'Enter your phone number (e.g. +919812345678) or your email address.',
    badAsk: 'Choose what you would like.',
    badCode: 'The code is wrong, expired or already used. Ask for a new code.',
    notFound: 'This privacy page does not exist. Check the address you were given.',
    tooMany: 'Too many tries. Wait a minute and try again.',
  },
  hi: {
    title: (office: string) => `गोपनीयता सूचना: ${office}`,
    other: { lang: 'en', label: 'English' },
    noNotice: 'इस कार्यालय ने अभी अपनी गोपनीयता सूचना नहीं लिखी है। आप फिर भी नीचे अनुरोध कर सकते हैं।',
    contact: 'संपर्क',
    rights: 'आपके अधिकार',
    rightsText: (days: number) =>
      `डिजिटल व्यक्तिगत डेटा संरक्षण अधिनियम, 2023 के तहत आप कभी भी अपनी सहमति वापस ले सकते हैं (किसी भी संदेश का STOP लिखकर उत्तर दें, ईमेल में सदस्यता-समाप्ति लिंक का उपयोग करें, या यह फ़ॉर्म), और इस कार्यालय से अपने डेटा की प्रति, उसमें सुधार, उसे मिटाने, अपनी ओर से किसी को नामित करने, या अपनी शिकायत सुनने का अनुरोध कर सकते हैं। कार्यालय ${days} दिनों के भीतर उत्तर देता है। यदि आप उत्तर से संतुष्ट नहीं हैं, तो आप भारतीय डेटा संरक्षण बोर्ड (https://www.dpb.gov.in) में शिकायत कर सकते हैं।`,
    formTitle: 'अनुरोध करें',
    address: 'आपका फ़ोन नंबर या ईमेल पता',
    ask: 'आप क्या चाहते हैं?',
    asks: {
      withdraw: 'मेरी सहमति वापस लें: मुझे और संदेश न भेजें',
      access: 'मेरे डेटा की प्रति',
      correction: 'मेरे डेटा में सुधार',
      erasure: 'मेरा डेटा मिटा दें',
      nomination: 'मेरी ओर से कार्य करने के लिए किसी को नामित करें',
      grievance: 'मेरे डेटा के उपयोग के बारे में शिकायत',
    } satisfies Record<PublicAsk, string>,
    note: 'विवरण (वैकल्पिक)',
    sendCode: 'मुझे कोड भेजें',
    codeSent: 'यदि इस पते पर संदेश आ सकते हैं, तो 6 अंकों का कोड उस पर भेजा जा रहा है। यह 10 मिनट तक मान्य है।',
    code: 'आपको मिला कोड',
    confirm: 'पुष्टि करें',
    withdrawn: 'आपकी सहमति वापस ले ली गई है। यह कार्यालय इस पते पर अब कोई अभियान संदेश नहीं भेजेगा।',
    received: (ref: string, due: string) => `आपका अनुरोध ${ref} प्राप्त हो गया है। कार्यालय ${due} तक उत्तर देगा।`,
    badAddress: 'अपना फ़ोन नंबर (जैसे +919812345678) या अपना ईमेल पता लिखें।',
    badAsk: 'चुनें कि आप क्या चाहते हैं।',
    badCode: 'कोड गलत है, समाप्त हो गया है या पहले ही उपयोग हो चुका है। नया कोड मँगाएँ।',
    notFound: 'यह गोपनीयता पृष्ठ मौजूद नहीं है। आपको दिया गया पता जाँचें।',
    tooMany: 'बहुत अधिक प्रयास। एक मिनट रुककर फिर कोशिश करें।',
  },
} as const;

const PublicId = Type.Object({
  publicId: Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_-]+$' }),
});
const LangQuery = Type.Object(
  { lang: Type.Optional(Type.Union([Type.Literal('en'), Type.Literal('hi')])) },
  { additionalProperties: false },
);
const FormText = (maxLength: number, description: string) =>
  Type.Optional(Type.String({ maxLength, description }));
const AskBody = Type.Object(
  {
    address: FormText(254, 'Your phone (a number without + is read in DEFAULT_COUNTRY) or email.'),
    ask: Type.Optional(
      Type.Union(
        asks.map((a) => Type.Literal(a)),
        { description: '`withdraw` (consent), or a request type.' },
      ),
    ),
    note: FormText(2000, 'Details, for a request.'),
    code: FormText(12, 'The 6-digit code sent to the address (the second step).'),
    lang: Type.Optional(Type.Union([Type.Literal('en'), Type.Literal('hi')])),
  },
  { additionalProperties: false },
);

interface PageDeps {
  db: Kysely<Database>;
  requests: PublicRequests;
  rateLimits: RateLimits;
  responseDays: number;
}

type Words = (typeof words)[PageLanguage];

function pageLanguage(request: FastifyRequest, chosen: string | undefined): PageLanguage {
  return chosen === 'hi' || chosen === 'en' ? chosen : languageOf(request.headers['accept-language']);
}

/** The first step's form (address, what they want, details), with an error line when one is given. */
function askForm(
  w: Words,
  lang: PageLanguage,
  publicId: string,
  values: { address?: string; ask?: string; note?: string },
  error?: string,
) {
  const options = asks
    .map((a) => `<option value="${a}"${values.ask === a ? ' selected' : ''}>${html(w.asks[a])}</option>`)
    .join('');
  return `<h2>${w.formTitle}</h2>${error ? `<p class="error" role="alert">${html(error)}</p>` : ''}
<form method="post" action="/privacy/${html(publicId)}/code">
<input type="hidden" name="lang" value="${lang}">
<label for="address">${w.address}</label><input id="address" name="address" required maxlength="254" autocomplete="on" value="${html(values.address ?? '')}">
<label for="ask">${w.ask}</label><select id="ask" name="ask">${options}</select>
<label for="note">${w.note}</label><textarea id="note" name="note" rows="3" maxlength="2000">${html(values.note ?? '')}</textarea>
<p><button type="submit">${w.sendCode}</button></p></form>`;
}

/** The second step's form: the code, with what the first step asked carried along. */
function codeForm(
  w: Words,
  lang: PageLanguage,
  publicId: string,
  values: { address: string; ask: string; note?: string },
  error?: string,
) {
  return `${error ? `<p class="error" role="alert">${html(error)}</p>` : `<p>${html(w.codeSent)}</p>`}
<form method="post" action="/privacy/${html(publicId)}/requests">
<input type="hidden" name="lang" value="${lang}"><input type="hidden" name="address" value="${html(values.address)}">
<input type="hidden" name="ask" value="${html(values.ask)}"><input type="hidden" name="note" value="${html(values.note ?? '')}">
<label for="code">${w.code}</label><input id="code" name="code" required inputmode="numeric" autocomplete="one-time-code" maxlength="12">
<p><button type="submit">${w.confirm}</button></p></form>`;
}

/**
 * The public privacy page (the contract's fourth part): `/privacy/<public_id>`, the workspace's notice in
 * English or Hindi, the person's rights, and a two-step form (a code sent to the address, then the request or the
 * withdrawal). Forms post as a browser does; JSON clients get the envelope.
 */
export const privacyPageRoutes: FastifyPluginAsyncTypebox<PageDeps> = async (app, deps) => {
  await app.register(formbody, { bodyLimit: 16_384 });
  for (const routes of [pageRoute, codeRoute, requestRoute]) await routes(app, deps);
};

const pageRoute: FastifyPluginAsyncTypebox<PageDeps> = async (app, { db, requests, responseDays }) => {
  app.get(
    '/privacy/:publicId',
    {
      config: { permission: 'public' },
      schema: {
        tags: ['Privacy'],
        summary: "The office's public privacy page (its notice, the person's rights, and the request form)",
        description:
          'HTML in English or Hindi (`?lang=`, else Accept-Language). An unknown page is 404: a page saying so for a browser (`Accept: text/html`), the error envelope otherwise. Shows the notice, how to withdraw consent, how to ask for access, correction or erasure, and how to complain to the Data Protection Board; its form sends a one-time code to the address, then takes the request.',
        security: [],
        params: PublicId,
        querystring: LangQuery,
        response: { 200: { description: 'The page', content: { 'text/html': { schema: Type.String() } } } },
      },
    },
    async (request, reply) => {
      const lang = pageLanguage(request, request.query.lang);
      const w = words[lang];
      // A person (a browser asks for HTML) reads a page saying so; any other client gets the error envelope.
      const workspace = await requests.workspace(request.params.publicId).catch((error: unknown) => {
        if (wantsHtml(request.headers.accept)) return undefined;
        throw error;
      });
      if (!workspace) return sendPage(reply, 404, page(w.notFound, `<p>${html(w.notFound)}</p>`, lang));
      const notice = await db
        .selectFrom('privacy_notices')
        .selectAll()
        .where('workspace_id', '=', workspace.id)
        .executeTakeFirst();
      const texts = notice ? (JSON.parse(notice.texts) as Record<string, string>) : {};
      const text = texts[lang] ?? texts.en;
      const body = `<nav><a href="?lang=${w.other.lang}" hreflang="${w.other.lang}">${w.other.label}</a></nav>
${text ? `<div class="notice">${html(text)}</div>` : `<p>${w.noNotice}</p>`}
${notice ? `<h2>${w.contact}</h2><p>${html(notice.contact)}</p>` : ''}
<h2>${w.rights}</h2><p>${html(w.rightsText(responseDays))}</p>
${askForm(w, lang, request.params.publicId, {})}`;
      return sendPage(reply, 200, page(w.title(workspace.name), body, lang));
    },
  );
};

/** 429 as a page for a browser, the envelope otherwise. */
/**
 * A form post's language and words, whether a browser sent it (it reads pages; a client gets the envelope), and
 * the page's workspace: undefined for a browser when the page does not exist (a client gets the 404 thrown).
 */
async function formContext(
  request: FastifyRequest<{ Params: { publicId: string } }>,
  chosen: string | undefined,
  requests: PublicRequests,
) {
  const lang = pageLanguage(request, chosen);
  const browser = wantsHtml(request.headers.accept);
  const workspace = await requests.workspace(request.params.publicId).catch((error: unknown) => {
    if (browser) return undefined;
    throw error;
  });
  return { lang, w: words[lang], browser, workspace };
}

async function limited(
  rateLimits: RateLimits,
  request: FastifyRequest,
  reply: FastifyReply,
  key: string,
  w: Words,
  lang: PageLanguage,
): Promise<boolean> {
  try {
    await limitRequest(rateLimits, reply, 'otp', key);
    return false;
  } catch (error) {
    if (!(error instanceof AppError) || !wantsHtml(request.headers.accept)) throw error;
    sendPage(reply, 429, page(w.tooMany, `<p>${html(w.tooMany)}</p>`, lang));
    return true;
  }
}

const codeRoute: FastifyPluginAsyncTypebox<PageDeps> = async (app, { requests, rateLimits }) => {
  app.post(
    '/privacy/:publicId/code',
    {
      config: { permission: 'public' },
      schema: {
        tags: ['Privacy'],
        summary: 'The public form, step 1: send a one-time code to the address',
        description:
          'A form post (a browser: the next step as a page) or JSON. The answer is the same whether or not the office knows the address; the code goes by SMS to a phone or by email, valid 10 minutes. Limited per address and per client (RATE_LIMIT_OTP_PER_MIN).',
        security: [],
        params: PublicId,
        body: AskBody,
        response: { 200: Success(Type.Object({ expires_in: Type.Integer() })) },
      },
    },
    async (request, reply) => {
      const body = request.body ?? {};
      const { lang, w, browser, workspace } = await formContext(request, body.lang, requests);
      if (!workspace) return sendPage(reply, 404, page(w.notFound, `<p>${html(w.notFound)}</p>`, lang));
      const ask = body.ask ?? (browser ? undefined : 'withdraw');
      let address: string;
      try {
        if (!ask) throw validationError({ ask: [w.badAsk] });
        address = requests.address(body.address ?? '');
      } catch (error) {
        if (!browser) throw error;
        const message = ask ? w.badAddress : w.badAsk;
        return sendPage(
          reply,
          422,
          page(w.title(workspace.name), askForm(w, lang, request.params.publicId, body, message), lang),
        );
      }
      if (await limited(rateLimits, request, reply, `privacy-ip:${request.ip}`, w, lang)) return reply;
      if (await limited(rateLimits, request, reply, `privacy:${workspace.id}:${address}`, w, lang))
        return reply;
      const sent = requests.sendCode(workspace.id, address);
      if (!browser)
        return {
          success: true as const,
          message: 'If the address can receive messages, a code is on its way.',
          data: sent,
        };
      return sendPage(
        reply,
        200,
        page(
          w.title(workspace.name),
          codeForm(w, lang, request.params.publicId, { address, ask: ask!, note: body.note ?? '' }),
          lang,
        ),
      );
    },
  );
};

const requestRoute: FastifyPluginAsyncTypebox<PageDeps> = async (app, { requests, rateLimits }) => {
  app.post(
    '/privacy/:publicId/requests',
    {
      config: { permission: 'public' },
      schema: {
        tags: ['Privacy'],
        summary: 'The public form, step 2: the code, then the request or the withdrawal of consent',
        description:
          '`ask: "withdraw"` opts the address out of every channel (its voters get consent `withdrawn`, source `form`); any other `ask` records a verified request (`received_via: "public_form"`) due in PRIVACY_RESPONSE_DAYS. A wrong or expired code is 401 (five tries a code).',
        security: [],
        params: PublicId,
        body: AskBody,
        response: {
          200: Success(
            Type.Object({
              withdrawn: Type.Optional(Type.Literal(true)),
              request_id: Type.Optional(Type.String()),
              due_at: Type.Optional(Type.String({ format: 'date-time' })),
            }),
          ),
        },
      },
    },
    async (request, reply) => {
      const body = request.body ?? {};
      const { lang, w, browser, workspace } = await formContext(request, body.lang, requests);
      if (!workspace) return sendPage(reply, 404, page(w.notFound, `<p>${html(w.notFound)}</p>`, lang));
      if (await limited(rateLimits, request, reply, `privacy-ip:${request.ip}`, w, lang)) return reply;
      const ask = (body.ask ?? 'withdraw') as PublicAsk;
      const note = body.note?.trim() ? body.note.trim() : null;
      try {
        const address = requests.address(body.address ?? '');
        if (!body.code)
          throw validationError({ code: ['is required: the 6-digit code sent to the address.'] });
        const done = await requests.confirm(
          workspace.id,
          { userId: null, ip: request.ip ?? null },
          { address, code: body.code, ask, note },
        );
        if (!browser) return { success: true as const, message: 'Done.', data: done };
        const text =
          'withdrawn' in done
            ? w.withdrawn
            : w.received(done.request_id, new Date(done.due_at).toISOString().slice(0, 10));
        return sendPage(
          reply,
          200,
          page(w.title(workspace.name), `<p role="status">${html(text)}</p>`, lang),
        );
      } catch (error) {
        if (!browser || !(error instanceof AppError)) throw error;
        const status = error.code === 'unauthorized' ? 401 : 422;
        const message = error.code === 'unauthorized' ? w.badCode : w.badAddress;
        const values = { address: body.address ?? '', ask, note: body.note ?? '' };
        return sendPage(
          reply,
          status,
          page(w.title(workspace.name), codeForm(w, lang, request.params.publicId, values, message), lang),
        );
      }
    },
  );
};
