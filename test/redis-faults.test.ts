import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { connect, type Db } from '../src/db/connect.ts';
import { migrateToLatest } from '../src/db/migrate.ts';
import { FaultProxy } from './fault-proxy.ts';
import { call, expectError, redisUrl } from './helpers.ts';

/**
 * Redis reset, stalled and restored between the app and Redis (through a TCP proxy): requests keep being
 * answered within about a second, counted in memory meanwhile without restarting the window's counts, the
 * change is logged once each way, and Redis is used again without a restart.
 */
describe.skipIf(!redisUrl)('rate limits when Redis misbehaves', () => {
  const target = new URL(redisUrl ?? 'redis://127.0.0.1:6379');
  const proxy = new FaultProxy(target.hostname, Number(target.port || 6379));
  const prefix = `test:${randomUUID()}`;
  const lines: { level: number; msg: string }[] = [];
  let app: FastifyInstance;
  let db: Db;
  let probe: Redis;

  const healthz = async (ip: string) => {
    const started = performance.now();
    const res = await call(app, 'GET', '/api/healthz', { headers: { 'x-forwarded-for': ip } });
    return { res, ms: performance.now() - started };
  };
  const said = (words: string) => lines.filter((l) => l.msg.includes(words)).length;
  const sharedCount = async (ip: string) => Number((await probe.get(`${prefix}:public:ip:${ip}`)) ?? 0);

  beforeAll(async () => {
    await proxy.start();
    const config = loadConfig({
      DATABASE_URL: 'sqlite::memory:',
      LOG_LEVEL: 'info',
      REDIS_URL: proxy.url(redisUrl as string),
      REDIS_TIMEOUT_MS: '200',
      RATE_LIMIT_PUBLIC_PER_MIN: '8',
      TRUST_PROXY: 'true',
    });
    db = connect(config.databaseUrl);
    await migrateToLatest(db);
    app = await buildApp({
      config,
      db,
      rateLimitPrefix: prefix,
      logger: {
        level: 'info',
        stream: { write: (line: string) => void lines.push(JSON.parse(line) as (typeof lines)[number]) },
      },
    });
    probe = new Redis(redisUrl as string);
    // The app counts in Redis (through the proxy) before the test starts.
    await vi.waitFor(
      async () => {
        await healthz('192.0.2.1');
        expect(await sharedCount('192.0.2.1')).toBeGreaterThan(0);
      },
      { timeout: 5000, interval: 100 },
    );
  });

  afterAll(async () => {
    probe?.disconnect();
    await app?.close();
    await db?.close();
    await proxy.close();
  });

  it('stalled: answers within a second from memory, keeps counting the window, logs once; restored: shares again', async () => {
    const ip = '203.0.113.50';
    const down = said('Redis does not answer');
    const up = said('Redis answers again');
    for (let i = 0; i < 3; i++)
      expect((await healthz(ip)).res.headers['x-ratelimit-remaining']).toBe(String(7 - i));
    expect(await sharedCount(ip)).toBe(3);

    proxy.set('stall');
    for (let i = 0; i < 5; i++) {
      const { res, ms } = await healthz(ip);
      expect(res.status).toBe(200);
      expect(ms).toBeLessThan(1000);
      // The count goes on from where Redis left it: the cut does not restart the window.
      expect(res.headers['x-ratelimit-remaining']).toBe(String(4 - i));
    }
    const { res: limited, ms } = await healthz(ip);
    expect(ms).toBeLessThan(1000);
    expectError(limited, 429, 'rate_limit_exceeded');
    expect(said('Redis does not answer')).toBe(down + 1);
    expect(said('Redis answers again')).toBe(up);

    proxy.set('pass');
    await vi.waitFor(
      async () => {
        await healthz('203.0.113.51');
        expect(said('Redis answers again')).toBe(up + 1);
      },
      { timeout: 5000, interval: 100 },
    );
    // Back on Redis, and the requests seen during the stall still count: the address stays limited.
    expectError((await healthz(ip)).res, 429, 'rate_limit_exceeded');
    const fresh = '203.0.113.52';
    expect((await healthz(fresh)).res.status).toBe(200);
    expect(await sharedCount(fresh)).toBe(1);
    expect(said('Redis does not answer')).toBe(down + 1);
  });

  it('reset: answers at once from memory, logs once, and reconnects without a restart', async () => {
    const before = said('Redis does not answer');
    const ip = '203.0.113.60';
    expect((await healthz(ip)).res.status).toBe(200);
    expect(await sharedCount(ip)).toBe(1);

    proxy.set('reset');
    for (let i = 0; i < 7; i++) {
      const { res, ms } = await healthz(ip);
      expect(ms).toBeLessThan(1000);
      expect(res.status).toBe(200);
    }
    expectError((await healthz(ip)).res, 429, 'rate_limit_exceeded');
    expect(said('Redis does not answer')).toBe(before + 1);

    proxy.set('pass');
    const after = said('Redis answers again');
    await vi.waitFor(
      async () => {
        await healthz('203.0.113.61');
        expect(said('Redis answers again')).toBe(after + 1);
      },
      { timeout: 8000, interval: 200 },
    );
    const fresh = '203.0.113.62';
    expect((await healthz(fresh)).res.status).toBe(200);
    expect(await sharedCount(fresh)).toBe(1);
  }, 15_000);

  it('under load: 200 parallel requests while Redis stalls all answer within about a second, none is a 500', async () => {
    proxy.set('stall');
    try {
      const started = performance.now();
      const answers = await Promise.all(
        Array.from({ length: 200 }, (_, i) => healthz(`198.51.100.${i % 50}`)),
      );
      expect(performance.now() - started).toBeLessThan(3000);
      expect(answers.every((a) => a.ms < 2000)).toBe(true);
      expect(answers.every((a) => a.res.status === 200 || a.res.status === 429)).toBe(true);
      // 4 per address, 8 allowed a minute: every one is within the limit.
      expect(answers.filter((a) => a.res.status === 200)).toHaveLength(200);
    } finally {
      proxy.set('pass');
    }
    await vi.waitFor(
      async () => {
        const fresh = `203.0.113.${70 + Math.floor(Math.random() * 100)}`;
        await healthz(fresh);
        expect(await sharedCount(fresh)).toBe(1);
      },
      { timeout: 5000, interval: 200 },
    );
  });
});
