import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.ts';
import { VoterImportLoop } from '../src/modules/voter-imports/import-jobs.loop.ts';
import { claimImportJob } from '../src/modules/voter-imports/import-jobs.repository.ts';
import { VoterImportJobs } from '../src/modules/voter-imports/import-jobs.ts';
import { DirectoryFileStore, importFileStore } from '../src/modules/voter-imports/import-store.ts';
import { VoterImporter } from '../src/modules/voter-imports/voter-imports.ts';
import {
  buildTestApp,
  call,
  dialects,
  multipartBody,
  register,
  uniquePhone,
  type Account,
  type TestApp,
} from './helpers.ts';

const silent = pino({ level: 'silent' });
const DAY = 86_400_000;

async function upload(t: TestApp, token: string, csv: string) {
  const { payload, contentType } = multipartBody([{ name: 'file', content: csv, filename: 'roll.csv' }]);
  const res = await t.app.inject({
    method: 'POST',
    url: '/api/voters/import',
    headers: { 'content-type': contentType, authorization: `Bearer ${token}`, prefer: 'respond-async' },
    payload,
  });
  expect(res.statusCode).toBe(202);
  return res.json().data as { id: string };
}

function jobsFor(t: TestApp) {
  const importer = new VoterImporter({
    db: t.db,
    defaultCountry: t.config.defaultCountry,
    maxBytes: t.config.import.maxBytes,
    maxErrors: t.config.import.maxErrors,
    appKey: t.config.appKey,
  });
  return new VoterImportJobs({ db: t.db, importer, maxBytes: t.config.import.maxBytes });
}

function loopFor(t: TestApp, owner: Account) {
  const jobs = jobsFor(t);
  return new VoterImportLoop({
    db: t.db,
    jobs,
    log: silent,
    workspaceIds: [owner.user.workspace_id],
    retentionDays: 30,
  });
}

const rowId = (publicId: string) => Number(publicId.slice('imp_'.length));

async function jobRow(t: TestApp, publicId: string) {
  return t.db.kysely
    .selectFrom('voter_imports')
    .selectAll()
    .where('id', '=', rowId(publicId))
    .executeTakeFirst();
}

/**
 * Bytes stored under a key, or null when nothing is: SQLite, the file (missing: ENOENT); PostgreSQL, the
 * chunks in voter_import_files (counted as rows too).
 */
async function stored(t: TestApp, key: string): Promise<number | null> {
  if (t.db.dialect === 'postgres') {
    const chunks = await t.db.kysely
      .selectFrom('voter_import_files')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('file_key', '=', key)
      .executeTakeFirstOrThrow();
    if (Number(chunks.n) === 0) return null;
  }
  let bytes = 0;
  try {
    for await (const chunk of importFileStore(t.db).read(key)) bytes += chunk.length;
  } catch (error) {
    if ((error as { code?: string }).code === 'ENOENT') return null;
    throw error;
  }
  return bytes;
}

async function store(t: TestApp, key: string, content: string) {
  const writer = await importFileStore(t.db).writer(key);
  await writer.write(Buffer.from(content));
  await writer.end();
}

/** Prune rounds until the walk over the stored keys has gone round once (a shared database holds others'). */
async function pruneLap(loop: VoterImportLoop, nowMs = Date.now()) {
  for (let i = 0; i < 100; i += 1) if ((await loop.prune(nowMs)).lap) return;
  throw new Error('the pruning never finished a lap');
}

const keyAt = (ms: number) => `imp-${ms.toString(36)}-${randomUUID()}`;

for (const dialect of dialects) {
  describe(`voter import files are deleted when no longer needed (${dialect})`, () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await buildTestApp(dialect);
    });
    afterAll(() => t.close());

    it('the upload is gone once the job completed; errors.csv is still served from the failed rows', async () => {
      const owner = await register(t.app);
      const csv = `name,phone,ward\nAsha,${uniquePhone()},7\n,12,8\n`;
      const job = await upload(t, owner.token, csv);
      const key = (await jobRow(t, job.id))!.file_key;
      expect(await stored(t, key)).toBe(Buffer.byteLength(csv));

      expect(await loopFor(t, owner).runOnce()).toBe(true);
      expect((await jobRow(t, job.id))!.status).toBe('completed');
      expect(await stored(t, key)).toBeNull();

      const errors = await call(t.app, 'GET', `/api/voters/imports/${job.id}/errors.csv`, {
        token: owner.token,
      });
      expect(errors.status).toBe(200);
      const lines = errors.raw.trimEnd().split('\n');
      expect(lines[0]).toBe('name,phone,ward,error');
      expect(lines).toHaveLength(2);
      expect(lines[1]).toMatch(/^,12,8,/);
    });

    it('the upload is gone once the job failed; errors.csv still answers', async () => {
      const owner = await register(t.app);
      const job = await upload(t, owner.token, 'name,email\nA,a@example.com\n');
      const key = (await jobRow(t, job.id))!.file_key;
      expect(await stored(t, key)).not.toBeNull();
      expect(await loopFor(t, owner).runOnce()).toBe(true);
      expect((await jobRow(t, job.id))!.status).toBe('failed');
      expect(await stored(t, key)).toBeNull();
      const errors = await call(t.app, 'GET', `/api/voters/imports/${job.id}/errors.csv`, {
        token: owner.token,
      });
      expect(errors.status).toBe(200);
      expect(errors.raw).toBe('error\n');
    });

    it('a worker that lost its lease before finishing leaves the upload to the job (still running elsewhere)', async () => {
      const owner = await register(t.app);
      // A file refused as a whole: the job fails at once, with no progress write that would notice the loss.
      const job = await upload(t, owner.token, 'name,email\nLease,l@example.com\n');
      const row = (await jobRow(t, job.id))!;
      const claimed = await claimImportJob(t.db.kysely, 'w1', Date.now(), 60_000, new Date().toISOString(), [
        owner.user.workspace_id,
      ]);
      expect(claimed?.id).toBe(row.id);
      // Another worker takes the job over while w1 runs it: w1 must neither fail it nor delete its upload.
      await t.db.kysely
        .updateTable('voter_imports')
        .set({ lease_owner: 'w2' })
        .where('id', '=', row.id)
        .execute();
      await jobsFor(t).run(claimed!, { owner: 'w1', lost: () => false, stopping: () => false });
      expect((await jobRow(t, job.id))!.status).toBe('running');
      expect(await stored(t, row.file_key)).not.toBeNull();
    });

    it('a queued or running job keeps its file through pruning; leftovers of no such job are removed', async () => {
      const owner = await register(t.app);
      const loop = loopFor(t, owner);
      const queued = await upload(t, owner.token, `name,phone\nQueued,${uniquePhone()}\n`);
      const running = await upload(t, owner.token, `name,phone\nRunning,${uniquePhone()}\n`);
      const runningRow = (await jobRow(t, running.id))!;
      await t.db.kysely
        .updateTable('voter_imports')
        .set({ status: 'running', lease_owner: 'elsewhere', lease_until: Date.now() + 60_000 })
        .where('id', '=', runningRow.id)
        .execute();
      const queuedKey = (await jobRow(t, queued.id))!.file_key;

      // A job that completed, but whose upload removal a crash cut short: the upload goes, errors.csv stays.
      const done = await upload(t, owner.token, `name,phone\nDone,${uniquePhone()}\n,12\n`);
      const doneKey = (await jobRow(t, done.id))!.file_key;
      await t.db.kysely
        .updateTable('voter_imports')
        .set({ status: 'completed', finished_at: new Date().toISOString() })
        .where('id', '=', rowId(done.id))
        .execute();
      await store(t, `${doneKey}.errors`, 'name,phone,error\nBad,12,phone: bad\n');

      // Files of no job: one an hour and more old (a crash between storing and queueing), one just stored.
      const orphan = keyAt(Date.now() - 2 * 3_600_000);
      const fresh = keyAt(Date.now());
      await store(t, orphan, 'name,phone\nOrphan,9812345678\n');
      await store(t, fresh, 'name,phone\nFresh,9812345678\n');

      await pruneLap(loop);
      expect(await stored(t, queuedKey)).not.toBeNull();
      expect(await stored(t, runningRow.file_key)).not.toBeNull();
      expect(await stored(t, doneKey)).toBeNull();
      expect(await stored(t, `${doneKey}.errors`)).not.toBeNull();
      expect(await stored(t, orphan)).toBeNull();
      expect(await stored(t, fresh)).not.toBeNull();
      await importFileStore(t.db).remove(fresh);

      // The queued job still runs from its file.
      await t.db.kysely
        .updateTable('voter_imports')
        .set({ status: 'completed', finished_at: new Date().toISOString(), lease_owner: null })
        .where('id', '=', runningRow.id)
        .execute();
      expect(await loop.runOnce()).toBe(true);
      expect((await jobRow(t, queued.id))!).toMatchObject({ status: 'completed' });
    });

    it('retention: a job finished more than IMPORT_JOB_RETENTION_DAYS ago is deleted with its errors.csv', async () => {
      const owner = await register(t.app);
      const loop = loopFor(t, owner);
      const old = await upload(t, owner.token, `name,phone\nOld,${uniquePhone()}\n,12\n`);
      const recent = await upload(t, owner.token, `name,phone\nRecent,${uniquePhone()}\n,12\n`);
      expect(await loop.runOnce()).toBe(true);
      expect(await loop.runOnce()).toBe(true);
      const oldKey = (await jobRow(t, old.id))!.file_key;
      const recentKey = (await jobRow(t, recent.id))!.file_key;
      expect(await stored(t, `${oldKey}.errors`)).not.toBeNull();

      await t.db.kysely
        .updateTable('voter_imports')
        .set({ finished_at: new Date(Date.now() - 31 * DAY).toISOString() })
        .where('id', '=', rowId(old.id))
        .execute();
      await t.db.kysely
        .updateTable('voter_imports')
        .set({ finished_at: new Date(Date.now() - 29 * DAY).toISOString() })
        .where('id', '=', rowId(recent.id))
        .execute();
      const result = await loop.prune();
      expect(result.jobs).toBeGreaterThanOrEqual(1);

      expect(await jobRow(t, old.id)).toBeUndefined();
      expect(await stored(t, `${oldKey}.errors`)).toBeNull();
      const gone = await call(t.app, 'GET', `/api/voters/imports/${old.id}`, { token: owner.token });
      expect(gone.status).toBe(404);

      expect(await jobRow(t, recent.id)).toBeDefined();
      expect(await stored(t, `${recentKey}.errors`)).not.toBeNull();
      const kept = await call(t.app, 'GET', `/api/voters/imports/${recent.id}/errors.csv`, {
        token: owner.token,
      });
      expect(kept.status).toBe(200);
      expect(kept.raw).toMatch(/^,12,/m);
    });

    it('IMPORT_JOB_RETENTION_DAYS is validated', () => {
      expect(loadConfig({}).import.jobRetentionDays).toBe(30);
      expect(loadConfig({ IMPORT_JOB_RETENTION_DAYS: '7' }).import.jobRetentionDays).toBe(7);
      expect(() => loadConfig({ IMPORT_JOB_RETENTION_DAYS: '0' })).toThrow(/IMPORT_JOB_RETENTION_DAYS/);
      expect(() => loadConfig({ IMPORT_JOB_RETENTION_DAYS: 'month' })).toThrow(/IMPORT_JOB_RETENTION_DAYS/);
    });
  });
}

describe('an in-memory database', () => {
  it('removes its import folder when it is closed', async () => {
    const t = await buildTestApp('sqlite');
    const owner = await register(t.app);
    await upload(t, owner.token, `name,phone\nTemp,${uniquePhone()}\n`);
    const folder = (importFileStore(t.db) as DirectoryFileStore).location;
    expect(folder).toBeDefined();
    expect(existsSync(folder!)).toBe(true);
    await t.close();
    expect(existsSync(folder!)).toBe(false);
  });
});
