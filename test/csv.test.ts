import { parse } from 'csv-parse/sync';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CsvError, CsvReader } from '../src/lib/csv.ts';

function read(chunks: string[], max?: number): Array<[string[], number]> {
  const records: Array<[string[], number]> = [];
  const reader = new CsvReader((fields, line) => records.push([fields, line]), max);
  for (const chunk of chunks) reader.push(chunk);
  reader.end();
  return records;
}

describe('CsvReader', () => {
  it('reads LF, CRLF and CR-only files alike, however the text is cut', () => {
    const expected = [
      [['name', 'phone'], 1],
      [['A', '1'], 2],
      [['B "b"', 'x\ny'], 3],
      [['C', '3'], 5],
    ];
    for (const eol of ['\n', '\r\n', '\r']) {
      const text = `name,phone${eol}A,1${eol}"B ""b""","x${eol === '\r' ? '\r' : '\n'}y"${eol}C,3${eol}`;
      for (let cut = 0; cut <= text.length; cut += 1) {
        expect(read([text.slice(0, cut), text.slice(cut)]), `${JSON.stringify(eol)} cut at ${cut}`).toEqual(
          expected,
        );
      }
    }
  });

  it('refuses a record over the limit the same way however the text arrives', () => {
    const unquoted = ['name,phone\nA,', 'x'.repeat(600), 'x'.repeat(600), '\nB,1\n'];
    const quoted = ['name,phone\n"A,', 'x'.repeat(600), 'x'.repeat(600), '",1\nB,1\n'];
    for (const [pieces, message] of [
      [unquoted, 'line 2 is longer than 1,000 characters: no record can be that long'],
      [quoted, 'the record starting on line 2 is longer than 1,000 characters: a quoted field is not closed'],
    ] as const) {
      // In pieces (the record is still open when it passes the limit), whole, and at the very end.
      for (const chunks of [pieces, [pieces.join('')], [pieces.join('').trimEnd()]]) {
        const attempt = () => read(chunks, 1000);
        expect(attempt).toThrow(CsvError);
        expect(attempt).toThrow(message);
      }
    }
    // A record of exactly the limit is read.
    expect(read([`name,phone\n${'y'.repeat(996)},1\n`], 1000)).toHaveLength(2);
    expect(read([`name,phone\n"${'y'.repeat(994)}",1\n`], 1000)).toHaveLength(2);
  });
});

/**
 * Property: on any file of quoted and unquoted fields (commas, quotes, line breaks, any Unicode inside), cut into
 * any pieces, the reader gives the records csv-parse gives for the whole text, an independent parser held to be
 * right (https://csv.js.org/parse/).
 */
describe('CsvReader against csv-parse', () => {
  const field = fc.oneof(
    fc.string({ maxLength: 12 }),
    fc.constantFrom('', ',', '"', '""', 'a,b', 'line\nbreak', 'cr\r\nlf', ' spaced ', 'हिंदी', '😀'),
  );
  // A record of one empty field is a blank line, which the reader skips; csv-parse is told to skip them too.
  const record = fc
    .array(field, { minLength: 1, maxLength: 6 })
    .filter((r) => !(r.length === 1 && r[0] === ''));
  const quote = (value: string) =>
    /[",\r\n]/.test(value) || value.trim() !== value ? `"${value.replace(/"/g, '""')}"` : value;

  it('reads what csv-parse reads, however the text is cut', () => {
    fc.assert(
      fc.property(
        fc.array(record, { minLength: 1, maxLength: 20 }),
        fc.constantFrom('\n', '\r\n'),
        fc.array(fc.nat(), { maxLength: 6 }),
        (records, eol, cuts) => {
          const text = records.map((r) => r.map(quote).join(',')).join(eol) + eol;
          const expected = parse(text, { relax_column_count: true, skip_empty_lines: true }) as string[][];
          const points = [...new Set(cuts.map((c) => c % (text.length + 1)))].sort((a, b) => a - b);
          const chunks: string[] = [];
          let at = 0;
          for (const point of points) {
            chunks.push(text.slice(at, point));
            at = point;
          }
          chunks.push(text.slice(at));
          expect(read(chunks).map(([fields]) => fields)).toEqual(expected);
        },
      ),
      { numRuns: 300 },
    );
  });
});
