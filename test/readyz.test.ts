import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../src/app.ts';
import { ConfigError, loadConfig } from '../src/config.ts';
import { connect } from '../src/db/connect.ts';
import { migrateToLatest } from '../src/db/migrate.ts';
import { FaultProxy } from './fault-proxy.ts';
import { buildTestApp, call, dialects, expectError, redisUrl, type TestApp } from './helpers.ts';

for (const dialect of dialects) {
  describe(`GET /api/readyz and GET /api (${dialect})`, () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await buildTestApp(dialect);
    });
    afterAll(async () => {
      await t.close();
    });

    it('is ready once migrations have run and the database answers, without a token', async () => {
      const res = await call(t.app, 'GET', '/api/readyz');
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({
        success: true,
        data: { status: 'ready', migrations: 'ok', database: 'ok', redis: 'not_configured' },
      });
    });

    it('answers 503 while the process is shutting down', async () => {
      t.app.shuttingDown = true;
      try {
        const res = await call(t.app, 'GET', '/api/readyz');
        expectError(res, 503, 'service_unavailable');
        expect(res.body.message).toMatch(/shutting down/);
        // Liveness is another question: the process still answers.
        expect((await call(t.app, 'GET', '/api/healthz')).status).toBe(200);
      } finally {
        t.app.shuttingDown = false;
      }
    });

    it('GET /api links to the reference and the OpenAPI document, which both answer', async () => {
      for (const url of ['/api', '/api/']) {
        const res = await call(t.app, 'GET', url);
        expect(res.status).toBe(200);
        expect(res.body.data).toMatchObject({ docs: '/api/docs', openapi: '/api/openapi.json' });
      }
      const index = (await call(t.app, 'GET', '/api')).body.data;
      expect((await t.app.inject({ method: 'GET', url: index.openapi })).statusCode).toBe(200);
      expect((await t.app.inject({ method: 'GET', url: index.docs })).statusCode).toBeLessThan(400);
      const document = (await call(t.app, 'GET', '/api/openapi.json')).body;
      expect(Object.keys(document.paths)).toEqual(expect.arrayContaining(['/api/readyz', '/api']));
    });
  });
}

describe('GET /api/readyz before migrations', () => {
  it('is 503 on a database whose migrations have not run', async () => {
    const config = loadConfig({ DATABASE_URL: 'sqlite::memory:', LOG_LEVEL: 'silent' });
    const db = connect(config.databaseUrl, config.database);
    const app = await buildApp({ config, db, logger: false });
    try {
      const before = await call(app, 'GET', '/api/readyz');
      expectError(before, 503, 'service_unavailable');
      expect(before.body.message).toMatch(/migrations/);
      await migrateToLatest(db);
      expect((await call(app, 'GET', '/api/readyz')).status).toBe(200);
    } finally {
      await app.close();
      await db.close();
    }
  });
});

describe('REDIS_PREFIX', () => {
  it('is checked at start', () => {
    expect(() => loadConfig({ REDIS_PREFIX: 'has space' })).toThrow(ConfigError);
    expect(() => loadConfig({ REDIS_PREFIX: 'has space' })).toThrow(/REDIS_PREFIX/);
    expect(loadConfig({}).redisPrefix).toBe('ces:');
    expect(loadConfig({ REDIS_PREFIX: 'office-a:' }).redisPrefix).toBe('office-a:');
  });

  describe.runIf(redisUrl)('with Redis', () => {
    it('starts every key the API writes, and readyz answers with Redis', async () => {
      const prefix = `ces-test-${randomUUID()}:`;
      const config = loadConfig({
        DATABASE_URL: 'sqlite::memory:',
        LOG_LEVEL: 'silent',
        REDIS_URL: redisUrl,
        REDIS_PREFIX: prefix,
        // A busy CI machine can take longer than the 500 ms default to connect and answer.
        REDIS_TIMEOUT_MS: '5000',
      });
      const db = connect(config.databaseUrl, config.database);
      await migrateToLatest(db);
      const app = await buildApp({ config, db, logger: false });
      const redis = new Redis(redisUrl as string);
      try {
        const before = new Set(await redis.keys('*'));
        // Asked first, while the app's client may still be connecting: readyz waits for it rather than failing.
        const ready = await call(app, 'GET', '/api/readyz');
        expect(ready.status).toBe(200);
        expect(ready.body.data.redis).toBe('ok');
        for (let i = 0; i < 3; i++) expect((await call(app, 'GET', '/api/healthz')).status).toBe(200);
        const created = (await redis.keys('*')).filter((key) => !before.has(key));
        const ours = await redis.keys(`${prefix}*`);
        expect(ours.length).toBeGreaterThan(0);
        // Keys made meanwhile by other test runs carry their own prefixes; none of this app's lacks ours.
        expect(created.filter((key) => key.startsWith('ces-test-') && !key.startsWith(prefix))).toEqual([]);
        expect(ours.every((key) => key.startsWith(`${prefix}rl:`))).toBe(true);
        if (ours.length > 0) await redis.del(...ours);
      } finally {
        redis.disconnect();
        await app.close();
        await db.close();
      }
    });

    it('readyz is 503 when Redis does not answer', async () => {
      const config = loadConfig({
        DATABASE_URL: 'sqlite::memory:',
        LOG_LEVEL: 'silent',
        REDIS_URL: 'redis://127.0.0.1:1',
        REDIS_TIMEOUT_MS: '200',
      });
      const db = connect(config.databaseUrl, config.database);
      await migrateToLatest(db);
      const app = await buildApp({ config, db, logger: false });
      try {
        const res = await call(app, 'GET', '/api/readyz');
        expectError(res, 503, 'service_unavailable');
        expect(res.body.message).toMatch(/Redis/);
      } finally {
        await app.close();
        await db.close();
      }
    });

    it('readyz waits, within REDIS_TIMEOUT_MS, for a Redis client that is still connecting', async () => {
      const proxy = await new FaultProxy(
        '127.0.0.1',
        Number(new URL(redisUrl as string).port || 6379),
      ).start();
      proxy.set('stall');
      const config = loadConfig({
        DATABASE_URL: 'sqlite::memory:',
        LOG_LEVEL: 'silent',
        REDIS_URL: proxy.url(redisUrl as string),
        REDIS_TIMEOUT_MS: '5000',
      });
      const db = connect(config.databaseUrl, config.database);
      await migrateToLatest(db);
      const app = await buildApp({ config, db, logger: false });
      try {
        const pending = call(app, 'GET', '/api/readyz');
        await new Promise((resolve) => setTimeout(resolve, 300));
        proxy.set('pass');
        const res = await pending;
        expect(res.status).toBe(200);
        expect(res.body.data.redis).toBe('ok');
      } finally {
        await app.close();
        await db.close();
        await proxy.close();
      }
    });
  });
});
