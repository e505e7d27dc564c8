import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { request, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportThreadCounts } from '../src/modules/voter-exports/export-threads.ts';
import {
  buildTestApp,
  call,
  exportVoters,
  importCsv,
  parseCsv,
  register,
  unzip,
  type Account,
  type TestApp,
  voterIds,
} from './helpers.ts';

// The threaded export reads a SQLite file from worker threads: these tests run on SQLite only (a file in a
// temporary directory), whatever TEST_DATABASE_URL says. Each export of the threaded app is compared with
// the same export from an app on the same file that never uses threads.

const HEADER = 'name,phone,email,constituency,booth,ward,address,tags';
/** Every fourth voter's tags, written out of order: an export lists them case-insensitively sorted. */
const tagsOf = (i: number) => (i % 4 === 0 ? `Zeta;alpha;Team ${i % 3};Beta` : '');
const APP_KEY = 'ab'.repeat(32);

/** Import lines with every kind of value the CSV writer treats specially, mixed into plain ones. */
function voterLines(
  prefix: string,
  from: number,
  count: number,
  address = (i: number) => `H.No ${i}`,
): string {
  const places = ['Varanasi', 'वाराणसी', 'Lucknow', 'Kanpur'];
  const lines = [HEADER];
  for (let i = from; i < from + count; i += 1) {
    const phone = `+9198${String(i).padStart(8, '0')}`;
    const email = i % 3 === 0 ? `${prefix.toLowerCase()}${i}@example.com` : '';
    const place = places[i % places.length]!;
    const tail = `${place},${i % 5},${i % 9}`;
    switch (i % 11) {
      case 0:
        lines.push(
          `"=HYPERLINK(""http://evil.example/${i}"",""x"")",${phone},${email},${tail},=1+${i},${tagsOf(i)}`,
        );
        break;
      case 1:
        lines.push(`+${prefix} plus ${i},${phone},${email},${tail},"-2+${i}",${tagsOf(i)}`);
        break;
      case 2:
        lines.push(
          `"${prefix} Comma, Quote "" and\nnewline ${i}",${phone},${email},${tail},@SUM(A${i}),${tagsOf(i)}`,
        );
        break;
      case 3:
        lines.push(`सुनीता देवी ${prefix} ${i},${phone},${email},${tail},"मकान ${i}, नेहरू नगर",${tagsOf(i)}`);
        break;
      case 4:
        lines.push(`'=already quoted ${prefix} ${i},${phone},${email},${tail},-5,${tagsOf(i)}`);
        break;
      default:
        lines.push(`${prefix} Voter ${i},${phone},${email},${tail},"${address(i)}",${tagsOf(i)}`);
    }
  }
  return lines.join('\n');
}

async function importOk(t: TestApp, account: Account, csv: string): Promise<number> {
  const res = await importCsv(t.app, account.token, csv);
  if (res.status !== 200 || res.body.data.failed !== 0) throw new Error(`seed: ${res.raw.slice(0, 500)}`);
  return res.body.data.imported;
}

async function until(condition: () => boolean, ms = 5000): Promise<void> {
  for (const start = Date.now(); !condition() && Date.now() - start < ms;) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** GET the CSV export over a real connection; resolves with the response once its head has arrived. */
async function openExport(t: TestApp, token: string): Promise<IncomingMessage> {
  const address = t.app.server.address() as AddressInfo | null;
  if (!address) await t.app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = t.app.server.address() as AddressInfo;
  return new Promise((resolve, reject) => {
    request(
      `http://127.0.0.1:${port}/api/voters/export`,
      { headers: { authorization: `Bearer ${token}` } },
      resolve,
    )
      .on('error', reject)
      .end();
  });
}

describe('voters export in worker threads (SQLite file)', () => {
  let dir: string;
  let threaded: TestApp;
  let serial: TestApp;
  let office: Account;
  let neighbour: Account;
  let bulky: Account;
  let expected: number;

  const env = (threads: string, file = 'ces.db') => ({
    DATABASE_URL: `sqlite:${join(dir, file)}`,
    EXPORT_THREADS: threads,
    EXPORT_THREADS_MIN_VOTERS: '1',
    APP_KEY,
  });

  /** The same export from both apps, and how many threads the threaded app started for it. */
  async function both(query: { format?: string; filters?: unknown } = {}) {
    const before = exportThreadCounts().started;
    const fromThreads = await exportVoters(threaded.app, office.token, query);
    const started = exportThreadCounts().started - before;
    const inThread = await exportVoters(serial.app, office.token, query);
    expect(fromThreads.status).toBe(200);
    expect(inThread.status).toBe(200);
    return { fromThreads, inThread, started };
  }

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ces-export-threads-'));
    threaded = await buildTestApp('sqlite', env('2'));
    serial = await buildTestApp('sqlite', env('0'));
    office = await register(threaded.app);
    neighbour = await register(threaded.app);
    // Interleaved imports: the office's ids have gaps where the neighbour's voters are, one of them longer
    // than a whole range.
    expected = await importOk(threaded, office, voterLines('Office', 0, 4000));
    await importOk(threaded, neighbour, voterLines('Neighbour', 0, 5000));
    expected += await importOk(threaded, office, voterLines('Office', 10_000, 4000));
    await importOk(threaded, neighbour, voterLines('Neighbour', 10_000, 300));
    expected += await importOk(threaded, office, voterLines('Office', 20_000, 4000));
    // Deleted voters: a run of 300 in the middle and every 50th of the first thousand.
    const ids = await voterIds(threaded, office.user.workspace_id);
    const gone = [...ids.slice(5000, 5300), ...ids.slice(0, 1000).filter((_, i) => i % 50 === 0)];
    for (const id of gone) {
      const res = await call(threaded.app, 'DELETE', `/api/voters/${id}`, { token: office.token });
      if (res.status !== 200) throw new Error(`delete: ${res.raw}`);
    }
    expected -= gone.length;
    // About 8 MB of CSV: far more than the threads may run ahead plus what the sockets buffer.
    bulky = await register(threaded.app);
    const address = (i: number) => `${i} ${'Long Lane '.repeat(48)}`;
    await importOk(threaded, bulky, voterLines('Bulky', 0, 20_000, address));
  }, 120_000);

  afterAll(async () => {
    await threaded?.close();
    await serial?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('CSV: byte for byte the in-thread export: id order, gaps, only this workspace, every kind of value', async () => {
    const { fromThreads, inThread, started } = await both();
    expect(started).toBe(2);
    expect(fromThreads.raw).toBe(inThread.raw);
    expect(fromThreads.bytes.equals(inThread.bytes)).toBe(true);

    const rows = parseCsv(fromThreads.raw).slice(1);
    expect(rows).toHaveLength(expected);
    const ids = rows.map((r) => Number(r[0]));
    expect(ids).toEqual(await voterIds(threaded, office.user.workspace_id));
    expect(fromThreads.raw).not.toContain('Neighbour');
    // The values that need care are there (and were written by the threads).
    const names = new Set(rows.map((r) => r[1]));
    expect(names).toContain(`'=HYPERLINK("http://evil.example/11","x")`);
    expect(names).toContain("'+Office plus 12");
    expect(names).toContain('Office Comma, Quote " and\nnewline 13');
    expect(names).toContain('सुनीता देवी Office 14');
    expect(names).toContain("'=already quoted Office 15");
    expect(rows.find((r) => r[1] === 'सुनीता देवी Office 14')![7]).toBe('मकान 14, नेहरू नगर');
    // Tags (filled per batch from the threads' own reads): sorted as a voter's read gives them.
    const tags = parseCsv(fromThreads.raw)[0]!.indexOf('tags');
    expect(rows.find((r) => r[1] === 'Office Voter 16')![tags]).toBe('alpha;Beta;Team 1;Zeta');
    expect(rows.find((r) => r[1] === 'Office Voter 17')![tags]).toBe('');
    expect(rows.filter((r) => r[tags] !== '').length).toBeGreaterThan(expected / 5);
    expect(exportThreadCounts().running).toBe(0);
  });

  it('filters: each gives exactly the in-thread rows', async () => {
    for (const filters of [
      { constituency: 'varanasi' },
      { constituency: 'वाराणसी' },
      { booth: '3' },
      { ward: '7' },
      { constituency: 'Lucknow', booth: '2', ward: '4' },
    ]) {
      const { fromThreads, inThread, started } = await both({ filters });
      expect(started).toBe(2);
      expect(fromThreads.raw).toBe(inThread.raw);
      expect(parseCsv(fromThreads.raw).length).toBeGreaterThan(10);
    }
    // A filter that keeps one voter in five: its tags are read by the batch's ids, not over its id range.
    const booth = parseCsv((await both({ filters: { booth: '1' } })).fromThreads.raw);
    const tags = booth[0]!.indexOf('tags');
    expect(booth.find((r) => r[1] === 'Office Voter 16')![tags]).toBe('alpha;Beta;Team 1;Zeta');
    expect(booth.find((r) => r[1] === 'Office Voter 21')![tags]).toBe('');
    // No match: nothing to start threads for.
    const none = await both({ filters: { ward: 'none' } });
    expect(none.started).toBe(0);
    expect(none.fromThreads.raw).toBe(none.inThread.raw);
    expect(exportThreadCounts().running).toBe(0);
  });

  it('a search is exported in the request thread, with the same rows', async () => {
    for (const search of ['Quote', 'नेहरू', '+91 98000 10', 'Neighbour']) {
      const { fromThreads, inThread, started } = await both({ filters: { search } });
      expect(started).toBe(0);
      expect(fromThreads.raw).toBe(inThread.raw);
    }
  });

  it('Excel: the same sheet as the in-thread export', async () => {
    const { fromThreads, inThread, started } = await both({ format: 'excel' });
    expect(started).toBe(2);
    const sheet = (file: Buffer) => unzip(file).get('xl/worksheets/sheet1.xml')!.toString('utf8');
    const threadedSheet = sheet(fromThreads.bytes);
    expect(threadedSheet).toBe(sheet(inThread.bytes));
    expect(threadedSheet.match(/<row>/g)).toHaveLength(expected + 1);
    expect(threadedSheet).not.toContain('Neighbour');
  });

  it('over a connection, to a client that reads slowly: the same bytes, the usual headers', async () => {
    const res = await openExport(threaded, bulky.token);
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('text/csv; charset=utf-8');
    expect(res.headers['content-disposition']).toMatch(
      /^attachment; filename="voters-\d{4}-\d\d-\d\d\.csv"$/,
    );
    expect(res.headers['x-request-id']).toBeTruthy();
    // Pauses let the socket fill up, so that chunks wait in it while the threads go on.
    const parts: Buffer[] = [];
    let received = 0;
    for await (const part of res as AsyncIterable<Buffer>) {
      parts.push(part);
      received += part.length;
      if (received > 256 * 1024) {
        received = 0;
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    }
    const inThread = await exportVoters(serial.app, bulky.token);
    expect(Buffer.concat(parts).equals(inThread.bytes)).toBe(true);
    expect(inThread.bytes.length).toBeGreaterThan(7_000_000);
    await until(() => exportThreadCounts().running === 0);
    expect(exportThreadCounts().running).toBe(0);
  });

  it('a client that goes away mid-download ends the threads', async () => {
    const before = exportThreadCounts();
    const res = await openExport(threaded, bulky.token);
    expect(res.statusCode).toBe(200);
    await once(res, 'data');
    res.pause();
    expect(exportThreadCounts().started).toBe(before.started + 2);
    expect(exportThreadCounts().running).toBe(2);
    res.destroy();
    await until(() => exportThreadCounts().running === 0);
    expect(exportThreadCounts().running).toBe(0);
  });

  it('downloads cut at many different moments: the threads stop between reads, the process carries on', async () => {
    // Worker.terminate() during a better-sqlite3 call can abort the whole process; the threads are asked to
    // stop instead. Cut while they read (not paused), at a different moment each time.
    for (let i = 0; i < 12; i += 1) {
      const res = await openExport(threaded, bulky.token);
      expect(res.statusCode).toBe(200);
      await once(res, 'data');
      await new Promise((resolve) => setTimeout(resolve, i * 3));
      res.destroy();
      await until(() => exportThreadCounts().running === 0);
    }
    const whole = await exportVoters(threaded.app, bulky.token);
    expect(whole.status).toBe(200);
  });

  it("a worker's error ends the download with an error; the server carries on", async () => {
    const broken = await buildTestApp('sqlite', env('2', 'broken.db'));
    try {
      const account = await register(broken.app);
      await importOk(broken, account, voterLines('Broken', 0, 3000));
      // The file is gone for new connections (the app's own stays open): the workers cannot open it.
      rmSync(join(dir, 'broken.db'));
      const before = exportThreadCounts().started;
      const res = await openExport(broken, account.token);
      let received = '';
      res.setEncoding('utf8');
      res.on('data', (text: string) => (received += text));
      const outcome = await new Promise<string>((resolve) => {
        res.on('end', () => resolve(res.complete ? 'complete' : 'cut'));
        res.on('aborted', () => resolve('cut'));
        res.on('error', () => resolve('cut'));
      });
      expect(exportThreadCounts().started).toBe(before + 2);
      // The header line was out before the threads failed: the answer is a 200 whose body is cut short.
      expect(res.statusCode).toBe(200);
      expect(outcome).toBe('cut');
      expect(received).not.toContain('Broken Voter 2999');
      await until(() => exportThreadCounts().running === 0);
      expect(exportThreadCounts().running).toBe(0);
      expect((await call(broken.app, 'GET', '/api/healthz')).status).toBe(200);
    } finally {
      await broken.close();
    }
  });

  it('an in-memory database is always exported in the request thread', async () => {
    const memory = await buildTestApp('sqlite', { EXPORT_THREADS: '2', EXPORT_THREADS_MIN_VOTERS: '1' });
    try {
      const account = await register(memory.app);
      await importOk(memory, account, voterLines('Memory', 0, 500));
      const before = exportThreadCounts().started;
      const res = await exportVoters(memory.app, account.token);
      expect(res.status).toBe(200);
      expect(parseCsv(res.raw)).toHaveLength(501);
      expect(exportThreadCounts().started).toBe(before);
    } finally {
      await memory.close();
    }
  });
});
