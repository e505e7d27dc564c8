import type { FastifyInstance } from 'fastify';
import type { ApiDeprecation } from '../config.ts';

export const CURRENT_VERSION = 'v1';

/**
 * `/api/v1/...` and `/api/...` are one endpoint: the versioned path is rewritten before routing, so each
 * route is registered once. `/api/v2/...` matches nothing and is a 404 until a v2 exists.
 */
export function rewriteVersionedUrl(url: string): string {
  const match = /^\/api\/v1(?=\/|\?|$)/.exec(url);
  return match ? '/api' + url.slice(match[0].length) : url;
}

export function requestedVersion(originalUrl: string): string | undefined {
  if (!/^\/api(?=\/|\?|$)/.test(originalUrl)) return undefined;
  return /^\/api\/(v\d+)(?=\/|\?|$)/.exec(originalUrl)?.[1] ?? CURRENT_VERSION;
}

/** Deprecation (RFC 9745), Sunset (RFC 8594) and Link headers on every answer of a deprecated version. */
export function installDeprecationHeaders(app: FastifyInstance, deprecation: ApiDeprecation | undefined) {
  if (!deprecation) return;
  const headers: Record<string, string> = {
    deprecation: `@${Math.floor(deprecation.deprecatedAt.getTime() / 1000)}`,
  };
  if (deprecation.sunsetAt) headers.sunset = deprecation.sunsetAt.toUTCString();
  if (deprecation.migrationGuideUrl) {
    headers.link = `<${deprecation.migrationGuideUrl}>; rel="deprecation"; type="text/html"`;
  }
  app.addHook('onRequest', async (request, reply) => {
    const version = requestedVersion(request.originalUrl);
    if (version && deprecation.versions.includes(version)) reply.headers(headers);
  });
}
