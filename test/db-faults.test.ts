import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect as connectTcp } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import { sql } from 'kysely';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { FaultProxy } from './fault-proxy.ts';
import {
  buildTestApp,
  call,
  expectError,
  multipartBody,
  register,
  uniquePhone,
  type Account,
  type TestApp,
} from './helpers.ts';

const pgUrl = process.env.TEST_DATABASE_URL;

/** Concurrent writes (voter creates) and reads, each answered with its status. */
function load(t: TestApp, owner: Account, n: number): Promise<number[]> {
  return Promise.all(
    Array.from({ length: n }, async (_, i) => {
      const res =
        i % 2 === 0
          ? await call(t.app, 'POST', '/api/voters', {
              token: owner.token,
              body: { name: `Fault ${i}`, phone: uniquePhone(), constituency: 'Varanasi' },
            })
          : await call(t.app, 'GET', '/api/voters?per_page=5', { token: owner.token });
      if (res.status >= 500 && res.status !== 503) throw new Error(`${res.status} ${res.raw}`);
      if (res.status === 503) expectError(res, 503, 'service_unavailable');
      return res.status;
    }),
  );
}

/** Retries a healthy answer for up to `ms`: the service recovers by itself, without a restart. */
async function recovered(t: TestApp, owner: Account, ms = 10_000): Promise<void> {
  const until = Date.now() + ms;
  for (;;) {
    const statuses = await load(t, owner, 6);
    if (statuses.every((s) => s === 200 || s === 201)) return;
    if (Date.now() > until) throw new Error(`not recovered: ${statuses.join(',')}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe.skipIf(!pgUrl)('PostgreSQL under faults (through a TCP proxy)', () => {
  let proxy: FaultProxy;
  let t: TestApp;
  let owner: Account;
  let transactionGate: { entered: () => void; held: Promise<void> } = {
    entered: () => {},
    held: Promise.resolve(),
  };

  beforeAll(async () => {
    const target = new URL(pgUrl!);
    proxy = await new FaultProxy(target.hostname, Number(target.port || 5432)).start();
    t = await buildTestApp('postgres', {
      DATABASE_URL: proxy.url(pgUrl!),
      DB_STATEMENT_TIMEOUT_MS: '1000',
      DB_POOL_ACQUIRE_TIMEOUT_MS: '1000',
    });
    // A statement that runs longer than DB_STATEMENT_TIMEOUT_MS on a healthy server.
    t.app.get('/api/test-slow', { config: { permission: 'public' } }, async () => {
      await sql`select pg_sleep(5)`.execute(t.db.kysely);
      return { success: true, data: null };
    });
    // A transaction held open (transactionGate) while the proxy resets the connection.
    t.app.post('/api/test-reset-in-transaction', { config: { permission: 'public' } }, async () => {
      await t.db.kysely.transaction().execute(async (trx) => {
        await sql`select 1`.execute(trx);
        transactionGate.entered();
        await transactionGate.held;
        await sql`select 1`.execute(trx);
      });
      return { success: true, data: null };
    });
    owner = await register(t.app);
  });
  afterAll(async () => {
    proxy.set('pass');
    await t?.close();
    await proxy?.close();
  });
  beforeEach(() => proxy.set('pass'));

  it('a reset while requests are writing answers 503, the process lives on, and it recovers', async () => {
    const during = load(t, owner, 40);
    await new Promise((resolve) => setTimeout(resolve, 5));
    proxy.set('reset');
    const statuses = await during;
    expect(statuses.every((s) => [200, 201, 503].includes(s))).toBe(true);
    const down = await load(t, owner, 10);
    expect(down.every((s) => s === 503)).toBe(true);
    expectError(await call(t.app, 'GET', '/api/healthz'), 503, 'service_unavailable');
    proxy.set('pass');
    await recovered(t, owner);
  });

  it('a reset inside a transaction: the ROLLBACK\'s "not queryable" error is a database outage (503), not a 500', async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const inside = new Promise<void>((resolve) => (transactionGate = { entered: resolve, held }));
    const answer = call(t.app, 'POST', '/api/test-reset-in-transaction');
    await inside;
    proxy.set('reset');
    await new Promise((resolve) => setTimeout(resolve, 50));
    release();
    expectError(await answer, 503, 'service_unavailable');
    proxy.set('pass');
    await recovered(t, owner);
  });

  it('a server that accepts but never answers: 503 within seconds, healthz too, then recovery', async () => {
    proxy.set('stall');
    const started = Date.now();
    const [statuses, health] = await Promise.all([
      load(t, owner, 30),
      (async () => {
        const before = Date.now();
        const res = await call(t.app, 'GET', '/api/healthz');
        return { res, ms: Date.now() - before };
      })(),
    ]);
    expect(statuses.every((s) => s === 503)).toBe(true);
    expect(Date.now() - started).toBeLessThan(6000);
    expectError(health.res, 503, 'service_unavailable');
    expect(health.ms).toBeLessThan(2000);
    proxy.set('pass');
    await recovered(t, owner);
    expect((await call(t.app, 'GET', '/api/healthz')).status).toBe(200);
  });

  it('once a request has found the database not answering, the next ones answer 503 at once until a background check finds it back', async () => {
    proxy.set('stall');
    // The first request finds the stall, after its own time limit.
    expectError(await call(t.app, 'GET', '/api/voters', { token: owner.token }), 503, 'service_unavailable');
    // The next ones do not wait for a timeout of their own.
    const started = Date.now();
    const answers = await Promise.all(
      Array.from({ length: 20 }, () => call(t.app, 'GET', '/api/voters?per_page=5', { token: owner.token })),
    );
    expect(Date.now() - started).toBeLessThan(500);
    for (const answer of answers) {
      expectError(answer, 503, 'service_unavailable');
      expect(answer.headers['retry-after']).toBe('1');
    }
    // Even a sign-in code, which is sent in the background (its answer never tells whether it went).
    expectError(
      await call(t.app, 'POST', '/api/auth/send-otp', { body: { phone: '+919812345678' } }),
      503,
      'service_unavailable',
    );
    // What needs no database is still served.
    expect((await call(t.app, 'GET', '/api')).status).toBe(200);
    proxy.set('pass');
    // The background check finds it answering within about a second, and requests go through again.
    await recovered(t, owner, 5000);
  });

  it('a health check that times out opens the breaker: the next request answers 503 at once', async () => {
    proxy.set('stall');
    expectError(await call(t.app, 'GET', '/api/healthz'), 503, 'service_unavailable');
    const started = Date.now();
    expectError(await call(t.app, 'GET', '/api/voters', { token: owner.token }), 503, 'service_unavailable');
    // Without the breaker the request waits out DB_POOL_ACQUIRE_TIMEOUT_MS (1 s here) or more.
    expect(Date.now() - started).toBeLessThan(500);
    proxy.set('pass');
    await recovered(t, owner, 5000);
  });

  it('a stall, a reset and a stall again under load: the process survives and recovers each time', async () => {
    for (const fault of ['stall', 'reset', 'stall'] as const) {
      const during = load(t, owner, 20);
      await new Promise((resolve) => setTimeout(resolve, 10));
      proxy.set(fault);
      const statuses = await during;
      expect(statuses.every((s) => [200, 201, 503].includes(s))).toBe(true);
      proxy.set('pass');
      await recovered(t, owner);
    }
  });

  it('a statement over DB_STATEMENT_TIMEOUT_MS is cancelled and answers 503', async () => {
    const before = Date.now();
    expectError(await call(t.app, 'GET', '/api/test-slow'), 503, 'service_unavailable');
    expect(Date.now() - before).toBeLessThan(3000);
    expect((await call(t.app, 'GET', '/api/healthz')).status).toBe(200);
  });

  it('no pooled connection free within DB_POOL_ACQUIRE_TIMEOUT_MS: 503, not a wait without end', async () => {
    const raw = t.db.raw;
    if (raw.dialect !== 'postgres') throw new Error('postgres only');
    const held = await Promise.all(Array.from({ length: 10 }, () => raw.pool.connect()));
    try {
      const before = Date.now();
      expectError(
        await call(t.app, 'GET', '/api/voters', { token: owner.token }),
        503,
        'service_unavailable',
      );
      expectError(await call(t.app, 'GET', '/api/healthz'), 503, 'service_unavailable');
      expect(Date.now() - before).toBeLessThan(3000);
    } finally {
      for (const client of held) client.release();
    }
    // Answered again once the background check has found the database answering (within about a second).
    await recovered(t, owner, 3000);
  });
});

describe('SQLite locked by another process', () => {
  let dir: string;
  let t: TestApp;
  let owner: Account;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ces-lock-'));
    t = await buildTestApp('sqlite', { DATABASE_URL: `sqlite:${join(dir, 'db.sqlite')}` });
    owner = await register(t.app);
  });
  afterAll(async () => {
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('a write waits about a second for the lock, then answers 503', async () => {
    const other = new SQLite(join(dir, 'db.sqlite'));
    other.exec('BEGIN EXCLUSIVE');
    try {
      const before = Date.now();
      const res = await call(t.app, 'POST', '/api/voters', {
        token: owner.token,
        body: { name: 'Locked Out', phone: uniquePhone() },
      });
      expectError(res, 503, 'service_unavailable');
      expect(Date.now() - before).toBeLessThan(2500);
    } finally {
      other.exec('ROLLBACK');
      other.close();
    }
    const res = await call(t.app, 'POST', '/api/voters', {
      token: owner.token,
      body: { name: 'Let In', phone: uniquePhone() },
    });
    expect(res.status).toBe(201);
  });
});

describe('shutdown (SIGTERM to the server process)', () => {
  it('stops accepting, lets requests in flight finish, ends a stuck download at SHUTDOWN_TIMEOUT_MS, then closes the database and exits', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ces-shutdown-'));
    const server = spawn(process.execPath, ['--import', 'tsx', 'src/server.ts'], {
      env: {
        ...process.env,
        DATABASE_URL: pgUrl ?? `sqlite:${join(dir, 'ces.db')}`,
        PORT: '0',
        HOST: '127.0.0.1',
        APP_KEY: 'ef'.repeat(32),
        LOG_LEVEL: 'info',
        SHUTDOWN_TIMEOUT_MS: '1500',
        EXPORT_THREADS: '0',
        RATE_LIMIT_AUTH_PER_MIN: '1000',
        RATE_LIMIT_AUTH_IP_PER_MIN: '1000',
        RATE_LIMIT_AUTHENTICATED_PER_MIN: '100000',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let log = '';
    server.stdout.on('data', (chunk: Buffer) => (log += chunk.toString()));
    server.stderr.on('data', (chunk: Buffer) => (log += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => server.once('exit', (code) => resolve(code)));
    try {
      for (const start = Date.now(); !/listening at http:\/\/127\.0\.0\.1:\d+/.test(log);) {
        if (Date.now() - start > 20_000) throw new Error(`the server did not start: ${log}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      const port = Number(/listening at http:\/\/127\.0\.0\.1:(\d+)/.exec(log)![1]);
      const base = `http://127.0.0.1:${port}/api`;
      const json = { 'content-type': 'application/json' };
      const registered = await fetch(`${base}/auth/register`, {
        method: 'POST',
        headers: json,
        body: JSON.stringify({
          name: 'Shut Down',
          email: `shut.${Date.now()}@example.com`,
          password: 'correct horse battery',
          phone: uniquePhone(),
        }),
      });
      const token = ((await registered.json()) as { data: { access_token: string } }).data.access_token;
      const auth = { ...json, authorization: `Bearer ${token}` };
      const { payload, contentType } = multipartBody([
        {
          name: 'file',
          content: [
            'name,phone,address',
            ...Array.from(
              { length: 12_000 },
              (_, i) => `Shut ${i},+9194${String(i).padStart(8, '0')},${'y'.repeat(600)}`,
            ),
          ].join('\n'),
        },
      ]);
      const imported = await fetch(`${base}/voters/import`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': contentType },
        body: payload,
      });
      expect(imported.status).toBe(200);

      // A download whose client never reads: it would hold the server open for ever.
      const stuck = connectTcp(port, '127.0.0.1');
      stuck.on('error', () => {});
      stuck.write(`GET /api/voters/export HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n\r\n`);
      await new Promise((resolve) => stuck.once('data', resolve));
      stuck.pause();

      const inFlight = Array.from({ length: 20 }, (_, i) =>
        fetch(`${base}/voters`, {
          method: 'POST',
          headers: auth,
          body: JSON.stringify({ name: `In Flight ${i}`, phone: uniquePhone() }),
        }).then((r) => r.status),
      );
      await new Promise((resolve) => setTimeout(resolve, 20));
      const signalled = Date.now();
      server.kill('SIGTERM');
      const statuses = await Promise.all(inFlight.map((p) => p.catch(() => 0)));
      const code = await exited;
      expect(Date.now() - signalled).toBeLessThan(1500 + 2500);
      expect(code).toBe(0);
      // Every request that reached the server before the signal was answered.
      expect(statuses.filter((s) => s !== 201 && s !== 503 && s !== 0)).toEqual([]);
      expect(statuses.filter((s) => s === 201).length).toBeGreaterThan(0);
      expect(log).not.toMatch(/destroyed|unhandled error/i);
      stuck.destroy();
    } finally {
      server.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});

describe('handlers whose client went away', () => {
  it('close() resolves once the connections are gone; handlersDone() waits for their handlers, which still use the database', async () => {
    const t = await buildTestApp('sqlite');
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    let started = false;
    let queried: unknown;
    t.app.get('/api/test-held', { config: { permission: 'public' } }, async () => {
      started = true;
      await gate;
      queried = await sql`select 1 as one`.execute(t.db.kysely);
      return { success: true, data: null };
    });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = t.app.server.address() as { port: number };
    const socket = connectTcp(port, '127.0.0.1');
    socket.write('GET /api/test-held HTTP/1.1\r\nHost: x\r\n\r\n');
    for (const start = Date.now(); !started && Date.now() - start < 5000;) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    socket.destroy();
    await t.app.close();
    let done = false;
    const handlersDone = t.app.handlersDone().then(() => (done = true));
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(done).toBe(false);
    release();
    await handlersDone;
    expect(queried).toBeDefined();
    await t.db.close();
  });
});
