import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { connect } from '../src/db/connect.ts';
import { migrateToLatest } from '../src/db/migrate.ts';
import { RateLimits } from '../src/http/rate-limit.ts';
import { buildTestApp, call, expectError, redisUrl, register, uniqueEmail, uniquePhone } from './helpers.ts';

const tight = {
  RATE_LIMIT_PUBLIC_PER_MIN: '4',
  RATE_LIMIT_AUTHENTICATED_PER_MIN: '3',
  RATE_LIMIT_AUTH_PER_MIN: '5',
  RATE_LIMIT_OTP_PER_MIN: '3',
};

describe('rate limits (in memory)', () => {
  it('sign-in: 5 a minute per email, then 429 with Retry-After; the rest of the office (other emails, one address) is not locked out', async () => {
    const t = await buildTestApp('sqlite', tight);
    try {
      const mistyped = uniqueEmail();
      for (let i = 0; i < 5; i++) {
        const res = await call(t.app, 'POST', '/api/auth/login', {
          body: { email: mistyped, password: 'wrong password' },
        });
        expect(res.status).toBe(401);
      }
      const limited = await call(t.app, 'POST', '/api/auth/login', {
        body: { email: ` ${mistyped.toUpperCase()} `, password: 'wrong password' },
      });
      expectError(limited, 429, 'rate_limit_exceeded');
      expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
      expect(Number(limited.headers['retry-after'])).toBeLessThanOrEqual(60);
      expect(limited.headers['x-ratelimit-reset']).toBe(limited.headers['retry-after']);
      expect(limited.headers['x-ratelimit-remaining']).toBe('0');
      // A colleague on the same network signs in as usual.
      const colleague = await register(t.app);
      const ok = await call(t.app, 'POST', '/api/auth/login', {
        body: { email: colleague.user.email, password: colleague.password },
      });
      expect(ok.status, ok.raw).toBe(200);
    } finally {
      await t.close();
    }
  });

  it('sign-in and sign-up: RATE_LIMIT_AUTH_IP_PER_MIN per address, whatever the emails', async () => {
    const t = await buildTestApp('sqlite', { ...tight, RATE_LIMIT_AUTH_IP_PER_MIN: '6' });
    try {
      for (let i = 0; i < 6; i++) {
        const res = await call(t.app, 'POST', '/api/auth/login', {
          body: { email: uniqueEmail(), password: 'wrong password' },
        });
        expect(res.status).toBe(401);
      }
      const limited = await call(t.app, 'POST', '/api/auth/register', {
        body: { name: 'A', email: uniqueEmail(), password: 'campaign office 2026' },
      });
      expectError(limited, 429, 'rate_limit_exceeded');
    } finally {
      await t.close();
    }
  });

  it('TRUST_PROXY as a hop count or proxy list: an X-Forwarded-For the client sent does not escape the limit', async () => {
    for (const trust of ['1', '127.0.0.1']) {
      const t = await buildTestApp('sqlite', { ...tight, TRUST_PROXY: trust });
      try {
        // The proxy (the injected connection, 127.0.0.1) appends what it saw; the client forges the rest.
        const forged = (i: number) => ({ headers: { 'x-forwarded-for': `10.9.9.${i}, 203.0.113.7` } });
        for (let i = 0; i < 4; i++)
          expect((await call(t.app, 'GET', '/api/healthz', forged(i))).status).toBe(200);
        expectError(await call(t.app, 'GET', '/api/healthz', forged(99)), 429, 'rate_limit_exceeded');
        // Another real client (the address the proxy appended) has its own count.
        expect(
          (await call(t.app, 'GET', '/api/healthz', { headers: { 'x-forwarded-for': '203.0.113.8' } }))
            .status,
        ).toBe(200);
      } finally {
        await t.close();
      }
    }
    await expect(buildTestApp('sqlite', { TRUST_PROXY: 'proxy.local' })).rejects.toThrow(/TRUST_PROXY/);
  });

  it('public endpoints: counted per client address (X-Forwarded-For only with TRUST_PROXY)', async () => {
    const t = await buildTestApp('sqlite', { ...tight, TRUST_PROXY: 'true' });
    try {
      for (let i = 0; i < 4; i++)
        expect(
          (await call(t.app, 'GET', '/api/healthz', { headers: { 'x-forwarded-for': '203.0.113.1' } }))
            .status,
        ).toBe(200);
      expectError(
        await call(t.app, 'GET', '/api/healthz', { headers: { 'x-forwarded-for': '203.0.113.1' } }),
        429,
        'rate_limit_exceeded',
      );
      expect(
        (await call(t.app, 'GET', '/api/healthz', { headers: { 'x-forwarded-for': '203.0.113.2' } })).status,
      ).toBe(200);
    } finally {
      await t.close();
    }
    const untrusted = await buildTestApp('sqlite', tight);
    try {
      for (let i = 0; i < 4; i++)
        await call(untrusted.app, 'GET', '/api/healthz', {
          headers: { 'x-forwarded-for': `198.51.100.${i}` },
        });
      expectError(
        await call(untrusted.app, 'GET', '/api/healthz', { headers: { 'x-forwarded-for': '198.51.100.99' } }),
        429,
        'rate_limit_exceeded',
      );
    } finally {
      await untrusted.close();
    }
  });

  it('OTP endpoints: 3 per minute per phone, whatever the address', async () => {
    const t = await buildTestApp('sqlite', { ...tight, TRUST_PROXY: 'true' });
    try {
      const phone = uniquePhone();
      for (let i = 0; i < 3; i++) {
        const res = await call(t.app, 'POST', '/api/auth/send-otp', {
          body: { phone },
          headers: { 'x-forwarded-for': `192.0.2.${i}` },
        });
        expect(res.status).toBe(200);
      }
      const limited = await call(t.app, 'POST', '/api/auth/verify-otp', {
        body: { phone, otp: '123456' },
        headers: { 'x-forwarded-for': '192.0.2.77' },
      });
      expectError(limited, 429, 'rate_limit_exceeded');
      expect(limited.headers['retry-after']).toBeDefined();
      const otherPhone = await call(t.app, 'POST', '/api/auth/send-otp', {
        body: { phone: uniquePhone() },
        headers: { 'x-forwarded-for': '192.0.2.78' },
      });
      expect(otherPhone.status).toBe(200);
    } finally {
      await t.close();
    }
  });

  it('authenticated endpoints: counted per user', async () => {
    const t = await buildTestApp('sqlite');
    const limited = await buildTestApp('sqlite', tight);
    try {
      const a = await register(limited.app);
      const b = await register(limited.app);
      for (let i = 0; i < 3; i++)
        expect(
          (await call(limited.app, 'GET', '/api/user', { token: a.token })).headers['x-ratelimit-limit'],
        ).toBe('3');
      expectError(
        await call(limited.app, 'GET', '/api/user', { token: a.token }),
        429,
        'rate_limit_exceeded',
      );
      expect((await call(limited.app, 'GET', '/api/user', { token: b.token })).status).toBe(200);
    } finally {
      await t.close();
      await limited.close();
    }
  });
});

describe('rate limits on failed authentication and unknown paths', () => {
  it('bad or missing tokens: RATE_LIMIT_AUTH_FAILED_PER_MIN per client address, then 429; good tokens still work', async () => {
    const t = await buildTestApp('sqlite', { RATE_LIMIT_AUTH_FAILED_PER_MIN: '5', TRUST_PROXY: 'true' });
    try {
      const account = await register(t.app);
      const from = (ip: string) => ({ 'x-forwarded-for': ip });
      const statuses: number[] = [];
      for (let i = 0; i < 3; i++)
        statuses.push(
          (
            await call(t.app, 'GET', '/api/user', {
              token: `1|${'x'.repeat(40)}`,
              headers: from('203.0.113.9'),
            })
          ).status,
        );
      for (let i = 0; i < 2; i++)
        statuses.push((await call(t.app, 'GET', '/api/voters', { headers: from('203.0.113.9') })).status);
      expect(statuses).toEqual([401, 401, 401, 401, 401]);
      const limited = await call(t.app, 'GET', '/api/user', {
        token: 'not a token',
        headers: from('203.0.113.9'),
      });
      expectError(limited, 429, 'rate_limit_exceeded');
      expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
      expect(limited.headers['x-ratelimit-limit']).toBe('5');
      // Only failures count: a valid token from the same address is served; another address is not limited.
      expect(
        (await call(t.app, 'GET', '/api/user', { token: account.token, headers: from('203.0.113.9') }))
          .status,
      ).toBe(200);
      expectError(
        await call(t.app, 'GET', '/api/user', { headers: from('203.0.113.10') }),
        401,
        'unauthorized',
      );
      // 300 bad requests in a burst: all but the first 5 are refused.
      const burst = await Promise.all(
        Array.from({ length: 300 }, () => call(t.app, 'GET', '/api/user', { headers: from('203.0.113.11') })),
      );
      expect(burst.filter((r) => r.status === 401)).toHaveLength(5);
      expect(burst.filter((r) => r.status === 429)).toHaveLength(295);
    } finally {
      await t.close();
    }
  });

  it('unknown paths and methods count in the public bucket per client address', async () => {
    const t = await buildTestApp('sqlite', { ...tight, TRUST_PROXY: 'true' });
    try {
      const from = { 'x-forwarded-for': '198.51.100.7' };
      expectError(await call(t.app, 'GET', '/api/nothing-here', { headers: from }), 404, 'not_found');
      expectError(await call(t.app, 'GET', '/nowhere', { headers: from }), 404, 'not_found');
      expectError(await call(t.app, 'DELETE', '/api/healthz', { headers: from }), 405, 'method_not_allowed');
      expect((await call(t.app, 'GET', '/api/healthz', { headers: from })).status).toBe(200);
      const limited = await call(t.app, 'GET', '/api/nothing-here', { headers: from });
      expectError(limited, 429, 'rate_limit_exceeded');
      expect(limited.headers['retry-after']).toBeDefined();
      expectError(
        await call(t.app, 'GET', '/api/nothing-here', { headers: { 'x-forwarded-for': '198.51.100.8' } }),
        404,
        'not_found',
      );
    } finally {
      await t.close();
    }
  });
});

describe.skipIf(!redisUrl)('rate limits shared through Redis', () => {
  it('two API processes enforce one limit', async () => {
    const prefix = `test:${randomUUID()}`;
    const env = {
      DATABASE_URL: 'sqlite::memory:',
      LOG_LEVEL: 'silent',
      REDIS_URL: redisUrl as string,
      ...tight,
    };
    const make = async () => {
      const config = loadConfig(env);
      const db = connect(config.databaseUrl);
      await migrateToLatest(db);
      return { app: await buildApp({ config, db, rateLimitPrefix: prefix }), db };
    };
    const one = await make();
    const two = await make();
    // Both connect to Redis before counting, so no request falls back to memory.
    const probe = new Redis(redisUrl as string);
    await probe.ping();
    await new Promise((r) => setTimeout(r, 200));
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 6; i++) {
        const app = i % 2 === 0 ? one.app : two.app;
        statuses.push((await call(app, 'GET', '/api/healthz')).status);
      }
      expect(statuses).toEqual([200, 200, 200, 200, 429, 429]);
      const keys = await probe.keys(`${prefix}:public*`);
      expect(keys.length).toBe(1);
    } finally {
      probe.disconnect();
      await one.app.close();
      await two.app.close();
      await one.db.close();
      await two.db.close();
    }
  });

  it('counts atomically under concurrency', async () => {
    const redis = new Redis(redisUrl as string);
    try {
      const limits = new RateLimits(
        {
          rateLimits: {
            public: 10,
            authenticated: 10,
            auth: 10,
            authIp: 10,
            otp: 10,
            callback: 10,
            failedAuth: 10,
          },
        },
        redis,
        `test:${randomUUID()}`,
      );
      const results = await Promise.all(Array.from({ length: 25 }, () => limits.consume('public', 'ip:1')));
      expect(results.filter((r) => r.allowed)).toHaveLength(10);
    } finally {
      redis.disconnect();
    }
  });
});
