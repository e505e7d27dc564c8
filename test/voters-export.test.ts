import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { xlsxRows } from '../src/lib/xlsx.ts';
import { exportVoters as exportVotersFile } from '../src/modules/voter-exports/voter-exports.ts';
import { type ExportRow, exportShape } from '../src/modules/voter-exports/voter-exports.repository.ts';
import {
  addMember,
  buildTestApp,
  call,
  dialects,
  expectError,
  exportVoters,
  importCsv,
  parseCsv,
  register,
  unzip,
  type Account,
  type TestApp,
} from './helpers.ts';

const HEADER = 'name,phone,email,constituency,booth,ward,address';
const EXPORT_HEADER =
  'id,name,phone,email,constituency,booth,ward,address,created_at,updated_at,' +
  'epic_number,part_number,serial_number,page_number,house_number,relation_name,relation_type,gender,name_local,language,birth_date,age,tags';

/** Drops id, created_at and updated_at from an export's rows. */
function withoutIds(rows: string[][]): string[][] {
  return rows.slice(1).map((r) => r.slice(1, 8));
}

const hasLibreOffice = spawnSync('libreoffice', ['--version'], { stdio: 'ignore' }).status === 0;

for (const dialect of dialects) {
  describe(`voters export (${dialect})`, () => {
    let t: TestApp;
    let owner: Account;
    const hostile = [
      HEADER,
      '"=HYPERLINK(""http://evil.example"",""x"")",9812300501,,Varanasi,1,1,',
      '+cmd plus,9812300502,,Varanasi,1,2,"-2+3"',
      '@SUM(A1),9812300503,,Lucknow,2,1,=1+1',
      "'=already quoted,9812300504,,Lucknow,2,2,-5",
      '"Comma, Quote "" and\nnewline",9812300505,q@example.com,varanasi,3,3,+44',
      'सुनीता देवी,9812300506,,वाराणसी,१२,७,मकान १२',
    ].join('\n');

    beforeAll(async () => {
      t = await buildTestApp(dialect);
      owner = await register(t.app);
      const res = await importCsv(t.app, owner.token, hostile);
      if (res.status !== 200 || res.body.data.imported !== 6) throw new Error(`seed: ${res.raw}`);
      // Stored with its apostrophe (through the API): the export must keep it apart from its own guard.
      const literal = await call(t.app, 'POST', '/api/voters', {
        token: owner.token,
        body: { name: "'=literal apostrophe", phone: '9812300507', constituency: 'Kanpur' },
      });
      if (literal.status !== 201) throw new Error(`seed: ${literal.raw}`);
    });
    afterAll(() => t.close());

    it('CSV: headers, file name, the columns in id order', async () => {
      const res = await exportVoters(t.app, owner.token);
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toBe('text/csv; charset=utf-8');
      expect(res.headers['content-disposition']).toMatch(
        /^attachment; filename="voters-\d{4}-\d\d-\d\d\.csv"$/,
      );
      const rows = parseCsv(res.raw);
      expect(rows[0]!.join(',')).toBe(EXPORT_HEADER);
      expect(rows).toHaveLength(8);
      const ids = rows.slice(1).map((r) => Number(r[0]));
      expect(ids).toEqual([...ids].sort((a, b) => a - b));
      const list = await call(t.app, 'GET', '/api/voters/' + ids[4], { token: owner.token });
      const v = list.body.data;
      expect(rows[5]).toEqual([
        String(v.id),
        v.name,
        v.phone,
        v.email,
        v.constituency,
        v.booth,
        v.ward,
        "'+44".slice(1), // +44 is a plain number: not guarded
        v.created_at,
        v.updated_at,
        ...Array<string>(13).fill(''),
      ]);
      expect(v.name).toBe('Comma, Quote " and\nnewline');
      expect(rows[5]![8]).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
    });

    it('neutralises formula-like cells with a leading apostrophe, but not plain numbers', async () => {
      const rows = parseCsv((await exportVoters(t.app, owner.token)).raw).slice(1);
      expect(rows.map((r) => r[1])).toEqual([
        `'=HYPERLINK("http://evil.example","x")`,
        "'+cmd plus",
        "'@SUM(A1)",
        "'=already quoted", // the file's own leading ' was read as an export's guard
        'Comma, Quote " and\nnewline',
        'सुनीता देवी',
        "''=literal apostrophe",
      ]);
      expect(rows.map((r) => r[7])).toEqual(['', "'-2+3", "'=1+1", '-5', '+44', 'मकान १२', '']);
      expect(rows.every((r) => /^\+91\d{10}$/.test(r[2]!))).toBe(true);
      // Stored values are as imported: the guard exists only in the file.
      const list = await call(t.app, 'GET', '/api/voters?search=HYPERLINK', { token: owner.token });
      expect(list.body.data.data[0].name).toBe('=HYPERLINK("http://evil.example","x")');
    });

    it('an exported CSV imports back unchanged: into a fresh workspace, and as updates into the same one', async () => {
      const first = await exportVoters(t.app, owner.token);
      const fresh = await register(t.app);
      const imported = await importCsv(t.app, fresh.token, first.bytes);
      expect(imported.body.data).toMatchObject({ imported: 7, updated: 0, failed: 0 });
      const second = await exportVoters(t.app, fresh.token);
      expect(withoutIds(parseCsv(second.raw))).toEqual(withoutIds(parseCsv(first.raw)));

      const again = await importCsv(t.app, owner.token, first.bytes);
      expect(again.body.data).toMatchObject({ imported: 0, updated: 7, failed: 0 });
      const literal = await call(t.app, 'GET', '/api/voters?search=literal', { token: fresh.token });
      expect(literal.body.data.data[0].name).toBe("'=literal apostrophe");
      const third = await exportVoters(t.app, owner.token);
      expect(third.raw).toBe(first.raw); // nothing changed, so not even updated_at moved
    });

    it('filters like the list; bad filters are 422 naming filters', async () => {
      const names = async (filters: unknown) =>
        parseCsv((await exportVoters(t.app, owner.token, { filters })).raw)
          .slice(1)
          .map((r) => r[1]);
      expect(await names({ constituency: 'VARANASI' })).toHaveLength(3);
      expect(await names({ constituency: 'Lucknow', booth: '2', ward: '2' })).toEqual(["'=already quoted"]);
      expect(await names({ search: 'sum(' })).toEqual(["'@SUM(A1)"]);
      expect(await names({ search: '98123 00506' })).toEqual(['सुनीता देवी']);
      expect(await names({})).toHaveLength(7);
      expect(await names({ ward: 'none' })).toEqual([]);

      for (const filters of ['{not json', '[1]', '"x"', '{"name":"x"}', '{"ward":5}']) {
        const res = await exportVoters(t.app, owner.token, { filters });
        expectError(res, 422, 'validation_error');
        expect(Object.keys(res.body.details).every((k) => k.startsWith('filters'))).toBe(true);
      }
      expectError(await exportVoters(t.app, owner.token, { format: 'pdf' }), 422, 'validation_error');
    });

    it('filter values with quotes, backslashes and LIKE wildcards match literally (never as SQL)', async () => {
      const office = await register(t.app);
      const tricky = "O'Brien \\ 100%_x";
      const made = await call(t.app, 'POST', '/api/voters', {
        token: office.token,
        body: { name: tricky, phone: '9812300508', constituency: "St John's \\ Ward" },
      });
      expect(made.status).toBe(201);
      await call(t.app, 'POST', '/api/voters', {
        token: office.token,
        body: { name: 'O Brien 1000 x', phone: '9812300509' },
      });
      const names = async (filters: unknown) =>
        parseCsv((await exportVoters(t.app, office.token, { filters })).raw)
          .slice(1)
          .map((r) => r[1]);
      expect(await names({ search: "O'Brien \\ 100%_" })).toEqual([tricky]);
      expect(await names({ search: '100%' })).toEqual([tricky]);
      expect(await names({ constituency: "st john's \\ ward" })).toEqual([tricky]);
      expect(await names({ search: "x' OR '1'='1" })).toEqual([]);
      expect(await names({ search: "'); DROP TABLE voters; --" })).toEqual([]);
      expect(await names({})).toHaveLength(2);
    });

    it.runIf(dialect === 'postgres')(
      'a download stopped part-way ends the COPY and frees its connection',
      async () => {
        const office = await register(t.app);
        const lines = [HEADER];
        for (let i = 0; i < 20_000; i += 1)
          lines.push(`Copy Voter ${i},+9197${String(i).padStart(8, '0')},,,,,`);
        expect((await importCsv(t.app, office.token, lines.join('\n'))).body.data.imported).toBe(20_000);
        const file = exportVotersFile(
          t.db,
          office.user.workspace_id,
          {},
          await exportShape(t.db.kysely, office.user.workspace_id, false),
          'csv',
        );
        const first = await file.body.next();
        expect(first.done).toBe(false);
        await file.body.return(undefined);
        const copies = async () => {
          const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_stat_activity
            WHERE query LIKE 'COPY (SELECT%' AND state <> 'idle'`.execute(t.db.kysely);
          return rows[0]!.n;
        };
        for (let i = 0; i < 50 && (await copies()) > 0; i += 1) await new Promise((r) => setTimeout(r, 20));
        expect(await copies()).toBe(0);
        // The pool still answers (the broken connection was dropped, not handed out again).
        expect((await exportVoters(t.app, office.token)).status).toBe(200);
      },
    );

    it("never contains another workspace's voters", async () => {
      const other = await register(t.app);
      await importCsv(t.app, other.token, `${HEADER}\nOther Office Voter,9812300599,,Varanasi,1,1,\n`);
      for (const format of ['csv', 'excel']) {
        for (const filters of [{}, { search: 'Other Office' }, { constituency: 'Varanasi' }]) {
          const res = await exportVoters(t.app, owner.token, { format, filters });
          const text =
            format === 'csv' ? res.raw : unzip(res.bytes).get('xl/worksheets/sheet1.xml')!.toString();
          expect(text).not.toContain('Other Office Voter');
        }
      }
      const theirs = parseCsv((await exportVoters(t.app, other.token)).raw);
      expect(theirs.slice(1).map((r) => r[1])).toEqual(['Other Office Voter']);
    });

    it('is for politicians and managers: volunteers get 403', async () => {
      const manager = await addMember(t.app, owner, 'manager');
      const volunteer = await addMember(t.app, owner, 'volunteer');
      expectError(await exportVoters(t.app, volunteer.token), 403, 'forbidden');
      expectError(await exportVoters(t.app, volunteer.token, { format: 'excel' }), 403, 'forbidden');
      const res = await exportVoters(t.app, manager.token);
      expect(res.status).toBe(200);
      expect(parseCsv(res.raw)).toHaveLength(8);
      expectError(await call(t.app, 'GET', '/api/voters/export'), 401, 'unauthorized');
    });

    it('Excel: a valid .xlsx zip with the workbook parts and inline strings', async () => {
      const res = await exportVoters(t.app, owner.token, { format: 'excel' });
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toBe(
        'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
      );
      expect(res.headers['content-disposition']).toMatch(
        /^attachment; filename="voters-\d{4}-\d\d-\d\d\.xlsx"$/,
      );
      const parts = unzip(res.bytes);
      expect([...parts.keys()].sort()).toEqual([
        '[Content_Types].xml',
        '_rels/.rels',
        'xl/_rels/workbook.xml.rels',
        'xl/styles.xml',
        'xl/workbook.xml',
        'xl/worksheets/sheet1.xml',
      ]);
      const sheet = parts.get('xl/worksheets/sheet1.xml')!.toString('utf8');
      expect(sheet).not.toContain('sharedStrings');
      expect(sheet.match(/<row>/g)).toHaveLength(8);
      expect(sheet).toContain('<c t="inlineStr"><is><t>id</t></is></c>');
      expect(sheet).toContain('<t>\'=HYPERLINK("http://evil.example","x")</t>');
      expect(sheet).toContain('<t>सुनीता देवी</t>');
      expect(sheet).toContain('<t>Comma, Quote " and\nnewline</t>');
      expect(sheet).toContain('<t>+919812300501</t>');
    });

    it.runIf(hasLibreOffice)(
      'Excel: LibreOffice opens the workbook and reads the same rows',
      async () => {
        const res = await exportVoters(t.app, owner.token, { format: 'excel' });
        const dir = mkdtempSync(join(tmpdir(), 'ces-xlsx-'));
        try {
          writeFileSync(join(dir, 'voters.xlsx'), res.bytes);
          execFileSync(
            'libreoffice',
            [
              `-env:UserInstallation=file://${dir}/profile`,
              '--headless',
              '--convert-to',
              'csv:Text - txt - csv (StarCalc):44,34,76',
              '--outdir',
              dir,
              join(dir, 'voters.xlsx'),
            ],
            { stdio: 'ignore', timeout: 60_000 },
          );
          const rows = parseCsv(readFileSync(join(dir, 'voters.csv'), 'utf8'));
          const csv = parseCsv((await exportVoters(t.app, owner.token)).raw);
          expect(rows[0]!.join(',')).toBe(EXPORT_HEADER);
          expect(rows.slice(1).map((r) => r.slice(1, 8))).toEqual(csv.slice(1).map((r) => r.slice(1, 8)));
        } finally {
          rmSync(dir, { recursive: true, force: true });
        }
      },
      90_000,
    );

    it('Excel: the sheet holds exactly the rows the database has, tabs, backslashes, line ends and NULLs included', async () => {
      const tricky = await register(t.app);
      const bodies = [
        { name: 'Tab\there', phone: '9812300601', address: 'back\\slash \\N \\t' },
        { name: '\\N', phone: '9812300602', email: 'n@example.com', ward: 'cr\rand\r\nlf' },
        { name: 'Form\ffeed\vvertical\bbell', phone: '9812300603', booth: ' spaced ' },
        { name: 'Plain', phone: '9812300604', constituency: 'Varanasi' },
      ];
      for (const body of bodies) {
        const res = await call(t.app, 'POST', '/api/voters', { token: tricky.token, body });
        if (res.status !== 201) throw new Error(`seed: ${res.raw}`);
      }
      const sheet = unzip((await exportVoters(t.app, tricky.token, { format: 'excel' })).bytes)
        .get('xl/worksheets/sheet1.xml')!
        .toString('utf8');
      // The rows as a plain query reads them, formatted by the same function.
      const iso = (value: unknown) => (value instanceof Date ? value.toISOString() : String(value));
      const rows: ExportRow[] = (
        await t.db.kysely
          .selectFrom('voters')
          .selectAll()
          .where('workspace_id', '=', tricky.user.workspace_id)
          .orderBy('id')
          .execute()
      ).map((v) => [
        Number(v.id),
        v.name,
        v.phone,
        v.email,
        v.constituency,
        v.booth,
        v.ward,
        v.address,
        iso(v.created_at),
        iso(v.updated_at),
        // the voter record's columns (none given here): epic_number ... age, tags
        ...Array<null>(13).fill(null),
      ]);
      expect(rows).toHaveLength(bodies.length);
      expect(rows[0]![1]).toBe('Tab\there');
      expect(sheet).toContain(`</row>${xlsxRows(rows)}</sheetData>`);
    });

    it('streams large exports in batches: every row once, in id order', async () => {
      const big = await register(t.app);
      const lines = [HEADER];
      for (let i = 0; i < 12_345; i += 1)
        lines.push(`Batch Voter ${i},+9196${String(i).padStart(8, '0')},,,,,`);
      expect((await importCsv(t.app, big.token, lines.join('\n'))).body.data.imported).toBe(12_345);
      const rows = parseCsv((await exportVoters(t.app, big.token)).raw).slice(1);
      expect(rows).toHaveLength(12_345);
      expect(rows.map((r) => r[1])).toEqual(lines.slice(1).map((l) => l.split(',')[0]));
      const sheet = unzip((await exportVoters(t.app, big.token, { format: 'excel' })).bytes)
        .get('xl/worksheets/sheet1.xml')!
        .toString('utf8');
      expect(sheet.match(/<row>/g)).toHaveLength(12_346);
    });
  });
}
