import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import type { Role } from '../domain.ts';
import { AppError } from '../errors.ts';
import { can, type Permission, permissions } from './permissions.ts';
import type { Bucket, RateLimits } from './rate-limit.ts';

export interface AuthContext {
  userId: number;
  workspaceId: number;
  role: Role;
  tokenId: number;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** What the route needs; every route names one, or the app refuses to start. */
    permission?: Permission;
    /** The rate-limit bucket of a public route (default `public`); signed-in routes use `authenticated`. */
    rateLimit?: Bucket;
  }
  interface FastifyRequest {
    auth: AuthContext | null;
  }
}

export type Authenticate = (authorization: string | undefined) => Promise<AuthContext | null>;

/** The signed-in caller of a route that is not public. */
export function authOf(request: FastifyRequest): AuthContext {
  if (!request.auth) throw new AppError('unauthorized', 'Authentication required.');
  return request.auth;
}

/** Counts one request against `bucket` for `key`, sets the X-RateLimit-* headers, and throws 429 past the limit. */
export async function limitRequest(
  rateLimits: RateLimits,
  reply: FastifyReply,
  bucket: Bucket,
  key: string,
): Promise<void> {
  const state = await rateLimits.consume(bucket, key);
  const previous = Number(reply.getHeader('x-ratelimit-remaining') ?? Number.POSITIVE_INFINITY);
  // A route limited by two keys (OTP: address and phone) shows the tighter of the two.
  if (state.remaining <= previous) {
    reply.header('x-ratelimit-limit', state.limit);
    reply.header('x-ratelimit-remaining', state.remaining);
    reply.header('x-ratelimit-reset', state.resetSeconds);
  }
  if (!state.allowed) {
    throw new AppError(
      'rate_limit_exceeded',
      `Too many requests. Try again in ${state.resetSeconds} seconds.`,
      { retry_after: state.resetSeconds },
      { 'retry-after': String(state.resetSeconds), 'x-ratelimit-reset': String(state.resetSeconds) },
    );
  }
}

/**
 * The one place that decides who may call what: authenticates the bearer token, counts the request against
 * its rate-limit bucket, and checks the route's declared permission against the caller's role. At ready it
 * refuses to start when any route has not declared a permission.
 */
/** Routes that never touch the database: served while it is down. */
const WITHOUT_DATABASE = /^\/api(\/(healthz|readyz|docs.*|openapi\.json))?\/?$/;

export function installGuard(
  app: FastifyInstance,
  deps: { rateLimits: RateLimits; authenticate: Authenticate },
) {
  const routes: RouteOptions[] = [];
  app.decorateRequest('auth', null);

  app.addHook('onRoute', (route) => {
    routes.push(route);
  });

  app.addHook('onReady', async () => {
    for (const route of routes) {
      const permission = route.config?.permission;
      if (!permission || !(permissions as readonly string[]).includes(permission)) {
        const methods = Array.isArray(route.method) ? route.method.join(',') : route.method;
        throw new Error(
          `Route ${methods} ${route.url} declares no valid permission in config.permission; refusing to start.`,
        );
      }
    }
  });

  app.addHook('onRequest', async (request, reply) => {
    // A database known not to answer: refuse at once what needs it (not the index, the docs or the health
    // checks, which report the state themselves).
    if (
      app.databaseOutage?.isDown &&
      !request.is404 &&
      !WITHOUT_DATABASE.test(request.routeOptions.url ?? '')
    ) {
      throw new AppError(
        'service_unavailable',
        'The database does not answer right now; try again in a moment.',
        undefined,
        { 'retry-after': '1' },
      );
    }
    // Unknown paths and methods (404, 405) are public answers, counted as such per client address.
    if (request.is404) {
      await limitRequest(deps.rateLimits, reply, 'public', `ip:${request.ip}`);
      return;
    }
    const { permission, rateLimit } = request.routeOptions.config;
    if (permission === 'public') {
      await limitRequest(deps.rateLimits, reply, rateLimit ?? 'public', `ip:${request.ip}`);
      return;
    }
    const auth = await deps.authenticate(request.headers.authorization);
    if (!auth) {
      // Only failures count here, so a shared address's signed-in users are not held back by someone's
      // guessing; past the limit the answer is 429 instead of 401.
      await limitRequest(deps.rateLimits, reply, 'failedAuth', `ip:${request.ip}`);
      const given = request.headers.authorization;
      throw new AppError(
        'unauthorized',
        !given
          ? 'Authentication required: send Authorization: Bearer <access token>.'
          : !/^Bearer\s/i.test(given)
            ? `The Authorization header uses the ${/^\S+/.exec(given)?.[0]?.slice(0, 20) ?? 'wrong'} scheme: send Authorization: Bearer <access token>.`
            : 'The access token is invalid, expired or revoked. Sign in again to get a new one.',
      );
    }
    request.auth = auth;
    await limitRequest(deps.rateLimits, reply, 'authenticated', `user:${auth.userId}`);
    if (!permission || !can(auth.role, permission)) {
      throw new AppError('forbidden', `Your role (${auth.role}) does not allow this action.`);
    }
  });
}
