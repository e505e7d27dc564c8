import cors from '@fastify/cors';
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
];
const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];
const HEADERS = ['authorization', 'content-type', 'idempotency-key', 'prefer', 'x-request-id'];
/** How long a browser may keep a preflight's answer. */
const MAX_AGE_SECONDS = 600;

/**
 * CORS for a browser front end on another origin (CORS_ORIGINS), by @fastify/cors. Unset: no CORS header at
 * all, and a preflight is an unknown route like any OPTIONS request. Otherwise a request from an allowed origin
 * gets Access-Control-Allow-Origin (the origin itself, or * when any is allowed), and its preflight is answered
 * 204 with the methods and headers the API takes, before authentication. Other origins get no CORS header (their
 * browser refuses the answer) and their preflight is a 405, as without CORS. Tokens travel in the Authorization header, not
 * cookies, so credentials are not allowed.
 */
export async function installCors(app: FastifyInstance, origins: Config['corsOrigins']): Promise<void> {
  if (origins === undefined) return;
  // The plugin's catch-all OPTIONS route is public, as a preflight carries no token.
  app.addHook('onRoute', (route) => {
    if (route.url === '*' && route.method === 'OPTIONS')
      route.config = { ...route.config, permission: 'public' };
  });
  await app.register(cors, {
    origin:
      origins === '*'
        ? '*'
        : (origin: string | undefined, done: (error: Error | null, allow: string | false) => void) =>
            done(null, origin !== undefined && origins.includes(origin) ? origin : false),
    methods: METHODS,
    allowedHeaders: HEADERS,
    exposedHeaders: EXPOSED,
    maxAge: MAX_AGE_SECONDS,
    credentials: false,
    // An OPTIONS request without Access-Control-Request-Method is answered as a preflight too, not with the
    // plugin's text/plain 400.
    strictPreflight: false,
  });
}
