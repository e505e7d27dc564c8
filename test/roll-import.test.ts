/**
 * An office's second week (contract, fifth part, "Imports keep every voter" and "The roll's own headings"): a
 * roll shaped as a UP roll export, with its headings in English and in Hindi, imports every voter with the
 * phone and the constituency; a bad optional cell (an 11-digit phone) is left out and the row kept, with a
 * warning; the older EPIC forms are taken; an office's own headings are mapped with `mapping`, which the
 * workspace remembers.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SurveyRuns } from '../src/modules/surveys/survey-runs.ts';
import { VoterTagging } from '../src/modules/voters/voter-tags.ts';
import {
  type Answer,
  type Account,
  addMember,
  buildTestApp,
  call,
  dialects,
  expectError,
  multipartBody,
  register,
  type TestApp,
} from './helpers.ts';

const ENGLISH =
  'Sl No,Part No,Page No,EPIC No,House No,Elector Name,Name (Local),Father or Husband Name,Relation Type,Sex,Age,Mobile No,Ward,Booth,AC Name';
const HINDI = 'क्रम संख्या,भाग संख्या,ईपीआईसी संख्या,मकान संख्या,निर्वाचक का नाम,लिंग,आयु,मोबाइल,वार्ड';

/** A UP roll of `n` electors: 40 % without a phone, every 10th with an older EPIC form, four an 11-digit phone. */
function roll(n: number, part: number): { csv: string; lines: string[] } {
  const lines = [ENGLISH];
  for (let i = 1; i <= n; i++) {
    const epic =
      i % 10 === 0 ? `UP/74/${part}/${String(354000 + i)}` : `UPV${String(part * 1000 + i).padStart(7, '0')}`;
    const phone =
      i % 5 < 2
        ? ''
        : i % 25 === 3
          ? `98${String(part).padStart(3, '0')}${String(i).padStart(6, '0')}`
          : `9${String(part).padStart(3, '0')}${String(i).padStart(6, '0')}`;
    lines.push(
      [
        i,
        part,
        Math.ceil(i / 30),
        epic,
        Math.ceil(i / 3),
        `Elector ${part}-${i}`,
        `मतदाता ${i}`,
        `Father ${i}`,
        'F',
        i % 2 ? 'M' : 'F',
        20 + (i % 60),
        phone,
        'Ward 12',
        `Booth ${part}`,
        'Varanasi Cantt.',
      ].join(','),
    );
  }
  return { csv: lines.join('\n'), lines };
}

for (const dialect of dialects) {
  describe(`the roll's own headings, and imports that keep every voter (${dialect})`, () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await buildTestApp(dialect, { LOG_LEVEL: process.env.DEBUG_LOG ?? 'silent' });
    });
    afterAll(() => t.close());

    const upload = async (
      owner: Account,
      csv: string,
      options: { mapping?: string; dryRun?: boolean } = {},
    ) => {
      const { payload, contentType } = multipartBody([
        ...(options.mapping !== undefined ? [{ name: 'mapping', value: options.mapping }] : []),
        { name: 'file', content: csv },
      ]);
      const res = await t.app.inject({
        method: 'POST',
        url: `/api/voters/import${options.dryRun ? '?dry_run=true' : ''}`,
        headers: { 'content-type': contentType, authorization: `Bearer ${owner.token}` },
        payload,
      });
      return { status: res.statusCode, body: res.json(), headers: res.headers, raw: res.body } as Answer;
    };

    it('a UP roll export with its own headings imports every voter, with the phone and the constituency', async () => {
      const owner = await register(t.app);
      const { csv } = roll(100, 381);
      const dry = await upload(owner, csv, { dryRun: true });
      expect(dry.status, dry.raw).toBe(200);
      expect(dry.body.data).toMatchObject({ imported: 100, failed: 0, errors: [], ignored_columns: [] });
      // The four 11-digit phones are left out of their rows, which are kept (warnings in the dry run too).
      expect(dry.body.data.warnings.map((w: { line: number; field: string }) => [w.line, w.field])).toEqual([
        [4, 'phone'],
        [29, 'phone'],
        [54, 'phone'],
        [79, 'phone'],
      ]);
      expect(dry.body.data.warnings[0].value).toBe('98381000003');
      const real = await upload(owner, csv);
      expect(real.body.data).toMatchObject({ imported: 100, failed: 0, ignored_columns: [] });
      const list = async (query: string) =>
        (await call(t.app, 'GET', `/api/voters?per_page=100&${query}`, { token: owner.token })).body.data;
      const all = await list('part_number=381');
      expect(all.total).toBe(100);
      const tenth = all.data.find((v: { name: string }) => v.name === 'Elector 381-10');
      expect(tenth).toMatchObject({
        epic_number: 'UP/74/381/354010',
        constituency: 'Varanasi Cantt.',
        ward: 'Ward 12',
        booth: 'Booth 381',
        serial_number: 10,
      });
      const eighth = all.data.find((v: { name: string }) => v.name === 'Elector 381-8');
      expect(eighth.phone).toBe('+919381000008');
      // 40 without a phone, and the four whose 11-digit phone was left out.
      expect(all.data.filter((v: { phone: string | null }) => v.phone === null)).toHaveLength(44);
      // An older EPIC form is found again by the EPIC filter, upper-cased.
      expect((await list('epic_number=up/74/381/354020')).data.map((v: { name: string }) => v.name)).toEqual([
        'Elector 381-20',
      ]);
      // The same roll again updates by EPIC number: nobody twice.
      const again = await upload(owner, csv);
      expect(again.body.data).toMatchObject({ imported: 0, updated: 100, failed: 0 });
    });

    it('the Hindi headings are read too', async () => {
      const owner = await register(t.app);
      const csv = [
        HINDI,
        '1,12,ABC1234567,7,राम लाल,पुरुष,44,9812345670,वार्ड 3',
        '2,12,ABC1234568,7,सीता देवी,महिला,40,,वार्ड 3',
      ].join('\n');
      const res = await upload(owner, csv);
      expect(res.status, res.raw).toBe(200);
      expect(res.body.data).toMatchObject({ imported: 2, failed: 0, warnings: [], ignored_columns: [] });
      const voters = (await call(t.app, 'GET', '/api/voters?part_number=12', { token: owner.token })).body
        .data.data;
      const ram = (await call(t.app, 'GET', `/api/voters/${voters[0].id}`, { token: owner.token })).body.data;
      expect(ram).toMatchObject({
        name: 'राम लाल',
        phone: '+919812345670',
        gender: 'male',
        age: 44,
        serial_number: 1,
        house_number: '7',
        ward: 'वार्ड 3',
      });
    });

    it("Hindi by default: the workspace's default_language, an import's language for its rows, and set in bulk edits", async () => {
      const owner = await register(t.app);
      const manager = await addMember(t.app, owner, 'manager');
      const ws = await call(t.app, 'PATCH', '/api/workspace', {
        token: owner.token,
        body: { default_language: 'hi' },
      });
      expect(ws.status, ws.raw).toBe(200);
      expect(ws.body.data.default_language).toBe('hi');
      expectError(
        await call(t.app, 'PATCH', '/api/workspace', {
          token: owner.token,
          body: { default_language: 'fr' },
        }),
        422,
        'validation_error',
      );
      // A roll without a language column: its voters have none, and a survey asks them in Hindi.
      const { csv } = roll(5, 12);
      expect((await upload(owner, csv)).body.data.imported).toBe(5);
      const survey = (
        await call(t.app, 'POST', '/api/surveys', {
          token: owner.token,
          body: {
            name: 'Drain',
            questions: [
              { key: 'ok', type: 'text', text: { en: 'Is the drain clear?', hi: 'क्या नाली साफ़ है?' } },
            ],
          },
        })
      ).body.data;
      const phone = '+919012000004'; // Elector 12-4: a voter of the roll, without a language
      const run = await call(t.app, 'POST', `/api/surveys/${survey.id}/runs`, {
        token: owner.token,
        body: { channel: 'sms', recipients: [phone] },
      });
      expect(run.status, run.raw).toBe(202);
      const runs = new SurveyRuns({ db: t.db.kysely, sessionHours: 24 });
      while (await runs.round()) {
        /* open the session */
      }
      const asked = (await call(t.app, 'GET', `/api/surveys/${survey.id}/responses`, { token: owner.token }))
        .body.data.data[0];
      expect(asked).toMatchObject({ address: phone, language: 'hi' });
      // An import may give its rows a language (a multipart field before the file).
      const { payload, contentType } = multipartBody([
        { name: 'language', value: 'en' },
        { name: 'file', content: roll(3, 13).csv },
      ]);
      const english = await t.app.inject({
        method: 'POST',
        url: '/api/voters/import',
        headers: { 'content-type': contentType, authorization: `Bearer ${owner.token}` },
        payload,
      });
      expect(english.statusCode, english.body).toBe(200);
      const part13 = (await call(t.app, 'GET', '/api/voters?part_number=13', { token: owner.token })).body
        .data.data;
      const one = (await call(t.app, 'GET', `/api/voters/${part13[0].id}`, { token: owner.token })).body.data;
      expect(one.language).toBe('en');
      // A bulk edit sets a language (and support levels) on a filter's voters, as a job; a manager may.
      const set = await call(t.app, 'POST', '/api/voters/tags', {
        token: manager.token,
        body: { filters: { part_number: 12 }, set: { language: 'hi', support_level: 2 } },
      });
      expect(set.status, set.raw).toBe(202);
      expect(set.body.data.set).toEqual({ language: 'hi', support_level: 2 });
      await new VoterTagging({ db: t.db.kysely }).runPending({ workspaceIds: [owner.user.workspace_id] });
      const job = await call(t.app, 'GET', `/api/voters/tags/jobs/${set.body.data.id}`, {
        token: owner.token,
      });
      expect(job.body.data).toMatchObject({ status: 'completed', changed: 5 });
      const part12 = (await call(t.app, 'GET', '/api/voters?part_number=12', { token: owner.token })).body
        .data.data;
      for (const v of part12) {
        const full = (await call(t.app, 'GET', `/api/voters/${v.id}`, { token: owner.token })).body.data;
        expect(full).toMatchObject({ language: 'hi', support_level: 2 });
      }
      // A sensitive field is a politician's to set in bulk.
      await call(t.app, 'POST', '/api/voter-fields', {
        token: owner.token,
        body: { key: 'caste', label: 'Caste', type: 'choice', choices: ['General', 'SC'], sensitive: true },
      });
      expectError(
        await call(t.app, 'POST', '/api/voters/tags', {
          token: manager.token,
          body: { voter_ids: [part12[0].id], set: { fields: { caste: 'SC' } } },
        }),
        403,
        'forbidden',
      );
      const byOwner = await call(t.app, 'POST', '/api/voters/tags', {
        token: owner.token,
        body: { voter_ids: [part12[0].id], set: { fields: { caste: 'SC' } } },
      });
      expect(byOwner.body.data).toEqual({ changed: 1 });
      const marked = (await call(t.app, 'GET', `/api/voters/${part12[0].id}`, { token: owner.token })).body
        .data;
      expect(marked.fields).toMatchObject({ caste: 'SC' });
      expectError(
        await call(t.app, 'POST', '/api/voters/tags', {
          token: owner.token,
          body: { voter_ids: [part12[0].id], set: { support_level: 9 } },
        }),
        422,
        'validation_error',
      );
    });

    it("an office's own headings are mapped (mapping, before the file), remembered, and a bad mapping says what to fix", async () => {
      const owner = await register(t.app);
      const csv = ['Voter Full Name,Cell,Notes,EPIC No', 'Asha Rao,9812300011,likes rallies,ABC7654321'].join(
        '\n',
      );
      // Without a mapping the file has no name column: 422 naming how to map it.
      const unmapped = await upload(owner, csv);
      expectError(unmapped, 422, 'validation_error');
      expect(unmapped.body.details.file[0]).toContain('mapping');
      const mapping = JSON.stringify({ 'Voter Full Name': 'name', cell: 'phone', Notes: 'ignore' });
      const mapped = await upload(owner, csv, { mapping });
      expect(mapped.status, mapped.raw).toBe(200);
      expect(mapped.body.data).toMatchObject({ imported: 1, ignored_columns: ['Notes'] });
      const voter = (await call(t.app, 'GET', '/api/voters?epic_number=ABC7654321', { token: owner.token }))
        .body.data.data[0];
      expect(voter).toMatchObject({ name: 'Asha Rao', phone: '+919812300011' });
      const columns = await call(t.app, 'GET', '/api/voters/import/columns', { token: owner.token });
      expect(columns.status).toBe(200);
      expect(columns.body.data.last_mapping).toEqual({
        'voter full name': 'name',
        cell: 'phone',
        notes: 'ignore',
      });
      expect(columns.body.data.headings['mobile no']).toBe('phone');
      expect(columns.body.data.headings['निर्वाचक का नाम']).toBe('name');
      expect(columns.body.data.fields).toEqual(
        expect.arrayContaining(['name', 'phone', 'epic_number', 'tags']),
      );
      for (const [bad, says] of [
        ['{not json', 'must be JSON'],
        ['["name"]', 'JSON object'],
        [JSON.stringify({ Cell: 'mobile' }), 'which is no field'],
      ] as const) {
        const res = await upload(owner, csv, { mapping: bad });
        expectError(res, 422, 'validation_error');
        expect(Object.keys(res.body.details)).toEqual(['mapping']);
        expect(res.body.details.mapping[0]).toContain(says);
      }
      // A volunteer cannot read what an import fills.
      expectError(await call(t.app, 'GET', '/api/voters/import/columns'), 401, 'unauthorized');
    });
  });
}
