import type { FastifyReply } from 'fastify';

/**
 * The pages a person reads without signing in (the unsubscribe link's, the public privacy page): one plain
 * HTML shell, no script, in English or Hindi.
 */

export type PageLanguage = 'en' | 'hi';

/** No script, no outside resource; forms post to this service only; never framed. */
export const PAGE_CSP =
  "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'";

export const html = (text: string) =>
  text.replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!,
  );

/** Hindi when the request's Accept-Language ranks it above English, else English. */
export function languageOf(header: string | undefined): PageLanguage {
  let best: { lang: PageLanguage; q: number } = { lang: 'en', q: 0 };
  for (const part of (header ?? '').split(',')) {
    const [tag, ...params] = part.trim().toLowerCase().split(';');
    const q = Number(
      params
        .find((p) => p.trim().startsWith('q='))
        ?.trim()
        .slice(2) ?? '1',
    );
    const lang = tag?.startsWith('hi') ? 'hi' : tag?.startsWith('en') ? 'en' : undefined;
    if (lang && Number.isFinite(q) && q > best.q) best = { lang, q };
  }
  return best.lang;
}

export function page(title: string, body: string, lang: PageLanguage = 'en'): string {
  return `<!doctype html>
<html lang="${lang}"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${html(title)}</title>
<style>body{font-family:system-ui,"Noto Sans","Noto Sans Devanagari",sans-serif;max-width:40rem;margin:3rem auto;padding:0 1rem;line-height:1.5;color:#1a1a1a}
button{font:inherit;padding:.6rem 1.2rem;border:0;border-radius:.3rem;background:#b3261e;color:#fff;cursor:pointer}
button:focus,input:focus,select:focus,textarea:focus{outline:3px solid #1a73e8;outline-offset:2px}
label{display:block;margin:.8rem 0 .2rem;font-weight:600}
input,select,textarea{font:inherit;width:100%;box-sizing:border-box;padding:.5rem;border:1px solid #767676;border-radius:.3rem}
.notice{white-space:pre-wrap;border-left:4px solid #ddd;padding-left:1rem}
nav{text-align:right}.error{color:#b3261e;font-weight:600}</style></head>
<body><main><h1>${html(title)}</h1>${body}</main></body></html>`;
}

/** Sends a page with its status and the page CSP. */
export function sendPage(reply: FastifyReply, status: number, text: string): FastifyReply {
  return reply
    .code(status)
    .header('content-security-policy', PAGE_CSP)
    .type('text/html; charset=utf-8')
    .serializer((payload: unknown) => String(payload))
    .send(text);
}

/** Whether the caller is a browser (it asks for HTML): it reads a page; any other client the JSON envelope. */
export const wantsHtml = (accept: string | undefined) => /\btext\/html\b/.test(accept ?? '');
