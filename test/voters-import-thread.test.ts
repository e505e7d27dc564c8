import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WriteTurns } from '../src/db/sqlite-turns.ts';
import { importThreadCounts } from '../src/modules/voter-imports/voter-imports.sqlite.ts';
import {
  buildTestApp,
  call,
  dialects,
  multipartBody,
  register,
  uniquePhone,
  type TestApp,
} from './helpers.ts';

/**
 * On a database file a SQLite import runs in a thread of its own with its own connection (voter-imports.sqlite.ts),
 * its transactions taking turns with the app's writes (db/sqlite-turns.ts). The other import tests run on an
 * in-memory database, where the import runs on the app's connection: this one covers the thread.
 */

/** `rows` voters with tags and roll numbers (a part's serial numbers), from `first`. */
function roll(rows: number, first = 0): string {
  const lines = ['name,phone,tags,epic_number,part_number,serial_number'];
  for (let i = first; i < first + rows; i++)
    lines.push(
      `Voter ${i},+9190${String(i).padStart(8, '0')},ward ${i % 7};youth,EPC${String(i).padStart(7, '0')},${1 + Math.floor(i / 5000)},${1 + (i % 5000)}`,
    );
  return `${lines.join('\n')}\n`;
}

async function importFile(t: TestApp, token: string, csv: string, query = '') {
  const { payload, contentType } = multipartBody([{ name: 'file', content: csv }]);
  const res = await t.app.inject({
    method: 'POST',
    url: `/api/voters/import${query}`,
    headers: { authorization: `Bearer ${token}`, 'content-type': contentType },
    payload,
  });
  return { status: res.statusCode, body: res.json() };
}

describe.runIf(dialects.includes('sqlite'))('a SQLite import in a thread of its own', () => {
  let t: TestApp;
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ces-import-thread-'));
    t = await buildTestApp('sqlite', { DATABASE_URL: `sqlite:${join(dir, 'ces.db')}` });
  });
  afterAll(async () => {
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('applies a roll with tags while the app goes on writing, in transactions too; the thread ends', async () => {
    const owner = await register(t.app);
    const other = await register(t.app);
    const before = importThreadCounts();
    const rows = 20_000;
    let importing = true;
    const imported = importFile(t, owner.token, roll(rows)).finally(() => (importing = false));
    // Another workspace writes throughout: single statements (a new voter) and transactions (an edit, which
    // reads and writes): none may fail or wait behind the import for long.
    const writes: number[] = [];
    let edits = 0;
    do {
      const phone = uniquePhone();
      const created = await call(t.app, 'POST', '/api/voters', {
        token: other.token,
        body: { name: `Other ${writes.length}`, phone },
      });
      writes.push(created.status);
      const edited = await call(t.app, 'PUT', `/api/voters/${created.body.data.id}`, {
        token: other.token,
        body: { ward: '9', tags: ['edited'] },
      });
      expect(edited.status, edited.raw).toBe(200);
      edits += 1;
    } while (importing);
    const result = await imported;
    expect(result.status, JSON.stringify(result.body)).toBe(200);
    expect(result.body.data).toMatchObject({ imported: rows, updated: 0, failed: 0 });
    expect(writes.every((s) => s === 201)).toBe(true);
    expect(edits).toBeGreaterThan(1);
    expect(importThreadCounts().started).toBe(before.started + 1);
    expect(importThreadCounts().running).toBe(0);

    const youth = await call(t.app, 'GET', '/api/voters?tags=youth&per_page=1', { token: owner.token });
    expect(youth.body.data.total).toBe(rows);
    const last = await call(t.app, 'GET', `/api/voters?search=EPC${String(rows - 1).padStart(7, '0')}`, {
      token: owner.token,
    });
    expect(last.body.data.data).toHaveLength(1);
    expect(last.body.data.data[0]).toMatchObject({
      name: `Voter ${rows - 1}`,
      part_number: 4,
      serial_number: 5000,
      tags: [`ward ${(rows - 1) % 7}`, 'youth'],
    });
    const others = await call(t.app, 'GET', '/api/voters?tags=edited&per_page=1', { token: other.token });
    expect(others.body.data.total).toBe(writes.length);

    // The same file again: nothing new, and the roll numbers already the same voters'.
    const again = await importFile(t, owner.token, roll(rows));
    expect(again.body.data).toMatchObject({ imported: 0, failed: 0 });
    expect(importThreadCounts().running).toBe(0);
  });

  it('a dry run counts in the thread and writes nothing', async () => {
    const owner = await register(t.app);
    const dry = await importFile(t, owner.token, roll(3000, 100_000), '?dry_run=true');
    expect(dry.status).toBe(200);
    expect(dry.body.data).toMatchObject({ imported: 3000, dry_run: true });
    const list = await call(t.app, 'GET', '/api/voters?per_page=1', { token: owner.token });
    expect(list.body.data.total).toBe(0);
    expect(importThreadCounts().running).toBe(0);
  });
});

describe.runIf(dialects.includes('sqlite'))('import threads held to DB_BULK_POOL_SIZE', () => {
  let t: TestApp;
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ces-import-threads-'));
    t = await buildTestApp('sqlite', {
      DATABASE_URL: `sqlite:${join(dir, 'ces.db')}`,
      DB_BULK_POOL_SIZE: '1',
    });
  });
  afterAll(async () => {
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('runs one thread at a time: three workspaces importing at once take turns, and all three land', async () => {
    const offices = [await register(t.app), await register(t.app), await register(t.app)];
    const before = importThreadCounts();
    let most = 0;
    const watch = setInterval(() => (most = Math.max(most, importThreadCounts().running)), 1);
    try {
      const results = await Promise.all(
        offices.map((o, i) => importFile(t, o.token, roll(10_000, 200_000 + i * 10_000))),
      );
      for (const r of results) expect(r.body.data).toMatchObject({ imported: 10_000, failed: 0 });
    } finally {
      clearInterval(watch);
    }
    expect(importThreadCounts().started).toBe(before.started + 3);
    expect(most).toBe(1);
    expect(importThreadCounts().running).toBe(0);
  });
});

describe('the app and an import take turns to write', () => {
  const tick = () => new Promise((resolve) => setImmediate(resolve));

  it("waits the app's writes for the import's transaction, and the import for the app's writes under way", async () => {
    const turns = new WriteTurns();
    const order: string[] = [];
    let endImport!: () => void;
    const first = turns.importWrite(async () => {
      order.push('import 1 starts');
      await new Promise<void>((resolve) => (endImport = resolve));
      order.push('import 1 ends');
    });
    await tick();
    const app = turns.appWrite().then(() => order.push('app writes'));
    await tick();
    expect(order).toEqual(['import 1 starts']);
    // A second transaction of the import's queues behind the app's write that waits (no starvation).
    const second = turns.importWrite(async () => {
      order.push('import 2');
    });
    endImport();
    await app;
    await tick();
    expect(order).toEqual(['import 1 starts', 'import 1 ends', 'app writes']);
    turns.appDone();
    await Promise.all([first, second]);
    expect(order).toEqual(['import 1 starts', 'import 1 ends', 'app writes', 'import 2']);
  });

  it("lets the app write at once when no import writes, and an import's failure give the turn back", async () => {
    const turns = new WriteTurns();
    await turns.appWrite();
    turns.appDone();
    await expect(
      turns.importWrite(async () => {
        throw new Error('the chunk failed');
      }),
    ).rejects.toThrow('the chunk failed');
    let wrote = false;
    await turns.appWrite().then(() => (wrote = true));
    expect(wrote).toBe(true);
    turns.appDone();
  });
});
