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

  it('tells a line too long to be a record from a quoted field that never closes', () => {
    const long = () => read(['name,phone\nA,', 'x'.repeat(600), 'x'.repeat(600), '\n'], 1000);
    expect(long).toThrow(CsvError);
    expect(long).toThrow('line 2 is longer than 1,000 characters: no record can be that long');
    const open = () => read(['name,phone\n"A,', 'x'.repeat(600), 'x'.repeat(600), '\n'], 1000);
    expect(open).toThrow('the record starting on line 2 never ends: a quoted field is not closed');
  });
});
