/**
 * Erasure proven complete (issue 56): a person is made everywhere the service keeps people (a voter with fields
 * and tags, messages both ways, a conversation, a grievance, a door visit with its survey response, a poll-day
 * mark, an import's stored errors, webhook payloads, live events, the channel log, an idempotent request's stored
 * answer, audit entries), then erased. Every text column of every table of the database, found from the
 * database's own catalog (not from a list of known columns), and every stored import file, is then read for the
 * person's phone (both forms), email, name and EPIC number: only the keyed hash may remain.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isPostgres } from '../src/db/dialect.ts';
import { isText } from '../src/modules/privacy/erasure.ts';
import { erasedMark } from '../src/modules/opt-outs/opt-outs.rules.ts';
import { importFileStore } from '../src/modules/voter-imports/import-store.ts';
import { VoterImportLoop } from '../src/modules/voter-imports/import-jobs.loop.ts';
import { VoterImportJobs } from '../src/modules/voter-imports/import-jobs.ts';
import { VoterImporter } from '../src/modules/voter-imports/voter-imports.ts';
import {
  type Account,
  buildTestApp,
  call,
  dialects,
  importCsv,
  multipartBody,
  register,
  type TestApp,
  uniqueEmail,
  uniquePhone,
} from './helpers.ts';

const letters = (n: number) => Array.from(randomBytes(n), (b) => String.fromCharCode(97 + (b % 26))).join('');

/** Every text column of every table, read from the catalog: [table, column]. */
async function allTextColumns(t: TestApp): Promise<[string, string][]> {
  const db = t.db.kysely;
  const out: [string, string][] = [];
  if (isPostgres(db)) {
    const rows = await sql<{ table_name: string; column_name: string; data_type: string }>`
      SELECT c.table_name, c.column_name, c.data_type FROM information_schema.columns c
      JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
      WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE'`.execute(db);
    for (const r of rows.rows) if (isText(r.data_type)) out.push([r.table_name, r.column_name]);
  } else {
    const tables = await sql<{ name: string }>`SELECT name FROM sqlite_master WHERE type = 'table'`.execute(
      db,
    );
    for (const { name } of tables.rows) {
      const info = await sql<{
        name: string;
        type: string;
      }>`SELECT name, type FROM pragma_table_info(${name})`.execute(db);
      // FTS5 shadow tables declare no types: their BLOBs and text are read as text all the same.
      for (const c of info.rows) if (isText(c.type) || c.type === '') out.push([name, c.name]);
    }
  }
  return out;
}

/** Rows of any table whose text holds any of `needles`: "table.column: value". */
async function findAnywhere(t: TestApp, needles: string[]): Promise<string[]> {
  const db = t.db.kysely;
  const postgres = isPostgres(db);
  const found: string[] = [];
  for (const [table, column] of await allTextColumns(t)) {
    for (const needle of needles) {
      const hit = postgres
        ? sql`strpos(${sql.ref(column)}::text, ${needle}) > 0`
        : sql`instr(CAST(${sql.ref(column)} AS TEXT), ${needle}) > 0`;
      const rows = await sql<{
        v: string;
      }>`SELECT ${sql.ref(column)} AS v FROM ${sql.table(table)} WHERE ${hit} LIMIT 3`.execute(db);
      for (const row of rows.rows)
        found.push(`${table}.${column} (${needle}): ${String(row.v).slice(0, 200)}`);
    }
  }
  // PostgreSQL's planner statistics sample values too (pg_stats: histogram bounds, most common values).
  if (postgres)
    for (const needle of needles) {
      const rows = await sql<{ t: string; c: string }>`SELECT tablename AS t, attname AS c FROM pg_stats
        WHERE schemaname = current_schema() AND (strpos(coalesce(most_common_vals::text, ''), ${needle}) > 0
          OR strpos(coalesce(histogram_bounds::text, ''), ${needle}) > 0)`.execute(db);
      for (const row of rows.rows) found.push(`pg_stats ${row.t}.${row.c} (${needle})`);
    }
  return found;
}

/** Stored import files (uploads and errors.csv) holding any of `needles`. */
async function filesHolding(t: TestApp, needles: string[]): Promise<string[]> {
  const store = importFileStore(t.db);
  const out: string[] = [];
  for (const key of await store.keys('', 10_000)) {
    const chunks: Buffer[] = [];
    for await (const chunk of store.read(key)) chunks.push(chunk);
    const text = Buffer.concat(chunks).toString('utf8');
    for (const needle of needles) if (text.includes(needle)) out.push(`${key} (${needle})`);
  }
  return out;
}

async function importAsync(t: TestApp, token: string, csv: string) {
  const { payload, contentType } = multipartBody([{ name: 'file', content: csv, filename: 'roll.csv' }]);
  const res = await t.app.inject({
    method: 'POST',
    url: '/api/voters/import',
    headers: { 'content-type': contentType, authorization: `Bearer ${token}`, prefer: 'respond-async' },
    payload,
  });
  return { status: res.statusCode, body: res.json() };
}

function loopFor(t: TestApp, owner: Account) {
  const importer = new VoterImporter({
    db: t.db,
    defaultCountry: t.config.defaultCountry,
    maxBytes: t.config.import.maxBytes,
    maxErrors: t.config.import.maxErrors,
    appKey: t.config.appKey,
  });
  const jobs = new VoterImportJobs({ db: t.db, importer, maxBytes: t.config.import.maxBytes });
  return new VoterImportLoop({ db: t.db, jobs, log: silent, workspaceIds: [owner.user.workspace_id] });
}

const silent = pino({ level: 'silent' });

for (const dialect of dialects) {
  describe(`erasure reaches every table (${dialect})`, () => {
    let t: TestApp;
    let owner: Account;
    beforeAll(async () => {
      t = await buildTestApp(dialect, { WEBHOOK_ALLOW_PRIVATE_URLS: 'true' });
      owner = await register(t.app);
    });
    afterAll(() => t.close());

    it('leaves no phone, email, name or EPIC number anywhere, only the keyed hash on an opt-out', async () => {
      const token = owner.token;
      const ws = owner.user.workspace_id as number;
      const phone = uniquePhone();
      const national = phone.slice(3);
      const email = uniqueEmail('erase');
      const name = `Zorawar ${letters(10)}`;
      const epic = `ZRW${String(Math.floor(Math.random() * 9e6) + 1e6)}`;
      const post = async (url: string, body: unknown, headers?: Record<string, string>) => {
        const res = await call(t.app, 'POST', url, { token, body, ...(headers ? { headers } : {}) });
        expect(res.status, `${url}: ${res.raw}`).toBeLessThan(300);
        return res.body.data;
      };

      // Webhooks subscribed to everything: their payloads are stored (webhook_events) and live events recorded.
      await post('/api/webhooks', {
        url: 'http://127.0.0.1:9/hook',
        events: [
          'message.received',
          'conversation.created',
          'grievance.created',
          'survey.response.completed',
        ],
      });
      await post('/api/voter-fields', { key: 'caste', label: 'Caste', type: 'text', sensitive: true });
      await post('/api/voter-fields', { key: 'remark', label: 'Remark', type: 'text' });
      const voter = await post('/api/voters', {
        name,
        phone,
        email,
        epic_number: epic,
        part_number: 41,
        serial_number: 7,
        tags: ['Erase Me'],
        fields: { caste: 'X', remark: `call ${national} after 6` },
        consent: 'given',
      });
      const voterId = voter.id as number;
      // Messages both ways, a conversation, an idempotent request's stored answer (it holds the address).
      await post(
        '/api/messages/send',
        { channel: 'sms', to: phone, message: `Namaste ${name}, your booth is 41.` },
        { 'idempotency-key': randomUUID() },
      );
      await post('/api/inbound', {
        channel: 'sms',
        from: phone,
        body: `I am ${name}, EPIC ${epic}, mail ${email}`,
      });
      await post('/api/grievances', {
        title: 'Street light',
        description: `Reported by ${name} (${phone})`,
        voter_id: voterId,
        reporter_name: name,
        reporter_phone: phone,
      });
      // A door visit with a survey response (a free-text answer) and a note, then a poll-day mark.
      const survey = await post('/api/surveys', {
        name: 'Door',
        questions: [
          {
            key: 'issue',
            type: 'choice',
            text: { en: 'Issue?' },
            choices: [
              { key: 'water', label: { en: 'Water' } },
              { key: 'roads', label: { en: 'Roads' } },
            ],
          },
          { key: 'words', type: 'text', text: { en: 'Anything else?' } },
        ],
      });
      const turf = await post('/api/turfs', {
        name: 'Part 41',
        filters: { part_number: 41 },
        survey_id: survey.id,
      });
      expect(turf.voters).toBe(1);
      const visits = await post('/api/visits', {
        visits: [
          {
            client_id: randomUUID(),
            voter_id: voterId,
            outcome: 'met',
            visited_at: new Date(Date.now() - 60_000).toISOString(),
            note: `${name} asked to call ${phone}`,
            survey_id: survey.id,
            answers: { issue: 'water', words: `my email is ${email}` },
          },
        ],
      });
      expect(visits.visits[0].status).toBe('created');
      await post('/api/poll-day/marks', {
        marks: [
          { client_id: randomUUID(), voter_id: voterId, voted: true, marked_at: new Date().toISOString() },
        ],
      });
      // Imports whose stored files hold the person: one run (its errors.csv keeps a refused row: no name), one
      // still queued (its stored upload), whose upload the erasure lists as remaining until the job ends.
      const csv = `name,phone,email,epic_number,age\n${name},${phone},${email},${epic},abc\n,${phone},${email},${epic},40\n`;
      const ran = await importAsync(t, token, csv);
      expect(ran.status, JSON.stringify(ran.body)).toBe(202);
      await loopFor(t, owner).runOnce();
      const job = await call(t.app, 'GET', `/api/voters/imports/${ran.body.data.id}`, { token });
      expect(job.body.data).toMatchObject({ status: 'completed', failed: 1 });
      expect(job.body.data.warnings[0]).toMatchObject({ field: 'age', value: 'abc' });
      const queued = await importAsync(t, token, csv);
      expect(queued.status).toBe(202);
      // The channel log keeps an account's exchanges redacted; a line that held the full number is swept too. The
      // account is written straight to the table, switched off and default for nothing: sends stay on the sandbox.
      const now = new Date().toISOString();
      const account = await t.db.kysely
        .insertInto('channel_accounts')
        .values({
          workspace_id: ws,
          name: 'Old gateway',
          provider: 'msg91',
          channels: '["ivr"]',
          settings: '{}',
          credentials: 'x',
          credentials_set: '[]',
          default_for: '[]',
          send_rate_per_second: null,
          disabled_at: now,
          disabled_reason: 'switched off',
          callback_token: 'x',
          verify_token: null,
          created_at: now,
          updated_at: now,
        })
        .returning('id')
        .executeTakeFirstOrThrow();
      await t.db.kysely
        .insertInto('channel_log')
        .values({
          workspace_id: ws,
          channel_account_id: Number(account.id),
          at: now,
          direction: 'out',
          kind: 'send',
          method: 'POST',
          url: 'https://example.invalid/send',
          status: 200,
          duration_ms: 5,
          request: JSON.stringify({ to: phone, text: '[20 characters]' }),
          response: '{}',
          message_id: null,
          error_code: null,
        })
        .execute();

      const needles = [phone, national, email, name, epic];
      // Everything above really holds the person before the erasure (or the scan would prove nothing).
      const before = await findAnywhere(t, needles);
      for (const table of [
        'voters.',
        'messages.',
        'inbound_messages.',
        'conversations.',
        'grievances.',
        'visits.',
        'survey_answers.',
        'survey_responses.',
        'webhook_events.',
        'live_events.',
        'idempotency_keys.',
        'voter_field_values.',
        'channel_log.',
      ])
        expect(
          before.some((line) => line.startsWith(table)),
          `${table} holds the person before`,
        ).toBe(true);
      expect(await filesHolding(t, needles)).not.toEqual([]);
      // SQLite: the imports above took statistics (PRAGMA optimize), without ANALYZE's sampled index keys
      // (src/db/sqlite-statistics.ts), so that no sample can hold the person.
      if (!isPostgres(t.db.kysely)) {
        const stat1 = await sql<{ n: number }>`SELECT count(*) AS n FROM sqlite_stat1`.execute(t.db.kysely);
        expect(Number(stat1.rows[0]!.n)).toBeGreaterThan(0);
        const stat4 = await sql<{ n: number }>`SELECT count(*) AS n FROM sqlite_stat4`.execute(t.db.kysely);
        expect(Number(stat4.rows[0]!.n)).toBe(0);
      }

      // Another voter with a field value: PostgreSQL keeps the statistics of a table that ANALYZE finds empty (it has
      // nothing to sample), so the person must not be the only row of a table for the check below (docs/privacy.md).
      await post('/api/voters', { name: 'Someone Else', phone: uniquePhone(), fields: { remark: 'x' } });
      // PostgreSQL's statistics sampled now, so that the erasure must deal with them (histogram bounds, common values).
      if (isPostgres(t.db.kysely)) await sql`ANALYZE`.execute(t.db.kysely);
      const request = await post('/api/privacy/requests', { type: 'erasure', address: phone });
      expect(request.voter_id).toBe(voterId);
      const erase = await call(t.app, 'POST', `/api/privacy/requests/${request.id}/erase`, { token });
      expect(erase.status, erase.raw).toBe(200);
      expect(erase.body.data).toMatchObject({
        status: 'completed',
        address: erasedMark(t.config.appKey, phone),
      });
      expect(erase.body.data.erasure.removed).toMatchObject({ voters: 1, messages: 1, inbound_messages: 1 });
      expect(erase.body.data.erasure.remaining).toEqual([
        { import_id: queued.body.data.id, file: 'upload', removed_by: 'its import job, when it ends' },
      ]);
      expect(await findAnywhere(t, needles)).toEqual([]);
      // The queued job's upload still holds the person until its job ends (it was named in `remaining`); when it
      // runs, the person's row is refused (erased, and no consent given) and nothing of them is stored again.
      expect(new Set((await filesHolding(t, needles)).map((f) => f.split(' ')[0]))).toEqual(
        new Set([expect.stringMatching(/^[\w-]+$/)]),
      );
      await loopFor(t, owner).runOnce();
      const rerun = await call(t.app, 'GET', `/api/voters/imports/${queued.body.data.id}`, { token });
      expect(rerun.body.data).toMatchObject({ status: 'completed', imported: 0, updated: 0 });
      expect(await filesHolding(t, needles)).toEqual([]);
      expect(await findAnywhere(t, needles)).toEqual([]);

      // Only the keyed hash stays, on an opt-out of every channel: the person is never messaged again.
      const optOuts = await t.db.kysely
        .selectFrom('opt_outs')
        .selectAll()
        .where('workspace_id', '=', ws)
        .execute();
      expect(optOuts.map((o) => [o.address, o.channel, o.source])).toEqual(
        expect.arrayContaining([
          [erasedMark(t.config.appKey, phone), 'all', 'erasure'],
          [erasedMark(t.config.appKey, email), 'all', 'erasure'],
        ]),
      );
      const again = await call(t.app, 'POST', '/api/messages/send', {
        token,
        body: { channel: 'sms', to: phone, message: 'Hello again' },
      });
      expect(again.status, again.raw).toBe(422);
      expect(again.body.details.to[0]).toContain('opted out');
      // Counts stay: the message and the reply are still counted, the survey's result still has its answer.
      const results = await call(t.app, 'GET', `/api/surveys/${survey.id}/results`, { token });
      expect(JSON.stringify(results.body.data)).toContain('"water"');
      // The audit entry names the request, not the person.
      const audit = await call(t.app, 'GET', '/api/audit-log?action=privacy.erased', { token });
      expect(audit.body.data.data[0]).toMatchObject({
        target_type: 'privacy_request',
        target_id: request.id,
      });

      // Nothing is left to export.
      const exported = await call(t.app, 'GET', `/api/privacy/requests/${request.id}/export`, { token });
      expect(exported.status, exported.raw).toBe(409);
      // Erasing twice changes nothing.
      const twice = await call(t.app, 'POST', `/api/privacy/requests/${request.id}/erase`, { token });
      expect(twice.body.data).toEqual(erase.body.data);
      // A later import row with the address comes in only with consent given.
      const back = await importCsv(t.app, token, `name,phone,consent\n${name},${phone},\n`);
      expect(back.body.data).toMatchObject({ imported: 0 });
      const given = await importCsv(t.app, token, `name,phone,consent\n${name},${phone},given\n`);
      expect(given.body.data, given.raw).toMatchObject({ imported: 1 });
    });
  });
}
