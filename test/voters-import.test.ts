import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  addMember,
  buildTestApp,
  call,
  dialects,
  expectError,
  exportVoters,
  importCsv,
  multipartBody,
  register,
  type Account,
  type TestApp,
} from './helpers.ts';

async function allVoters(t: TestApp, owner: Account, query = '') {
  const res = await call(t.app, 'GET', `/api/voters?per_page=100${query}`, { token: owner.token });
  expect(res.status).toBe(200);
  return res.body.data as { data: { id: number; name: string; phone: string }[]; total: number };
}

async function voter(t: TestApp, owner: Account, id: number) {
  const res = await call(t.app, 'GET', `/api/voters/${id}`, { token: owner.token });
  expect(res.status).toBe(200);
  return res.body.data;
}

const HEADER = 'name,phone,email,constituency,booth,ward,address';

for (const dialect of dialects) {
  describe(`voters import (${dialect})`, () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await buildTestApp(dialect);
    });
    afterAll(() => t.close());

    it('maps the header in any order and case, ignores other columns, reads BOM, CRLF and quoted fields', async () => {
      const owner = await register(t.app);
      const csv =
        '\ufeff Ward ,EXTRA,Phone,NAME,Email,address,Booth,constituency\r\n' +
        '7,x,98123 45678,"Devi, Sunita",sunita@example.com,"12 ""Green"" Lane\r\nFlat 3",12,Varanasi\r\n' +
        '8,,+919812345679,Ramesh Kumar,,,,\r\n';
      const res = await importCsv(t.app, owner.token, csv);
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({
        success: true,
        data: { imported: 2, updated: 0, failed: 0, errors: [] },
      });
      expect(typeof res.body.message).toBe('string');
      const list = await allVoters(t, owner);
      expect(list.total).toBe(2);
      const sunita = await voter(t, owner, list.data[0]!.id);
      expect(sunita).toMatchObject({
        name: 'Devi, Sunita',
        phone: '+919812345678',
        email: 'sunita@example.com',
        constituency: 'Varanasi',
        booth: '12',
        ward: '7',
        address: '12 "Green" Lane\r\nFlat 3',
      });
      const ramesh = await voter(t, owner, list.data[1]!.id);
      expect(ramesh).toMatchObject({
        name: 'Ramesh Kumar',
        email: null,
        address: null,
        booth: null,
        ward: '8',
      });
    });

    it('checks every field as the API does and reports { row, field, message } by the line a record starts on', async () => {
      const owner = await register(t.app);
      const long = (n: number) => 'x'.repeat(n);
      const rows = [
        HEADER, // 1
        'Good One,9812300001,,,,,', // 2
        ',9812300002,,,,,', // 3 empty name
        `${long(201)},9812300003,,,,,`, // 4 name too long
        'Bad Phone,12,,,,,', // 5
        'No Phone,,,,,,', // 6
        'Bad Email,9812300006,not-an-email,,,,', // 7
        `Long Email,9812300007,${long(250)}@example.com,,,,`, // 8
        `Long Constituency,9812300008,,${long(121)},,,`, // 9
        `Long Booth,9812300009,,,${long(21)},,`, // 10
        `Long Ward,9812300010,,,,${long(21)},`, // 11
        `Long Address,9812300011,,,,,${long(501)}`, // 12
        '"Multi', // 13: a record over three lines
        'Line Name",9812300012,"a@b",,,,', // 14 (bad email, reported on line 13)
        'Short Row,9812300013', // 15: missing trailing cells are empty, and fine
        'Two Bad,abc,bad@,,,,', // 16: two problems, both reported
        `Max Name ${long(191)},9812300014,,${long(120)},${long(20)},${long(20)},${long(500)}`, // 17: at the limits
      ];
      const res = await importCsv(t.app, owner.token, rows.join('\n') + '\n');
      expect(res.status).toBe(200);
      const { data } = res.body;
      // Only a row without a name is refused (contract, fifth part): a bad optional cell is left out of its row
      // (a warning), and the row is kept.
      expect(data.imported).toBe(13);
      expect(data.updated).toBe(0);
      expect(data.failed).toBe(2);
      expect(data.errors.map((e: { row: number; field: string }) => [e.row, e.field])).toEqual([
        [3, 'name'],
        [4, 'name'],
      ]);
      expect(data.errors[0].message).toBe('must not be empty.');
      expect(data.errors[1].message).toBe('must be at most 200 characters.');
      expect(data.warnings.map((w: { line: number; field: string }) => [w.line, w.field])).toEqual([
        [5, 'phone'],
        [7, 'email'],
        [8, 'email'],
        [9, 'constituency'],
        [10, 'booth'],
        [11, 'ward'],
        [12, 'address'],
        [13, 'email'],
        [16, 'phone'],
        [16, 'email'],
      ]);
      expect(data.warnings[0]).toMatchObject({
        value: '12',
        reason: expect.stringMatching(/not a phone number the import can read/),
      });
      expect(data.warnings[1].reason).toBe('left out: it must be a valid email address.');
      expect(data.warnings[4].reason).toBe('left out: it must be at most 20 characters.');
      const list = await allVoters(t, owner);
      expect(list.data.map((v) => v.name).sort()).toEqual(
        [
          'Good One',
          'Bad Phone',
          'No Phone',
          'Bad Email',
          'Long Email',
          'Long Constituency',
          'Long Booth',
          'Long Ward',
          'Long Address',
          'Multi\nLine Name',
          'Short Row',
          'Two Bad',
          `Max Name ${long(191)}`,
        ].sort(),
      );
      const kept = list.data.find((v) => v.name === 'Bad Phone') as unknown as { phone: string | null };
      expect(kept.phone).toBeNull();
    });

    it('a missing name or phone column is 422 naming the file', async () => {
      const owner = await register(t.app);
      for (const header of ['phone,email', 'name,email', 'fullname,mobile']) {
        const res = await importCsv(t.app, owner.token, `${header}\nA,B\n`);
        expectError(res, 422, 'validation_error');
        expect(Object.keys(res.body.details)).toEqual(['file']);
        expect(res.body.details.file[0]).toMatch(/header row/);
      }
      expect((await allVoters(t, owner)).total).toBe(0);
    });

    it('reads lines that end in CR alone (classic Mac OS), counting lines as the file does', async () => {
      const owner = await register(t.app);
      const res = await importCsv(
        t.app,
        owner.token,
        'name,phone,address\rMac One,9812300401,"12 Ring Rd\rBlock B"\rMac Two,not a phone,\rMac Three,9812300403,\r',
      );
      expect(res.status).toBe(200);
      expect(res.body.data).toMatchObject({ imported: 3, failed: 0, errors: [] });
      expect(res.body.data.warnings).toEqual([expect.objectContaining({ line: 4, field: 'phone' })]);
      const list = await call(t.app, 'GET', '/api/voters?search=mac', { token: owner.token });
      expect(list.body.data.data.map((v: { name: string }) => v.name)).toEqual([
        'Mac One',
        'Mac Two',
        'Mac Three',
      ]);
    });

    it('names a voter column named twice, and writes nothing', async () => {
      const owner = await register(t.app);
      const twice = await importCsv(t.app, owner.token, 'Name,phone,NAME\nA,9812300501,B\n');
      expectError(twice, 422, 'validation_error');
      expect(twice.body.details.file[0]).toBe(
        'the header row (line 1) names the "name" column 2 times (columns 1, 3); keep one, or map the others to "ignore" (mapping).',
      );
      expect((await allVoters(t, owner)).total).toBe(0);
    });

    it('refuses empty files, header-only files, binary junk and unclosed quotes with a 4xx, writing nothing', async () => {
      const owner = await register(t.app);
      const junk = Buffer.concat([Buffer.from('name,phone\n'), randomBytes(4096)]);
      const cases: [string, string | Buffer][] = [
        ['empty', ''],
        ['only a BOM and blank lines', '\ufeff\r\n\r\n'],
        ['header only', `${HEADER}\r\n`],
        ['binary junk', randomBytes(8192)],
        ['junk after a header', junk],
        ['a NUL byte', `${HEADER}\nA\u0000B,9812300001,,,,,\n`],
        ['latin-1, not UTF-8', Buffer.from(`${HEADER}\nJos\xe9,9812300001,,,,,\n`, 'latin1')],
        ['an unclosed quote', `${HEADER}\n"Open,9812300001,,,,,\nNext,9812300002,,,,,\n`],
      ];
      for (const [what, content] of cases) {
        const res = await importCsv(t.app, owner.token, content);
        expect(res.status, what).toBeGreaterThanOrEqual(400);
        expect(res.status, what).toBeLessThan(500);
        expect(res.body?.success, what).toBe(false);
        expect(typeof res.body.message, what).toBe('string');
      }
      expect((await allVoters(t, owner)).total).toBe(0);
    });

    it('needs a multipart body with a part named file', async () => {
      const owner = await register(t.app);
      const auth = { authorization: `Bearer ${owner.token}` };
      const fieldOnly = multipartBody([{ name: 'note', value: 'hello' }]);
      let res = await t.app.inject({
        method: 'POST',
        url: '/api/voters/import',
        headers: { ...auth, 'content-type': fieldOnly.contentType },
        payload: fieldOnly.payload,
      });
      expect(res.statusCode).toBe(422);
      expect(res.json().details.file).toBeDefined();

      const otherName = multipartBody([{ name: 'upload', content: `${HEADER}\nA,9812300001,,,,,\n` }]);
      res = await t.app.inject({
        method: 'POST',
        url: '/api/voters/import',
        headers: { ...auth, 'content-type': otherName.contentType },
        payload: otherName.payload,
      });
      expect(res.statusCode).toBe(422);

      const json = await call(t.app, 'POST', '/api/voters/import', {
        token: owner.token,
        body: { file: 'x' },
      });
      expectError(json, 400, 'bad_request');
      const text = await call(t.app, 'POST', '/api/voters/import', {
        token: owner.token,
        body: `${HEADER}\n`,
        headers: { 'content-type': 'text/csv' },
      });
      expectError(text, 400, 'bad_request');
      expect(text.body.message).toMatch(/multipart\/form-data/);
      const none = await call(t.app, 'POST', '/api/voters/import', { token: owner.token });
      expectError(none, 400, 'bad_request');
      const broken = await t.app.inject({
        method: 'POST',
        url: '/api/voters/import',
        headers: { ...auth, 'content-type': 'multipart/form-data; boundary=xyz' },
        payload: 'not multipart at all',
      });
      expect(broken.statusCode).toBeGreaterThanOrEqual(400);
      expect(broken.statusCode).toBeLessThan(500);
      expect((await allVoters(t, owner)).total).toBe(0);
    });

    it('imports a 10,000-row file with scattered bad rows: exact counts and error rows', async () => {
      const owner = await register(t.app);
      const lines = [HEADER];
      const badRows: number[] = [];
      for (let i = 0; i < 10_000; i += 1) {
        const line = i + 2;
        if (i % 397 === 13) {
          badRows.push(line);
          lines.push(`Bad Voter ${i},12345,,,,,`);
        } else {
          lines.push(
            `Voter ${i},+9198${String(i).padStart(8, '0')},v${i}@example.com,Ward Town,${i % 50},${i % 9},`,
          );
        }
      }
      const res = await importCsv(t.app, owner.token, lines.join('\r\n'));
      expect(res.status).toBe(200);
      // Every row is kept; the bad phones are left out (warnings), and nothing is refused.
      expect(res.body.data.failed).toBe(0);
      expect(res.body.data.imported).toBe(10_000);
      expect(res.body.data.updated).toBe(0);
      expect(res.body.data.warnings.map((e: { line: number }) => e.line)).toEqual(badRows);
      expect(res.body.data.warnings.every((e: { field: string }) => e.field === 'phone')).toBe(true);
      expect(res.body.data.warnings[0].reason).toMatch(/no EPIC number either/);
      expect((await allVoters(t, owner)).total).toBe(10_000);
      const search = await allVoters(t, owner, '&search=Voter%209999');
      expect(search.data.map((v) => v.name)).toEqual(['Voter 9999']);

      // The same file again updates every row with a phone and duplicates none of them; a row with neither a phone
      // nor an EPIC number has nothing to be known by, and is added again (its warning says so).
      const again = await importCsv(t.app, owner.token, lines.join('\r\n'));
      expect(again.body.data).toMatchObject({
        imported: badRows.length,
        updated: 10_000 - badRows.length,
        failed: 0,
      });
      expect((await allVoters(t, owner)).total).toBe(10_000 + badRows.length);
    });

    it('keeps at most IMPORT_MAX_ERRORS error and warning entries but counts every failed row', async () => {
      const small = await buildTestApp(dialect, { IMPORT_MAX_ERRORS: '3' });
      try {
        const owner = await register(small.app);
        const rows = [
          HEADER,
          ...Array.from({ length: 10 }, (_, i) => `,981230${String(i).padStart(4, '0')},,,,,`),
          ...Array.from({ length: 10 }, (_, i) => `Bad ${i},1,,,,,`),
          'Good,9812300001,,,,,',
        ];
        const res = await importCsv(small.app, owner.token, rows.join('\n'));
        expect(res.status).toBe(200);
        // Ten rows without a name refused, ten kept without their bad phone: three entries of each kept.
        expect(res.body.data).toMatchObject({ imported: 11, failed: 10 });
        expect(res.body.data.errors.map((e: { row: number }) => e.row)).toEqual([2, 3, 4]);
        expect(res.body.data.warnings.map((e: { line: number }) => e.line)).toEqual([12, 13, 14]);
      } finally {
        await small.close();
      }
    });

    it('updates instead of duplicating: same name (any case, spacing) and phone; within a file the later row wins', async () => {
      const owner = await register(t.app);
      const created = await call(t.app, 'POST', '/api/voters', {
        token: owner.token,
        body: { name: 'Asha Rao', phone: '+919812300100', ward: '1' },
      });
      expect(created.status).toBe(201);
      const csv = [
        HEADER,
        'ASHA   rao,9812300100,asha@example.com,,,2,',
        'New Person,9812300101,,,,3,',
        'new person,+91 98123 00101,,,,4,',
        'Asha Rao,9812300199,,,,5,', // same name, another phone: another voter
      ].join('\n');
      const res = await importCsv(t.app, owner.token, csv);
      expect(res.body.data).toMatchObject({ imported: 2, updated: 2, failed: 0 });
      const list = await allVoters(t, owner);
      expect(list.total).toBe(3);
      const asha = await voter(t, owner, created.body.data.id);
      expect(asha).toMatchObject({ name: 'ASHA   rao', email: 'asha@example.com', ward: '2' });
      const newPerson = list.data.find((v) => v.phone === '+919812300101')!;
      expect(await voter(t, owner, newPerson.id)).toMatchObject({ name: 'new person', ward: '4' });
    });

    it('answers 413 over IMPORT_MAX_BYTES and leaves the voters unchanged', async () => {
      const small = await buildTestApp(dialect, { IMPORT_MAX_BYTES: '4096' });
      try {
        const owner = await register(small.app);
        const first = await importCsv(small.app, owner.token, `${HEADER}\nKeep Me,9812300200,,,,1,\n`);
        expect(first.body.data.imported).toBe(1);
        const rows = [HEADER, 'Keep Me,9812300200,,,,CHANGED,'];
        for (let i = 0; rows.join('\n').length < 20_000; i += 1)
          rows.push(`Extra ${i},+9197${String(i).padStart(8, '0')},,,,,`);
        const res = await importCsv(small.app, owner.token, rows.join('\n'));
        expectError(res, 413, 'payload_too_large');
        const list = await allVoters(small as TestApp, owner);
        expect(list.total).toBe(1);
        expect(await voter(small, owner, list.data[0]!.id)).toMatchObject({ ward: '1' });
        // Exactly at the limit is fine.
        const exact = `${HEADER}\nAt Limit,9812300201,,,,,`;
        const padded = exact + '\n'.repeat(4096 - Buffer.byteLength(exact));
        expect((await importCsv(small.app, owner.token, padded)).status).toBe(200);
      } finally {
        await small.close();
      }
    });

    it('keeps Devanagari byte for byte through import, list, search and export', async () => {
      const owner = await register(t.app);
      const name = 'सुनीता देवी';
      const address = 'मकान १२, वार्ड ७, वाराणसी';
      const res = await importCsv(
        t.app,
        owner.token,
        `\ufeff${HEADER}\n${name},9812300300,,वाराणसी,१२,७,"${address}"\n`,
      );
      expect(res.body.data.imported).toBe(1);
      const list = await allVoters(t, owner);
      expect(list.data[0]!.name).toBe(name);
      const found = await allVoters(t, owner, `&search=${encodeURIComponent('नीता')}`);
      expect(found.data.map((v) => v.name)).toEqual([name]);
      const byConstituency = await allVoters(t, owner, `&constituency=${encodeURIComponent('वाराणसी')}`);
      expect(byConstituency.total).toBe(1);
      expect(await voter(t, owner, list.data[0]!.id)).toMatchObject({ address, booth: '१२', ward: '७' });
      const csv = await exportVoters(t.app, owner.token);
      expect(
        csv.bytes.includes(Buffer.from(`${name},+919812300300,,वाराणसी,१२,७,"${address}"`, 'utf8')),
      ).toBe(true);
    });

    it('is for politicians and managers: volunteers get 403, no token 401', async () => {
      const owner = await register(t.app);
      const manager = await addMember(t.app, owner, 'manager');
      const volunteer = await addMember(t.app, owner, 'volunteer');
      const csv = `${HEADER}\nBy Manager,9812300400,,,,,\n`;
      expectError(await importCsv(t.app, volunteer.token, csv), 403, 'forbidden');
      expectError(await importCsv(t.app, undefined, csv), 401, 'unauthorized');
      expect((await importCsv(t.app, manager.token, csv)).body.data.imported).toBe(1);
      // The voters land in the caller's workspace only.
      const other = await register(t.app);
      expect((await allVoters(t, other)).total).toBe(0);
      expect((await allVoters(t, owner)).total).toBe(1);
    });
  });
}

describe('voters import keeps the SQLite planner statistics true', () => {
  it('the first import into a new database leaves statistics that count its voters (not an empty table)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ces-import-stats-'));
    const t = await buildTestApp('sqlite', { DATABASE_URL: `sqlite:${join(dir, 'ces.db')}` });
    try {
      const raw = t.db.raw;
      if (raw.dialect !== 'sqlite') throw new Error('sqlite only');
      const owner = await register(t.app);
      const lines = [HEADER];
      for (let i = 0; i < 3000; i += 1)
        lines.push(`Stat Voter ${i},+9195${String(i).padStart(8, '0')},,Varanasi,1,2,`);
      const res = await importCsv(t.app, owner.token, lines.join('\n'));
      expect(res.status).toBe(200);
      const stats = raw.sqlite
        // A partial index (voters_email_idx: emails only) counts only its own rows.
        .prepare(
          "SELECT stat FROM sqlite_stat1 WHERE tbl = 'voters' AND idx IS NOT NULL AND idx NOT IN (SELECT name FROM pragma_index_list('voters') WHERE partial = 1)",
        )
        .pluck()
        .all() as string[];
      expect(stats.length).toBeGreaterThan(0);
      for (const stat of stats) expect(Number(stat.split(' ')[0])).toBeGreaterThanOrEqual(3000);
      // The import's own settings (a larger page cache, fewer search-index merges) end with it, and a search
      // finds the imported voters.
      expect(raw.sqlite.pragma('cache_size', { simple: true })).toBe(-32768);
      const automerge = raw.sqlite
        .prepare("SELECT v FROM voters_fts_config WHERE k = 'automerge'")
        .pluck()
        .get();
      expect(automerge).toBe(4);
      const found = await allVoters(t, owner, '&search=Stat%20Voter%202999');
      expect(found.data.map((v) => v.name)).toEqual(['Stat Voter 2999']);
    } finally {
      await t.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
