import { mkdtempSync, rmSync } from 'node:fs';
import { connect as connectTcp, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportThreadCounts } from '../src/modules/voter-exports/export-threads.ts';
import {
  buildTestApp,
  call,
  dialects,
  expectError,
  exportVoters,
  importCsv,
  register,
  type Account,
  type TestApp,
} from './helpers.ts';

const APP_KEY = 'cd'.repeat(32);
/** Enough bytes (about 7 MB) that a client that does not read leaves the export waiting on the socket. */
const BIG_ROWS = 16_000;

function bigCsv(): string {
  const lines = ['name,phone,email,constituency,booth,ward,address'];
  const filler = 'x'.repeat(400);
  for (let i = 0; i < BIG_ROWS; i += 1) {
    lines.push(
      `Bulk Voter ${i},+9197${String(i).padStart(8, '0')},,Varanasi,${i % 9},${i % 7},${filler} ${i}`,
    );
  }
  return lines.join('\n');
}

async function listening(t: TestApp): Promise<number> {
  if (!t.app.server.address()) await t.app.listen({ port: 0, host: '127.0.0.1' });
  return (t.app.server.address() as AddressInfo).port;
}

/**
 * An export over a real connection by a client that reads the response's first bytes and then stops
 * reading. Resolves with the socket and the status line once the answer has begun.
 */
async function openPaused(t: TestApp, token: string, query = ''): Promise<{ socket: Socket; head: string }> {
  const port = await listening(t);
  const socket = connectTcp(port, '127.0.0.1');
  socket.on('error', () => {});
  socket.write(
    `GET /api/voters/export${query} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\n\r\n`,
  );
  const first = await new Promise<Buffer>((resolve) => socket.once('data', resolve));
  socket.pause();
  return { socket, head: first.toString('latin1').split('\r\n')[0]! };
}

async function until(condition: () => boolean | Promise<boolean>, ms: number): Promise<boolean> {
  for (const start = Date.now(); Date.now() - start < ms;) {
    if (await condition()) return true;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return condition();
}

for (const dialect of dialects) {
  describe(`export limits (${dialect})`, () => {
    let dir: string;
    let patient: TestApp;
    let impatient: TestApp;
    let bulky: Account;
    let other: Account;
    const sockets: Socket[] = [];

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'ces-export-limits-'));
      const shared = {
        APP_KEY,
        ...(dialect === 'sqlite' ? { DATABASE_URL: `sqlite:${join(dir, 'ces.db')}` } : {}),
        EXPORT_THREADS: '0',
        DB_BULK_POOL_SIZE: '2',
        // These tests fill the bulk pool from one workspace on purpose (the fair share is tested below).
        DB_BULK_PER_WORKSPACE: '2',
        DB_BULK_QUEUE_TIMEOUT_MS: '1000',
        DB_POOL_ACQUIRE_TIMEOUT_MS: '1000',
      };
      patient = await buildTestApp(dialect, { ...shared, EXPORT_MAX_CONCURRENT: '2' });
      impatient = await buildTestApp(dialect, {
        ...shared,
        EXPORT_MAX_CONCURRENT: '1',
        EXPORT_IDLE_TIMEOUT_MS: '1500',
      });
      bulky = await register(patient.app);
      other = await register(patient.app);
      const res = await importCsv(patient.app, bulky.token, bigCsv());
      if (res.status !== 200 || res.body.data.imported !== BIG_ROWS) throw new Error(`seed: ${res.raw}`);
      const small = await importCsv(patient.app, other.token, 'name,phone\nSmall One,9812300001\n');
      if (small.status !== 200) throw new Error(`seed: ${small.raw}`);
      // PostgreSQL: a large import runs VACUUM (ANALYZE) afterwards on a bulk connection of its own. These
      // tests count the bulk pool's connections, so they start once it has finished.
      const raw = patient.db.raw;
      if (
        raw.dialect === 'postgres' &&
        !(await until(() => raw.bulk.totalCount - raw.bulk.idleCount === 0, 60_000))
      )
        throw new Error("the seed import's VACUUM did not finish");
    }, 120_000);
    afterAll(async () => {
      for (const socket of sockets) socket.destroy();
      await patient?.close();
      await impatient?.close();
      rmSync(dir, { recursive: true, force: true });
    });

    it('EXPORT_MAX_CONCURRENT per workspace: one more is 429 with Retry-After; other workspaces and healthz still answer', async () => {
      const a = await openPaused(patient, bulky.token);
      const b = await openPaused(patient, bulky.token, '?format=excel');
      sockets.push(a.socket, b.socket);
      expect(a.head).toBe('HTTP/1.1 200 OK');
      expect(b.head).toBe('HTTP/1.1 200 OK');

      const third = await exportVoters(patient.app, bulky.token);
      expectError(third, 429, 'rate_limit_exceeded');
      expect(third.body.message).toMatch(/EXPORT_MAX_CONCURRENT/);
      expect(third.body.details).toEqual({ max_concurrent: 2 });
      expect(Number(third.headers['retry-after'])).toBeGreaterThan(0);

      const before = Date.now();
      expect((await call(patient.app, 'GET', '/api/healthz')).status).toBe(200);
      expect((await call(patient.app, 'GET', '/api/voters', { token: other.token })).status).toBe(200);
      const theirs = await exportVoters(patient.app, other.token);
      expect(theirs.status).toBe(200);
      expect(theirs.raw.split('\n')).toHaveLength(3);
      expect(Date.now() - before).toBeLessThan(3000);

      // A client that goes away gives its slot back.
      a.socket.destroy();
      expect(
        await until(async () => (await exportVoters(patient.app, bulky.token)).status === 200, 5000),
      ).toBe(true);
      b.socket.destroy();
    });

    it.skipIf(dialect !== 'postgres')(
      'PostgreSQL: paused exports hold connections of the bulk pool only, never the API pool',
      async () => {
        const raw = patient.db.raw;
        if (raw.dialect !== 'postgres') throw new Error('postgres only');
        const third = await register(patient.app);
        await importCsv(patient.app, third.token, 'name,phone\nSomeone,9812300002\n');
        const paused = [await openPaused(patient, bulky.token), await openPaused(patient, bulky.token)];
        sockets.push(...paused.map((p) => p.socket));
        expect(raw.bulk.totalCount - raw.bulk.idleCount).toBe(2);
        // The API pool is free: requests of every workspace answer at once.
        const answers = await Promise.all(
          Array.from({ length: 20 }, () => call(patient.app, 'GET', '/api/voters', { token: third.token })),
        );
        expect(answers.every((r) => r.status === 200)).toBe(true);
        expect((await call(patient.app, 'GET', '/api/healthz')).status).toBe(200);
        // The bulk pool is full: one more export waits DB_BULK_QUEUE_TIMEOUT_MS, then 503.
        const before = Date.now();
        expectError(await exportVoters(patient.app, third.token), 503, 'service_unavailable');
        expect(Date.now() - before).toBeLessThan(3000);
        for (const p of paused) p.socket.destroy();
        expect(await until(() => raw.bulk.totalCount - raw.bulk.idleCount === 0, 5000)).toBe(true);

        // The Excel export reads its rows through COPY too: read to its end, or cut after its first bytes,
        // it gives its connection back.
        expect((await exportVoters(patient.app, bulky.token, { format: 'excel' })).status).toBe(200);
        expect(raw.bulk.totalCount - raw.bulk.idleCount).toBe(0);
        const cut = await openPaused(patient, bulky.token, '?format=excel');
        sockets.push(cut.socket);
        cut.socket.destroy();
        expect(await until(() => raw.bulk.totalCount - raw.bulk.idleCount === 0, 5000)).toBe(true);
        expect((await exportVoters(patient.app, third.token, { format: 'excel' })).status).toBe(200);
      },
    );

    it.skipIf(dialect !== 'postgres')(
      'PostgreSQL: two workspaces that never read their exports cannot starve the others of the bulk pool',
      async () => {
        // The case: a pool of 4, two workspaces each open 2 exports and never read. Each holds one
        // connection (DB_BULK_PER_WORKSPACE defaults to a quarter of the pool); their second exports queue.
        const fair = await buildTestApp(dialect, {
          APP_KEY,
          EXPORT_THREADS: '0',
          DB_BULK_POOL_SIZE: '4',
          DB_BULK_QUEUE_TIMEOUT_MS: '3000',
          EXPORT_MAX_CONCURRENT: '2',
        });
        try {
          const raw = fair.db.raw;
          if (raw.dialect !== 'postgres') throw new Error('postgres only');
          const hog = await register(fair.app);
          const seeded = await importCsv(fair.app, hog.token, bigCsv());
          expect(seeded.status).toBe(200);
          // One after the other: two of one workspace opened at once would race for its one connection.
          const first = await openPaused(fair, bulky.token);
          const second = await openPaused(fair, hog.token);
          sockets.push(first.socket, second.socket);
          const opened = [bulky, hog].map((account) => openPaused(fair, account.token));
          expect([first.head, second.head]).toEqual(['HTTP/1.1 200 OK', 'HTTP/1.1 200 OK']);
          expect(await until(() => raw.bulk.totalCount - raw.bulk.idleCount === 2, 2000)).toBe(true);

          // Everyone else's imports and exports go on meanwhile.
          const before = Date.now();
          const theirs = await exportVoters(fair.app, other.token);
          expect(theirs.status).toBe(200);
          const imported = await importCsv(fair.app, other.token, 'name,phone\nAnother One,9812300009\n');
          expect(imported.status).toBe(200);
          expect(Date.now() - before).toBeLessThan(2500);

          // The hogs' second exports waited their turn, then were told to come back (503, Retry-After).
          const queued = await Promise.all(opened);
          for (const q of queued) {
            sockets.push(q.socket);
            expect(q.head).toBe('HTTP/1.1 503 Service Unavailable');
          }
          // A queued export is served as soon as its workspace's connection is free.
          const waiting = exportVoters(fair.app, hog.token);
          second.socket.destroy();
          expect((await waiting).status).toBe(200);
          first.socket.destroy();
          expect(await until(() => raw.bulk.totalCount - raw.bulk.idleCount === 0, 5000)).toBe(true);
        } finally {
          await fair.close();
        }
      },
      60_000,
    );

    it('EXPORT_IDLE_TIMEOUT_MS: an export whose client stops reading is ended and gives back what it held', async () => {
      const paused = await openPaused(impatient, bulky.token);
      sockets.push(paused.socket);
      expect(paused.head).toBe('HTTP/1.1 200 OK');
      expectError(await exportVoters(impatient.app, bulky.token), 429, 'rate_limit_exceeded');
      // Ended after 1.5 s without progress: the slot is free again, and on PostgreSQL the COPY's
      // connection is back in the pool.
      expect(
        await until(async () => (await exportVoters(impatient.app, bulky.token)).status === 200, 5000),
      ).toBe(true);
      const raw = impatient.db.raw;
      if (raw.dialect === 'postgres') expect(raw.bulk.totalCount - raw.bulk.idleCount).toBe(0);
      // The client that did not read gets a cut file: the connection is closed before the end.
      paused.socket.resume();
      let received = 0;
      paused.socket.on('data', (chunk: Buffer) => (received += chunk.length));
      await new Promise((resolve) => paused.socket.once('close', resolve));
      expect(received).toBeLessThan(BIG_ROWS * 400);
    });
  });
}

describe('export worker threads are shared by the whole process (SQLite file)', () => {
  let dir: string;
  let t: TestApp;
  const sockets: Socket[] = [];
  let accounts: Account[];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ces-export-threads-cap-'));
    t = await buildTestApp('sqlite', {
      DATABASE_URL: `sqlite:${join(dir, 'ces.db')}`,
      EXPORT_THREADS: '2',
      EXPORT_THREADS_MIN_VOTERS: '1',
      EXPORT_MAX_CONCURRENT: '4',
    });
    accounts = [await register(t.app), await register(t.app)];
    for (const account of accounts) {
      const res = await importCsv(t.app, account.token, bigCsv());
      if (res.status !== 200) throw new Error(`seed: ${res.raw}`);
    }
  }, 120_000);
  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    await t?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('many paused exports start no more than EXPORT_THREADS threads in all; the rest run in the request thread', async () => {
    const before = exportThreadCounts().running;
    for (const account of [...accounts, ...accounts]) {
      const paused = await openPaused(t, account.token);
      sockets.push(paused.socket);
      expect(paused.head).toBe('HTTP/1.1 200 OK');
    }
    expect(exportThreadCounts().running - before).toBeLessThanOrEqual(2);
    for (const socket of sockets) socket.destroy();
    expect(await until(() => exportThreadCounts().running === before, 10_000)).toBe(true);
    // With the threads free again, the next export takes them.
    const started = exportThreadCounts().started;
    const res = await exportVoters(t.app, accounts[0]!.token);
    expect(res.status).toBe(200);
    expect(exportThreadCounts().started - started).toBe(2);
  });
});
