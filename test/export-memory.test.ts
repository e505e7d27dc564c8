import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportVoters } from '../src/modules/voters/voters.export.ts';
import { buildTestApp, importCsv, register, type TestApp } from './helpers.ts';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** Voters with long addresses (about 450 bytes a CSV line), so that a batch of them is a lot of bytes. */
const ROWS = 12_000;
const PAUSED = 20;
/** The most a chunk of an export may be: what a paused export holds on the socket. */
const MAX_CHUNK = 64 * 1024;

function bigCsv(): string {
  const lines = ['name,phone,email,constituency,booth,ward,address'];
  const filler = 'x'.repeat(400);
  for (let i = 0; i < ROWS; i += 1) {
    lines.push(
      `Memo Voter ${i},+9196${String(i).padStart(8, '0')},,Varanasi,${i % 9},${i % 7},${filler} ${i}`,
    );
  }
  return lines.join('\n');
}

function held(): number {
  gc();
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
}

// SQLite only: on PostgreSQL the CSV is the database's COPY; this is about exports read in the server.
describe('sqlite: memory of paused exports', () => {
  let t: TestApp;
  let workspaceId: number;
  beforeAll(async () => {
    t = await buildTestApp('sqlite');
    const account = await register(t.app);
    workspaceId = (account.user as { workspace_id: number }).workspace_id;
    const res = await importCsv(t.app, account.token, bigCsv());
    if (res.status !== 200) throw new Error(`seed: ${res.raw}`);
  }, 60_000);
  afterAll(() => t?.close());

  it('a paused export holds small chunks and one small batch: twenty add a few MB, not one batch of rows each', async () => {
    const bodies: AsyncGenerator<Buffer>[] = [];
    const sizes: number[] = [];
    const before = held();
    try {
      for (let i = 0; i < PAUSED; i += 1) {
        const csv = i % 2 === 0;
        const body = exportVoters(t.db, workspaceId, {}, csv ? 'csv' : 'excel').body;
        bodies.push(body);
        // Past the header (and the zip's first parts): some chunks of rows, as a client that stops reading
        // after them leaves the export.
        for (let n = 0; n < (csv ? 3 : 9); n += 1) {
          const next = await body.next();
          if (next.done) throw new Error('the export ended early');
          sizes.push(next.value.length);
        }
      }
      const growth = held() - before;
      console.log('GROWTH', growth / PAUSED, Math.max(...sizes));
      expect(Math.max(...sizes)).toBeLessThanOrEqual(MAX_CHUNK);
      // Each held a 2000-row batch (its rows, text and bytes: about 3 MB here) before.
      expect(growth / PAUSED).toBeLessThan(512 * 1024);
    } finally {
      for (const body of bodies) await body.return(undefined);
    }
  });
});
