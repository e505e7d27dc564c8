import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportVoters } from '../src/modules/voter-exports/voter-exports.ts';
import { exportShape } from '../src/modules/voter-exports/voter-exports.repository.ts';
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

/**
 * The bytes held after a full collection. V8 frees the memory of collected buffers on a background
 * thread after the collection, so this collects, lets that finish, and collects again; on a busy
 * machine one collection alone left several MB of freed buffers still counted (CI saw 15 MB).
 */
async function held(): Promise<{ heap: number; buffers: number; total: number }> {
  for (let i = 0; i < 3; i += 1) {
    gc();
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  gc();
  const m = process.memoryUsage();
  return { heap: m.heapUsed, buffers: m.arrayBuffers, total: m.heapUsed + m.arrayBuffers };
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
    /** Starts an export and reads past the header (and the zip's first parts): some chunks of rows, as a
     * client that stops reading after them leaves the export. */
    const shape = await exportShape(t.db.kysely, workspaceId, false);
    const pause = async (i: number): Promise<void> => {
      const csv = i % 2 === 0;
      const body = exportVoters(t.db, workspaceId, {}, shape, csv ? 'csv' : 'excel').body;
      bodies.push(body);
      for (let n = 0; n < (csv ? 3 : 9); n += 1) {
        const next = await body.next();
        if (next.done) throw new Error('the export ended early');
        sizes.push(next.value.length);
      }
    };
    // Once of each first, ended before measuring: what the first export compiles and caches (code, prepared
    // statements) is held once, whatever the number of exports, and is not what this measures.
    await pause(0);
    await pause(1);
    for (const body of bodies.splice(0)) await body.return(undefined);
    const before = await held();
    try {
      for (let i = 0; i < PAUSED; i += 1) await pause(i);
      const after = await held();
      const growth = after.total - before.total;
      console.log(
        `paused exports: ${Math.round(growth / PAUSED)} bytes each (heap ${after.heap - before.heap},` +
          ` buffers ${after.buffers - before.buffers} in all), largest chunk ${Math.max(...sizes)}`,
      );
      expect(Math.max(...sizes)).toBeLessThanOrEqual(MAX_CHUNK);
      // Each held a 2000-row batch (its rows, text and bytes: about 3 MB here) before.
      // Now about 470 KB each here (the text of 256 rows, its bytes, the zip's state); half the old is the bound.
      expect(growth / PAUSED).toBeLessThan(1.5 * 1024 * 1024);
    } finally {
      for (const body of bodies) await body.return(undefined);
    }
  });
});
