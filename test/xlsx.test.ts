/**
 * Property: whatever the cells (any Unicode, characters XML cannot carry, formula-like text, spaces at either
 * end, numbers, empty cells) and however the rows arrive (runs of XML deflated here, pieces deflated
 * elsewhere, empty runs), the workbook xlsxStream writes is a zip that an independent reader (fflate) opens and
 * whose sheet an independent XML parser (fast-xml-parser) reads back as the cells that went in. Neither is the
 * code the service uses, nor the test helpers' own zip reader.
 */
import { XMLParser } from 'fast-xml-parser';
import fc from 'fast-check';
import { strFromU8, unzipSync } from 'fflate';
import { crc32 } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { guardFormula } from '../src/lib/csv.ts';
import { type Cell, sheetPieceSync, xlsxRows, xlsxRun, xlsxStream } from '../src/lib/xlsx.ts';

async function workbook(
  columns: string[],
  batches: Array<{ rows: Cell[][]; elsewhere: boolean }>,
  maxRows?: number,
) {
  async function* pieces() {
    for (const { rows, elsewhere } of batches) {
      yield elsewhere ? sheetPieceSync(Buffer.from(xlsxRows(rows), 'utf8')) : xlsxRun(rows);
    }
  }
  const chunks: Buffer[] = [];
  for await (const chunk of xlsxStream(columns, pieces(), maxRows)) chunks.push(chunk);
  return Buffer.concat(chunks);
}

/** The CRC-32 the zip's central directory records for `name`. */
function recordedCrc(zip: Buffer, name: string): number | undefined {
  for (let p = zip.indexOf(Buffer.from([0x50, 0x4b, 0x01, 0x02])); p >= 0;) {
    const nameLength = zip.readUInt16LE(p + 28);
    if (zip.toString('utf8', p + 46, p + 46 + nameLength) === name) return zip.readUInt32LE(p + 16);
    p = zip.indexOf(Buffer.from([0x50, 0x4b, 0x01, 0x02]), p + 46);
  }
  return undefined;
}

const parser = new XMLParser({
  ignoreAttributes: false,
  parseTagValue: false,
  trimValues: false,
  // Character references (&#13;) are XML, not HTML, but this is the option that decodes them.
  htmlEntities: true,
  isArray: (name) => name === 'row' || name === 'c',
});

type XmlCell = { v?: string; is?: { t: string | { '#text'?: string } } } | '';

/** The sheet's rows as cells, read by the XML parser. */
function sheetCells(xml: string): Cell[][] {
  const sheet = parser.parse(xml) as { worksheet: { sheetData: { row?: Array<{ c?: XmlCell[] } | ''> } } };
  return (sheet.worksheet.sheetData.row ?? []).map((row) =>
    (row === '' ? [] : (row.c ?? [])).map((c): Cell => {
      if (c === '' || (c.v === undefined && c.is === undefined)) return null;
      if (c.v !== undefined) return Number(c.v);
      const t = c.is!.t;
      return typeof t === 'string' ? t : (t['#text'] ?? '');
    }),
  );
}

/** What a cell reads back as: text keeps what XML 1.0 can carry, formula-like text gets its apostrophe. */
function expected(cell: Cell): Cell {
  if (typeof cell !== 'string') return cell;
  // eslint-disable-next-line no-control-regex -- the characters XML 1.0 cannot carry are the point
  return guardFormula(cell).replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff]/g, '');
}

const text = fc.oneof(
  fc.string({ maxLength: 12, unit: 'grapheme' }),
  fc.string({ maxLength: 8, unit: 'binary' }),
  fc.constantFrom(
    '',
    ' lead',
    'trail ',
    '=SUM(A1)',
    '+91 98100',
    '-1',
    '@x',
    "'quoted",
    'a&b<c>',
    'हिंदी',
    '😀',
  ),
);
const cell: fc.Arbitrary<Cell> = fc.oneof(
  text,
  fc.integer({ min: -1_000_000, max: 1_000_000 }),
  fc.constant(null),
);
const batch = fc.record({
  rows: fc.array(fc.array(cell, { maxLength: 6 }), { maxLength: 6 }),
  elsewhere: fc.boolean(),
});

describe('xlsxStream against an independent unzip and XML parser', () => {
  it('writes a workbook that reads back as the cells that went in, however the rows arrive', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(text, { minLength: 1, maxLength: 5 }),
        fc.array(batch, { maxLength: 6 }),
        async (columns, batches) => {
          const zip = await workbook(columns, batches);
          const files = unzipSync(new Uint8Array(zip));
          expect(Object.keys(files).sort()).toEqual([
            '[Content_Types].xml',
            '_rels/.rels',
            'xl/_rels/workbook.xml.rels',
            'xl/styles.xml',
            'xl/workbook.xml',
            'xl/worksheets/sheet1.xml',
          ]);
          const sheet = files['xl/worksheets/sheet1.xml']!;
          expect(recordedCrc(zip, 'xl/worksheets/sheet1.xml')).toBe(crc32(sheet));
          for (const part of Object.values(files)) expect(() => parser.parse(strFromU8(part))).not.toThrow();
          const header = columns.map(expected);
          const rows = batches.flatMap((b) => b.rows).map((r) => r.map(expected));
          expect(sheetCells(strFromU8(sheet))).toEqual([header, ...rows]);
        },
      ),
      { numRuns: 150 },
    );
  });
});

describe('a workbook longer than a sheet', () => {
  it('goes on in further sheets, each with the header, none past the limit, every row once and in order', async () => {
    const sheetRows = new XMLParser({ ignoreAttributes: false, isArray: (name) => name === 'sheet' });
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.array(fc.array(cell, { maxLength: 3 }), { minLength: 1, maxLength: 4 }), {
          maxLength: 8,
        }),
        fc.integer({ min: 4, max: 7 }),
        async (batches, maxRows) => {
          const columns = ['id', 'name'];
          const zip = await workbook(
            columns,
            batches.map((rows) => ({ rows, elsewhere: false })),
            maxRows,
          );
          const files = unzipSync(new Uint8Array(zip));
          const book = sheetRows.parse(strFromU8(files['xl/workbook.xml']!)) as {
            workbook: { sheets: { sheet: Array<Record<string, string>> } };
          };
          const listed = book.workbook.sheets.sheet;
          const names = listed.map((sheet) => sheet['@_name']);
          expect(names).toEqual(listed.map((_, i) => (i === 0 ? 'Voters' : `Voters ${i + 1}`)));
          const rels = strFromU8(files['xl/_rels/workbook.xml.rels']!);
          const read: Cell[][] = [];
          listed.forEach((_, i) => {
            const path = `xl/worksheets/sheet${i + 1}.xml`;
            expect(rels).toContain(`Target="worksheets/sheet${i + 1}.xml"`);
            expect(recordedCrc(zip, path)).toBe(crc32(files[path]!));
            const [head, ...rows] = sheetCells(strFromU8(files[path]!));
            expect(head).toEqual(columns);
            expect(rows.length).toBeLessThanOrEqual(maxRows);
            // A run of rows is never split, and a sheet is full when the next run would not fit.
            if (i > 0) expect(rows.length).toBeGreaterThan(0);
            read.push(...rows);
          });
          expect(Object.keys(files).filter((f) => f.startsWith('xl/worksheets/'))).toHaveLength(
            listed.length,
          );
          expect(read).toEqual(batches.flat().map((r) => r.map(expected)));
        },
      ),
      { numRuns: 100 },
    );
  });

  it('is one sheet up to the limit, and the next row starts a second', async () => {
    const rows = (n: number) => [{ rows: Array.from({ length: n }, (_, i) => [i]), elsewhere: false }];
    const sheetsOf = async (n: number) =>
      Object.keys(unzipSync(new Uint8Array(await workbook(['n'], rows(n), 5)))).filter((f) =>
        f.startsWith('xl/worksheets/'),
      );
    expect(await sheetsOf(5)).toEqual(['xl/worksheets/sheet1.xml']);
    // One run of six rows cannot be split: it goes whole into the first sheet only when that sheet is empty.
    const two = [...rows(5), ...rows(1)];
    const zip = await workbook(['n'], two, 5);
    expect(Object.keys(unzipSync(new Uint8Array(zip))).filter((f) => f.startsWith('xl/worksheets/'))).toEqual(
      ['xl/worksheets/sheet1.xml', 'xl/worksheets/sheet2.xml'],
    );
  });
});
