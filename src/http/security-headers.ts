import type { FastifyReply, FastifyRequest } from 'fastify';

/** The API reference (page, assets, document): public, the same for everyone, so it may be cached. */
const DOCS = /^\/api\/(docs|openapi\.json)(\/|\?|$)/;

/**
 * The reference page's Content-Security-Policy: its scripts, styles, images and the document all come from
 * this server (swagger-ui's assets are served here, and it has no inline script); no other page may frame it.
 * Checked in Chromium: the page renders every operation with no CSP violation.
 */
export const DOCS_CSP = [
  "default-src 'self'",
  "base-uri 'self'",
  "connect-src 'self'",
  "font-src 'self' data:",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "img-src 'self' data:",
  "object-src 'none'",
  "script-src 'self'",
  "script-src-attr 'none'",
  // swagger-ui sets one style attribute from its bundle; a style cannot run code, a script can.
  "style-src 'self' 'unsafe-inline'",
].join('; ');

/**
 * Headers on every response, set before anything can answer (so error answers carry them too): no MIME
 * sniffing and no framing anywhere; nothing stored by browsers or proxies, since answers carry tokens and
 * voters' personal data, except the public API reference. The reference's CSP is set by swagger-ui's
 * plugin (openapi.ts), with DOCS_CSP.
 */
export function setSecurityHeaders(request: FastifyRequest, reply: FastifyReply): void {
  reply.header('x-content-type-options', 'nosniff');
  reply.header('x-frame-options', 'DENY');
  if (!DOCS.test(request.url)) reply.header('cache-control', 'no-store');
}
