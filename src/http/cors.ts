import type { FastifyInstance } from 'fastify';
import type { Config } from '../config.ts';

/** What a browser script may read of an answer besides the simple headers. */
const EXPOSED = [
  'x-request-id',
  'x-ratelimit-limit',
  'x-ratelimit-remaining',
  'x-ratelimit-reset',
  'retry-after',
  'idempotent-replayed',
  'content-disposition',
  'deprecation',
  'sunset',
  'link',
  'location',
  'preference-applied',
].join(', ');
const METHODS = 'GET, POST, PUT, PATCH, DELETE';
const HEADERS = 'authorization, content-type, idempotency-key, prefer, x-request-id';
/** How long a browser may keep a preflight's answer. */
const MAX_AGE_SECONDS = 600;

/**
 * CORS for a browser front end on another origin (CORS_ORIGINS). Unset: no CORS header at all, and a
 * preflight is an unknown route like any OPTIONS request. Otherwise a request from an allowed origin gets
 * Access-Control-Allow-Origin (the origin itself, or * when any is allowed), and its preflight is answered
 * 204 with the methods and headers the API takes. Other origins get nothing: their browser refuses the
 * answer. Tokens travel in the Authorization header, not cookies, so credentials are not allowed.
 */
export function installCors(app: FastifyInstance, origins: Config['corsOrigins']): void {
  if (origins === undefined) return;
  const allowed = origins === '*' ? () => true : (origin: string) => origins.includes(origin);
  app.addHook('onRequest', async (request, reply) => {
    const origin = request.headers.origin;
    if (origins !== '*') reply.header('vary', 'Origin');
    if (typeof origin !== 'string' || !allowed(origin)) return;
    reply.header('access-control-allow-origin', origins === '*' ? '*' : origin);
    const preflight = request.method === 'OPTIONS' && request.headers['access-control-request-method'];
    if (!preflight) {
      reply.header('access-control-expose-headers', EXPOSED);
      return;
    }
    reply.header('access-control-allow-methods', METHODS);
    reply.header('access-control-allow-headers', HEADERS);
    reply.header('access-control-max-age', String(MAX_AGE_SECONDS));
    return reply.code(204).send();
  });
}
