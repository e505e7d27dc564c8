import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { request as httpRequest, Agent } from 'node:http';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt } from '../bench/server.ts';
import { buildTestApp, call, register, uniqueEmail, uniquePhone } from './helpers.ts';
import { insertVoters, until } from './messaging-helpers.ts';

/**
 * Graceful shutdown of the real processes, as an operator runs them: `npm start` and `npm run worker` (the
 * build in dist/), signalled as systemd, Docker or Kubernetes would.
 */
const SHUTDOWN_TIMEOUT_MS = 4000;
const dir = mkdtempSync(join(tmpdir(), 'ces-shutdown-'));
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

interface Started {
  child: ChildProcess;
  /** The node process's id, from its first log line (npm runs it through a shell). */
  nodePid: Promise<number>;
  lines: Record<string, unknown>[];
  exited: Promise<number | null>;
}

/** `npm <args>` (or node itself when `direct`) with its log lines collected, unless `readOutput` is false. */
function start(
  args: string[],
  env: Record<string, string>,
  options: { readOutput?: boolean; direct?: boolean } = {},
): Started {
  const fullEnv: Record<string, string | undefined> = {
    ...process.env,
    APP_KEY: 'c'.repeat(64),
    LOG_LEVEL: 'info',
    SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS),
    QUIET_HOURS: '',
    ...env,
  };
  // Not under npm itself (vitest run by `npm test`): the server must see only what npm start gives it.
  delete fullEnv.npm_lifecycle_event;
  const child = options.direct
    ? spawn(process.execPath, args, { env: fullEnv, stdio: ['ignore', 'pipe', 'pipe'] })
    : spawn(npm, args, { env: fullEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: Record<string, unknown>[] = [];
  let resolvePid: (pid: number) => void = () => {};
  const nodePid = new Promise<number>((resolve) => (resolvePid = resolve));
  if (options.direct) resolvePid(child.pid as number);
  if (options.readOutput !== false) {
    let buffer = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      buffer += chunk.toString('utf8');
      const parts = buffer.split('\n');
      buffer = parts.pop() ?? '';
      for (const part of parts) {
        if (!part.startsWith('{')) continue;
        const line = JSON.parse(part) as Record<string, unknown>;
        if (typeof line.pid === 'number') resolvePid(line.pid);
        lines.push(line);
      }
    });
    child.stderr?.on('data', () => {});
  }
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, nodePid, lines, exited };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Milliseconds until `pid` has gone, or throws after `limitMs`. */
async function goneWithin(pid: number, limitMs: number): Promise<number> {
  const started = Date.now();
  while (alive(pid)) {
    if (Date.now() - started > limitMs) throw new Error(`process ${pid} still running after ${limitMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return Date.now() - started;
}

async function waitUp(port: number): Promise<void> {
  await until(async () => {
    try {
      return (await fetch(`http://127.0.0.1:${port}/api/healthz`)).ok;
    } catch {
      return false;
    }
  }, 'the server answering');
}

/** A POST /api/auth/register whose body is sent in two halves: `finish()` sends the rest. */
function slowRegister(port: number, agent?: Agent) {
  const body = Buffer.from(
    JSON.stringify({
      name: 'Slow Client',
      email: uniqueEmail('slow'),
      password: 'a slow password 1',
      phone: uniquePhone(),
    }),
  );
  let answered: (answer: { status: number; body: string }) => void = () => {};
  let failed: (error: Error) => void = () => {};
  const response = new Promise<{ status: number; body: string }>((resolve, reject) => {
    answered = resolve;
    failed = reject;
  });
  const req = httpRequest(
    {
      host: '127.0.0.1',
      port,
      path: '/api/auth/register',
      method: 'POST',
      agent,
      headers: { 'content-type': 'application/json', 'content-length': body.length },
    },
    (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => answered({ status: res.statusCode ?? 0, body: text }));
      res.on('error', failed);
    },
  );
  req.on('error', failed);
  const half = Math.floor(body.length / 2);
  req.write(body.subarray(0, half));
  response.catch(() => {});
  return { response, finish: () => req.end(body.subarray(half)) };
}

async function refusesConnections(port: number): Promise<boolean> {
  try {
    await fetch(`http://127.0.0.1:${port}/api/healthz`, { signal: AbortSignal.timeout(2000) });
    return false;
  } catch (error) {
    return /ECONNREFUSED/.test(String((error as { cause?: unknown }).cause ?? error));
  }
}

describe('graceful shutdown of the built processes', () => {
  const running: Started[] = [];
  beforeAll(() => ensureBuilt(), 180_000);
  afterAll(async () => {
    for (const p of running) {
      const pid = await Promise.race([p.nodePid, Promise.resolve(undefined)]);
      if (pid && alive(pid)) process.kill(pid, 'SIGKILL');
      if (p.child.exitCode === null) p.child.kill('SIGKILL');
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it(
    'SIGTERM to `npm start` mid-request: the request completes, new connections are refused, the process exits in time',
    { timeout: 60_000 },
    async () => {
      const port = await freePort();
      const server = start(['start'], {
        DATABASE_URL: `sqlite:${join(dir, 'a.db')}`,
        PORT: String(port),
        HOST: '127.0.0.1',
      });
      running.push(server);
      await waitUp(port);
      const nodePid = await server.nodePid;
      expect(nodePid).not.toBe(server.child.pid);

      const slow = slowRegister(port);
      await new Promise((resolve) => setTimeout(resolve, 300));
      const signalled = Date.now();
      server.child.kill('SIGTERM');
      await until(async () => refusesConnections(port), 'new connections refused', 3000);
      expect(alive(nodePid)).toBe(true); // still finishing the request in flight
      slow.finish();
      const answer = await slow.response;
      expect(answer.status).toBe(201);
      expect(JSON.parse(answer.body).data.access_token).toEqual(expect.any(String));
      await goneWithin(nodePid, SHUTDOWN_TIMEOUT_MS);
      expect(Date.now() - signalled, JSON.stringify(server.lines.slice(-6))).toBeLessThan(
        SHUTDOWN_TIMEOUT_MS,
      );
      await server.exited;
      expect(server.lines.some((l) => l.msg === 'shutting down')).toBe(true);
      expect(server.lines.some((l) => l.msg === 'delivery worker stopped')).toBe(true);
    },
  );

  it(
    'SHUTDOWN_DRAIN_MS: after SIGTERM readyz answers 503 while every other request is still served, then the listener closes',
    { timeout: 60_000 },
    async () => {
      const port = await freePort();
      const server = start(
        ['dist/server.js'],
        {
          DATABASE_URL: `sqlite:${join(dir, 'drain.db')}`,
          PORT: String(port),
          HOST: '127.0.0.1',
          SHUTDOWN_DRAIN_MS: '1500',
          RATE_LIMIT_PUBLIC_PER_MIN: '100000',
        },
        { direct: true },
      );
      running.push(server);
      await waitUp(port);
      expect((await fetch(`http://127.0.0.1:${port}/api/readyz`)).status).toBe(200);
      const signalled = Date.now();
      server.child.kill('SIGTERM');
      await until(
        async () => (await fetch(`http://127.0.0.1:${port}/api/readyz`)).status === 503,
        'readyz to answer 503',
        1000,
      );
      // Still draining: everything else is served.
      const health = await fetch(`http://127.0.0.1:${port}/api/healthz`);
      expect(health.status).toBe(200);
      const index = await fetch(`http://127.0.0.1:${port}/api`);
      expect(index.status).toBe(200);
      expect(Date.now() - signalled).toBeLessThan(1500);
      // Then the listener closes and the process exits.
      await until(async () => refusesConnections(port), 'new connections refused', 5000);
      expect(Date.now() - signalled).toBeGreaterThanOrEqual(1400);
      await server.exited;
      expect(server.lines.some((l) => l.msg === 'draining: readyz answers 503')).toBe(true);
    },
  );

  it(
    'SIGTERM to node itself exits within SHUTDOWN_TIMEOUT_MS even with a request that never finishes and idle keep-alive connections',
    { timeout: 60_000 },
    async () => {
      const port = await freePort();
      const server = start(
        ['--max-old-space-size=192', 'dist/server.js'],
        { DATABASE_URL: `sqlite:${join(dir, 'b.db')}`, PORT: String(port), HOST: '127.0.0.1' },
        { direct: true },
      );
      running.push(server);
      await waitUp(port);
      const agent = new Agent({ keepAlive: true });
      for (let i = 0; i < 5; i++) await fetch(`http://127.0.0.1:${port}/api/healthz`); // fetch keeps its sockets alive
      await new Promise<void>((resolve) =>
        httpRequest({ host: '127.0.0.1', port, path: '/api/healthz', agent }, (res) =>
          res.resume().on('end', resolve),
        ).end(),
      );
      const stuck = slowRegister(port); // never finished
      await new Promise((resolve) => setTimeout(resolve, 200));
      const signalled = Date.now();
      process.kill(await server.nodePid, 'SIGTERM');
      await server.exited;
      const took = Date.now() - signalled;
      expect(took).toBeLessThan(SHUTDOWN_TIMEOUT_MS + 250);
      expect(took).toBeGreaterThan(SHUTDOWN_TIMEOUT_MS / 2); // it did wait for the request in flight
      await expect(stuck.response).rejects.toThrow();
      agent.destroy();
    },
  );

  it(
    'a server whose output nobody reads still serves and still stops on SIGTERM',
    { timeout: 90_000 },
    async () => {
      const port = await freePort();
      const server = start(
        ['dist/server.js'],
        {
          DATABASE_URL: `sqlite:${join(dir, 'c.db')}`,
          PORT: String(port),
          HOST: '127.0.0.1',
          RATE_LIMIT_PUBLIC_PER_MIN: '100000',
        },
        { direct: true, readOutput: false },
      );
      running.push(server);
      await waitUp(port);
      // Each request logs two lines (~600 bytes): 3,000 of them are far more than a pipe holds.
      for (let i = 0; i < 3000; i++) {
        const res = await fetch(`http://127.0.0.1:${port}/api/healthz`, {
          signal: AbortSignal.timeout(5000),
        });
        expect(res.status).toBe(200);
      }
      const signalled = Date.now();
      server.child.kill('SIGTERM');
      await server.exited;
      expect(Date.now() - signalled).toBeLessThan(SHUTDOWN_TIMEOUT_MS);
    },
  );

  it(
    'SIGTERM to `npm run worker` mid-broadcast: it stops in time and hands back its claims',
    { timeout: 120_000 },
    async () => {
      const file = join(dir, `worker-${randomUUID()}.db`);
      const t = await buildTestApp('sqlite', { DATABASE_URL: `sqlite:${file}` });
      try {
        const owner = await register(t.app);
        const ws = owner.user.workspace_id;
        const total = 2000;
        await t.db.kysely
          .updateTable('credit_balances')
          .set({ balance: total })
          .where('workspace_id', '=', ws)
          .execute();
        await insertVoters(t, ws, total, (i) => ({
          phone: `+919740${String(i).padStart(5, '0')}1`,
          constituency: 'North',
        }));
        const seg = await call(t.app, 'POST', '/api/segments', {
          token: owner.token,
          body: { name: 'North', filters: { constituency: 'North' } },
        });
        const broadcast = await call(t.app, 'POST', '/api/messages/broadcast', {
          token: owner.token,
          body: { channel: 'sms', message: 'Polling day is Sunday', segment_id: seg.body.data.id },
        });
        expect(broadcast.status).toBe(202);
        const campaignId = Number(broadcast.body.data.campaign_id.slice(5));
        const counts = async () => {
          const rows = await t.db.kysely
            .selectFrom('messages')
            .select(['status', (eb) => eb.fn.countAll<number>().as('n')])
            .where('campaign_id', '=', campaignId)
            .groupBy('status')
            .execute();
          return Object.fromEntries(rows.map((r) => [r.status, Number(r.n)])) as Record<string, number>;
        };
        const held = async () =>
          Number(
            (
              await t.db.kysely
                .selectFrom('messages')
                .select((eb) => eb.fn.countAll<number>().as('n'))
                .where('campaign_id', '=', campaignId)
                .where('claimed_by', 'is not', null)
                .where('status', '=', 'queued')
                .executeTakeFirstOrThrow()
            ).n,
          );

        const worker = start(['run', 'worker'], {
          DATABASE_URL: `sqlite:${file}`,
          SANDBOX_DELIVERY_DELAY_MS: '0',
          SANDBOX_SEND_RATE: '200',
          WORKER_BATCH_SIZE: '200',
          WORKER_LEASE_SECONDS: '600',
          WORKER_POLL_MS: '20',
        });
        running.push(worker);
        await until(
          async () => ((await counts()).delivered ?? 0) >= 50 && (await held()) > 0,
          'the worker sending, with claims held',
          60_000,
        );
        const nodePid = await worker.nodePid;
        const signalled = Date.now();
        worker.child.kill('SIGTERM');
        await goneWithin(nodePid, SHUTDOWN_TIMEOUT_MS);
        expect(Date.now() - signalled).toBeLessThan(SHUTDOWN_TIMEOUT_MS);
        await worker.exited;
        // Nothing is left claimed (with a ten-minute lease, another worker could not have taken it over).
        expect(await held()).toBe(0);
        const after = await counts();
        expect(after.delivered ?? 0).toBeLessThan(total);
        // Every message is delivered (or sent, awaiting its report) or back in the queue: none lost.
        expect(Object.keys(after).filter((s) => !['delivered', 'sent', 'queued'].includes(s))).toEqual([]);
        expect(Object.values(after).reduce((a, b) => a + b, 0)).toBe(total);
        expect(after.queued ?? 0).toBeGreaterThan(0);
        const stopped = worker.lines.find((l) => l.msg === 'delivery worker stopped');
        expect(Number(stopped?.released)).toBeGreaterThan(0);
      } finally {
        await t.close();
      }
    },
  );
});
