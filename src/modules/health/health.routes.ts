import { once } from 'node:events';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Redis } from 'ioredis';
import { sql } from 'kysely';
import { Type } from 'typebox';
import type { Db } from '../../db/connect.ts';
import { migrations } from '../../db/migrate.ts';
import { AppError } from '../../errors.ts';
import { Success } from '../../http/schemas.ts';
import { within } from '../../lib/time-limit.ts';

declare module 'fastify' {
  interface FastifyInstance {
    /** Set by server.ts when SIGTERM/SIGINT arrives: GET /api/readyz answers 503 from then on. */
    shuttingDown: boolean;
    /** The database known not to answer: requests that need it are refused at once (src/db/outage.ts). */
    databaseOutage: import('../../db/outage.ts').DatabaseOutage;
  }
}

const Health = Type.Object(
  {
    status: Type.Literal('ok'),
    database: Type.Literal('ok'),
    dialect: Type.String({ description: 'sqlite or postgres' }),
  },
  { title: 'Health' },
);

const Ready = Type.Object(
  {
    status: Type.Literal('ready'),
    migrations: Type.Literal('ok'),
    database: Type.Literal('ok'),
    redis: Type.Union([Type.Literal('ok'), Type.Literal('not_configured')]),
  },
  { title: 'Readiness' },
);

const Index = Type.Object(
  {
    name: Type.String(),
    docs: Type.String({ description: 'The API reference page' }),
    openapi: Type.String({ description: 'The OpenAPI 3.1 document' }),
    health: Type.String(),
    ready: Type.String(),
  },
  { title: 'ApiIndex' },
);

/**
 * True once Redis answers a PING. A client still connecting (just after start, or reconnecting) is given the
 * caller's time limit to get there rather than being reported down at once; one that has given up is down.
 */
async function pingWhenReady(redis: Redis, ms: number): Promise<boolean> {
  if (redis.status === 'end' || redis.status === 'close') return false;
  if (redis.status !== 'ready') await once(redis, 'ready', { signal: AbortSignal.timeout(ms) });
  await redis.ping();
  return true;
}

/** The databases whose migrations this build knows have all been found applied (then they stay so). */
const migrated = new WeakSet<Db>();

/** True once every migration this build knows is recorded as applied in `db`. */
async function migrationsApplied(db: Db): Promise<boolean> {
  if (migrated.has(db)) return true;
  const applied = await sql<{ name: string }>`select name from kysely_migration`.execute(db.kysely);
  const names = new Set(applied.rows.map((row) => row.name));
  const all = Object.keys(migrations).every((name) => names.has(name));
  if (all) migrated.add(db);
  return all;
}

const unavailable = (message: string, details: Record<string, string>) =>
  new AppError('service_unavailable', message, details);

interface HealthRouteDeps {
  db: Db;
  redis: Redis | undefined;
  redisTimeoutMs: number;
}

export const healthRoutes: FastifyPluginAsyncTypebox<HealthRouteDeps> = async (app, deps) => {
  for (const routes of [indexAndHealthRoutes, readinessRoutes]) await routes(app, deps);
};

const indexAndHealthRoutes: FastifyPluginAsyncTypebox<HealthRouteDeps> = async (app, { db }) => {
  app.get(
    '/',
    {
      config: { permission: 'public' },
      schema: {
        tags: ['Health'],
        summary: "The API's address: links to its reference (/api/docs) and its OpenAPI document",
        response: { 200: Success(Index) },
      },
    },
    async () => ({
      success: true as const,
      message: 'Campaign Engagement Service API. The reference is at /api/docs.',
      data: {
        name: 'Campaign Engagement Service',
        docs: '/api/docs',
        openapi: '/api/openapi.json',
        health: '/api/healthz',
        ready: '/api/readyz',
      },
    }),
  );

  app.get(
    '/healthz',
    {
      config: { permission: 'public' },
      schema: {
        tags: ['Health'],
        summary: 'Health check: 200 when the database answers, 503 service_unavailable when it does not',
        response: { 200: Success(Health) },
      },
    },
    async (request) => {
      try {
        await db.ping();
      } catch (error) {
        request.log.error({ err: error }, 'health check: database unreachable');
        // The check's own timeout opens the breaker too: the next requests are refused at once, not held.
        app.databaseOutage?.report();
        throw new AppError('service_unavailable', 'The database cannot be reached.', {
          database: 'unreachable',
        });
      }
      return {
        success: true as const,
        message: 'Service is healthy.',
        data: { status: 'ok' as const, database: 'ok' as const, dialect: db.dialect },
      };
    },
  );
};

const readinessRoutes: FastifyPluginAsyncTypebox<HealthRouteDeps> = async (
  app,
  { db, redis, redisTimeoutMs },
) => {
  app.get(
    '/readyz',
    {
      config: { permission: 'public' },
      schema: {
        tags: ['Health'],
        summary:
          'Readiness: 200 once migrations have run and the database and Redis (where set) answer; 503 service_unavailable otherwise and while shutting down',
        response: { 200: Success(Ready) },
      },
    },
    async (request) => {
      if (app.shuttingDown) throw unavailable('The service is shutting down.', { state: 'shutting_down' });
      try {
        await db.ping();
      } catch (error) {
        request.log.warn({ err: error }, 'readiness: database unreachable');
        app.databaseOutage?.report();
        throw unavailable('The database cannot be reached.', { database: 'unreachable' });
      }
      let applied = false;
      try {
        applied = await migrationsApplied(db);
      } catch {
        // no migration table yet
      }
      if (!applied) throw unavailable('The database migrations have not run yet.', { migrations: 'pending' });
      if (redis) {
        const answered = await within(
          pingWhenReady(redis, redisTimeoutMs),
          redisTimeoutMs,
          () => false,
        ).catch(() => false); // any failure of the PING: Redis is not ready
        if (!answered) throw unavailable('Redis cannot be reached.', { redis: 'unreachable' });
      }
      return {
        success: true as const,
        message: 'Service is ready.',
        data: {
          status: 'ready' as const,
          migrations: 'ok' as const,
          database: 'ok' as const,
          redis: redis ? ('ok' as const) : ('not_configured' as const),
        },
      };
    },
  );
};
