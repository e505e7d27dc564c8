import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VoterImportLoop } from '../src/modules/voter-imports/import-jobs.loop.ts';
import { claimImportJob } from '../src/modules/voter-imports/import-jobs.repository.ts';
import { VoterImportJobs } from '../src/modules/voter-imports/import-jobs.ts';
import { VoterImporter } from '../src/modules/voter-imports/voter-imports.ts';
import {
  addMember,
  buildTestApp,
  call,
  dialects,
  expectError,
  multipartBody,
  register,
  uniquePhone,
  type Account,
  type TestApp,
} from './helpers.ts';

const silent = pino({ level: 'silent' });

async function upload(t: TestApp, token: string, csv: string, headers: Record<string, string> = {}) {
  const { payload, contentType } = multipartBody([{ name: 'file', content: csv, filename: 'roll.csv' }]);
  const res = await t.app.inject({
    method: 'POST',
    url: '/api/voters/import',
    headers: {
      'content-type': contentType,
      authorization: `Bearer ${token}`,
      prefer: 'respond-async',
      ...headers,
    },
    payload,
  });
  return { status: res.statusCode, body: res.json(), headers: res.headers };
}

function loopFor(t: TestApp, owner: Account, options: { leaseMs?: number; workerId?: string } = {}) {
  const importer = new VoterImporter({
    db: t.db,
    defaultCountry: t.config.defaultCountry,
    maxBytes: t.config.import.maxBytes,
    maxErrors: t.config.import.maxErrors,
    appKey: t.config.appKey,
  });
  const jobs = new VoterImportJobs({ db: t.db, importer, maxBytes: t.config.import.maxBytes });
  return new VoterImportLoop({
    db: t.db,
    jobs,
    log: silent,
    workspaceIds: [owner.user.workspace_id],
    ...options,
  });
}

async function voterCount(t: TestApp, workspaceId: number) {
  const row = await t.db.kysely
    .selectFrom('voters')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('workspace_id', '=', workspaceId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

async function audits(t: TestApp, workspaceId: number, action: string) {
  return t.db.kysely
    .selectFrom('audit_log')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('action', '=', action)
    .execute();
}

for (const dialect of dialects) {
  describe(`voter import jobs (${dialect})`, () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await buildTestApp(dialect);
    });
    afterAll(() => t.close());

    it('Prefer: respond-async stores the upload and answers 202 + Location; the loop runs it to completed', async () => {
      const owner = await register(t.app);
      const good = uniquePhone();
      const csv = [
        'Name,Phone,Ward,notes',
        `Asha Rao,${good},7,first`,
        ',12,8,"quoted, with comma"',
        `Bad Phone,12,6,kept`,
        `"=Evil",${uniquePhone()},,x`,
        `No Email,${uniquePhone()},9,y`,
      ].join('\n');
      const res = await upload(t, owner.token, csv);
      expect(res.status).toBe(202);
      expect(res.headers['preference-applied']).toBe('respond-async');
      const job = res.body.data;
      expect(job).toMatchObject({
        status: 'queued',
        file_name: 'roll.csv',
        bytes: Buffer.byteLength(csv),
        progress: { bytes_read: 0, rows_read: 0 },
        imported: 0,
        updated: 0,
        failed: 0,
        errors: [],
        started_at: null,
        finished_at: null,
      });
      expect(job.id).toMatch(/^imp_\d+$/);
      expect(res.headers.location).toBe(`/api/voters/imports/${job.id}`);
      expect(await voterCount(t, owner.user.workspace_id)).toBe(0);

      const pending = await call(t.app, 'GET', `/api/voters/imports/${job.id}/errors.csv`, {
        token: owner.token,
      });
      expectError(pending, 409, 'conflict');

      expect(await loopFor(t, owner).runOnce()).toBe(true);
      const done = await call(t.app, 'GET', res.headers.location as string, { token: owner.token });
      expect(done.status).toBe(200);
      expect(done.body.data).toMatchObject({
        id: job.id,
        status: 'completed',
        imported: 4,
        updated: 0,
        failed: 1,
        progress: { bytes_read: Buffer.byteLength(csv), rows_read: 5 },
        message: null,
      });
      expect(done.body.data.errors).toEqual([{ row: 3, field: 'name', message: 'must not be empty.' }]);
      // The row with a bad phone is kept without it.
      expect(done.body.data.warnings).toEqual([
        { line: 4, field: 'phone', value: '12', reason: expect.stringContaining('left out') },
      ]);
      expect(done.body.data.started_at).not.toBeNull();
      expect(done.body.data.finished_at).not.toBeNull();
      expect(await voterCount(t, owner.user.workspace_id)).toBe(4);

      const errors = await call(t.app, 'GET', `/api/voters/imports/${job.id}/errors.csv`, {
        token: owner.token,
      });
      expect(errors.status).toBe(200);
      expect(errors.headers['content-type']).toContain('text/csv');
      expect(errors.headers['content-disposition']).toContain(`${job.id}-errors.csv`);
      const lines = errors.raw.trimEnd().split('\n');
      expect(lines[0]).toBe('Name,Phone,Ward,notes,error');
      expect(lines).toHaveLength(2);
      expect(lines[1]).toMatch(/^,12,8,"quoted, with comma",name: must not be empty\.$/);

      const audit = await audits(t, owner.user.workspace_id, 'voters.imported');
      expect(audit).toHaveLength(1);
      expect(JSON.parse(audit[0]!.details!)).toMatchObject({ file_name: 'roll.csv', imported: 4, failed: 1 });
      expect(Number(audit[0]!.actor_id)).toBe(owner.user.id);
      // The uploader's address is kept with the job for its audit entry (inject's client is 127.0.0.1).
      expect(audit[0]!.ip).toBe('127.0.0.1');
    });

    it('lists jobs newest first in the page envelope; another workspace sees 404 and an empty list', async () => {
      const owner = await register(t.app);
      const first = await upload(t, owner.token, `name,phone\nA,${uniquePhone()}\n`);
      const second = await upload(t, owner.token, `name,phone\nB,${uniquePhone()}\n`);
      const list = await call(t.app, 'GET', '/api/voters/imports?per_page=1', { token: owner.token });
      expect(list.status).toBe(200);
      expect(list.body.data).toMatchObject({ current_page: 1, per_page: 1, total: 2, last_page: 2 });
      expect(list.body.data.data[0].id).toBe(second.body.data.id);
      const page2 = await call(t.app, 'GET', '/api/voters/imports?per_page=1&page=2', { token: owner.token });
      expect(page2.body.data.data[0].id).toBe(first.body.data.id);

      const stranger = await register(t.app);
      expectError(
        await call(t.app, 'GET', `/api/voters/imports/${first.body.data.id}`, { token: stranger.token }),
        404,
        'not_found',
      );
      expectError(
        await call(t.app, 'GET', `/api/voters/imports/${first.body.data.id}/errors.csv`, {
          token: stranger.token,
        }),
        404,
        'not_found',
      );
      const theirs = await call(t.app, 'GET', '/api/voters/imports', { token: stranger.token });
      expect(theirs.body.data.total).toBe(0);
      // A job id is `imp_<n>`: anything else is 422 saying so; a well-formed id of no job of yours is 404.
      for (const id of ['imp_x', '42']) {
        const res = await call(t.app, 'GET', `/api/voters/imports/${id}`, { token: owner.token });
        expectError(res, 422, 'validation_error');
        expect(res.body.details).toEqual({ import_id: ['must be an id such as imp_12.'] });
      }
      expectError(
        await call(t.app, 'GET', '/api/voters/imports/imp_999999999', { token: owner.token }),
        404,
        'not_found',
      );
    });

    it('a file that cannot be imported as a whole fails the job with a message and applies nothing', async () => {
      const owner = await register(t.app);
      const loop = loopFor(t, owner);
      const noPhone = await upload(t, owner.token, 'name,email\nA,a@example.com\n');
      const unclosed = await upload(
        t,
        owner.token,
        `name,phone\nGood One,${uniquePhone()}\nGood Two,${uniquePhone()}\n"Broken,${uniquePhone()}\n`,
      );
      expect(await loop.runOnce()).toBe(true);
      expect(await loop.runOnce()).toBe(true);
      expect(await loop.runOnce()).toBe(false);
      for (const job of [noPhone, unclosed]) {
        const res = await call(t.app, 'GET', `/api/voters/imports/${job.body.data.id}`, {
          token: owner.token,
        });
        expect(res.body.data.status).toBe('failed');
        expect(res.body.data.message).toMatch(/cannot be imported/);
        expect(res.body.data.finished_at).not.toBeNull();
      }
      expect(await voterCount(t, owner.user.workspace_id)).toBe(0);
      expect(await audits(t, owner.user.workspace_id, 'voters.imported')).toHaveLength(0);
    });

    it('two workers never run one job twice; a job cut short (lease ran out) runs again and doubles nothing', async () => {
      const owner = await register(t.app);
      const phones = [uniquePhone(), uniquePhone()];
      const csv = `name,phone\nOne,${phones[0]}\nTwo,${phones[1]}\n`;
      await upload(t, owner.token, csv);
      const a = loopFor(t, owner, { workerId: 'a' });
      const b = loopFor(t, owner, { workerId: 'b' });
      const ran = await Promise.all([a.runOnce(), b.runOnce()]);
      expect(ran.filter(Boolean)).toHaveLength(1);
      expect(await voterCount(t, owner.user.workspace_id)).toBe(2);

      // A worker claims the next job and dies (never runs it, never hands it back).
      const cut = await upload(t, owner.token, csv);
      const claimed = await claimImportJob(t.db.kysely, 'dead', Date.now(), 100, new Date().toISOString(), [
        owner.user.workspace_id,
      ]);
      expect(claimed?.status).toBe('running');
      expect(await b.runOnce()).toBe(false); // its lease still holds
      await new Promise((r) => setTimeout(r, 150));
      expect(await b.runOnce()).toBe(true);
      const res = await call(t.app, 'GET', `/api/voters/imports/${cut.body.data.id}`, { token: owner.token });
      expect(res.body.data).toMatchObject({ status: 'completed', imported: 0, updated: 2 });
      expect(await voterCount(t, owner.user.workspace_id)).toBe(2);
    });

    it('a worker that is stopping hands its job back (queued again, nothing applied); the next run finishes it', async () => {
      const owner = await register(t.app);
      const job = await upload(t, owner.token, `name,phone\nHanded Back,${uniquePhone()}\n`);
      const claimed = await claimImportJob(
        t.db.kysely,
        'stopping',
        Date.now(),
        60_000,
        new Date().toISOString(),
        [owner.user.workspace_id],
      );
      const importer = new VoterImporter({
        db: t.db,
        defaultCountry: 'IN',
        maxBytes: t.config.import.maxBytes,
        maxErrors: 10,
        appKey: t.config.appKey,
      });
      const jobs = new VoterImportJobs({ db: t.db, importer, maxBytes: t.config.import.maxBytes });
      await jobs.run(claimed!, { owner: 'stopping', lost: () => false, stopping: () => true });
      const back = await call(t.app, 'GET', `/api/voters/imports/${job.body.data.id}`, {
        token: owner.token,
      });
      expect(back.body.data.status).toBe('queued');
      expect(await voterCount(t, owner.user.workspace_id)).toBe(0);
      expect(await loopFor(t, owner).runOnce()).toBe(true);
      expect(await voterCount(t, owner.user.workspace_id)).toBe(1);
    });

    it('the background loop started and stopped as a process would: it picks queued jobs up by itself', async () => {
      const owner = await register(t.app);
      const loop = loopFor(t, owner);
      const job = await upload(t, owner.token, `name,phone\nLoop Voter,${uniquePhone()}\n`);
      loop.start();
      try {
        for (let i = 0; i < 100; i += 1) {
          const res = await call(t.app, 'GET', `/api/voters/imports/${job.body.data.id}`, {
            token: owner.token,
          });
          if (res.body.data.status === 'completed') break;
          await new Promise((r) => setTimeout(r, 50));
        }
      } finally {
        await loop.stop();
      }
      expect(await voterCount(t, owner.user.workspace_id)).toBe(1);
    });

    it('is for politicians and managers; dry_run with respond-async is 422; 413 over IMPORT_MAX_BYTES', async () => {
      const owner = await register(t.app);
      const volunteer = await addMember(t.app, owner, 'volunteer');
      const manager = await addMember(t.app, owner, 'manager');
      expectError(await upload(t, volunteer.token, 'name,phone\n').then(asAnswer), 403, 'forbidden');
      expectError(
        await call(t.app, 'GET', '/api/voters/imports', { token: volunteer.token }),
        403,
        'forbidden',
      );
      expectError(await call(t.app, 'GET', '/api/voters/imports'), 401, 'unauthorized');
      expect((await upload(t, manager.token, `name,phone\nM,${uniquePhone()}\n`)).status).toBe(202);
      const both = await t.app.inject({
        method: 'POST',
        url: '/api/voters/import?dry_run=true',
        headers: {
          'content-type': multipartBody([{ name: 'file', content: 'name,phone\n' }]).contentType,
          authorization: `Bearer ${owner.token}`,
          prefer: 'respond-async',
        },
        payload: 'x',
      });
      expect([400, 422]).toContain(both.statusCode);

      const small = await buildTestApp(dialect, { IMPORT_MAX_BYTES: '64' });
      try {
        const o = await register(small.app);
        const big = await upload(small, o.token, `name,phone\n${'Long Name,9812345678\n'.repeat(10)}`);
        expect(big.status).toBe(413);
        const list = await call(small.app, 'GET', '/api/voters/imports', { token: o.token });
        expect(list.body.data.total).toBe(0);
      } finally {
        await small.close();
      }
    });
  });
}

function asAnswer(res: { status: number; body: unknown }) {
  return { status: res.status, body: res.body as never, headers: {}, raw: JSON.stringify(res.body) };
}
