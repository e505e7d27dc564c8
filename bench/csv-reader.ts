/**
 * npm run bench:csv-reader [-- --rows 1000000]
 *
 * Issue 13 asks for the CSV reader to come from a well-kept library unless a measurement shows that it costs
 * more than a tenth of the import. This reads bench:voters' generated file (made first if missing) in the
 * import's 64 KB pieces with the import's reader (src/lib/csv.ts) and with csv-parse set up to do the same job
 * (records with their starting line, blank lines skipped, ragged rows kept, a record-size limit), three times
 * each, alternating, and prints the medians. Compare them with the import's time in bench:voters' table.
 */
import { createReadStream, existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { parse } from 'csv-parse';
import { CsvReader } from '../src/lib/csv.ts';
import { generateVotersCsv } from './generate.ts';

const { values: args } = parseArgs({ options: { rows: { type: 'string', default: '1000000' } } });
const rows = Number(args.rows);
const csvPath = resolve(`bench/out/voters-${rows}.csv`);
if (!existsSync(csvPath)) await generateVotersCsv(csvPath, rows);

async function ours(): Promise<number> {
  let records = 0;
  const reader = new CsvReader(() => (records += 1));
  for await (const text of createReadStream(csvPath, { encoding: 'utf8', highWaterMark: 64 * 1024 })) {
    reader.push(text as string);
  }
  reader.end();
  return records;
}

async function csvParse(): Promise<number> {
  let records = 0;
  const parser = parse({
    info: true, // each record with its starting line, as the import's errors need
    skip_empty_lines: true,
    relax_column_count: true,
    max_record_size: 1 << 20,
    bom: true,
  });
  parser.on('data', () => (records += 1));
  const done = new Promise<void>((resolveDone, reject) => parser.on('end', resolveDone).on('error', reject));
  for await (const text of createReadStream(csvPath, { encoding: 'utf8', highWaterMark: 64 * 1024 })) {
    if (!parser.write(text as string)) await new Promise((r) => parser.once('drain', r));
  }
  parser.end();
  await done;
  return records;
}

const times: Record<string, number[]> = { ours: [], 'csv-parse': [] };
for (let round = 0; round < 3; round += 1) {
  for (const [name, run] of [
    ['ours', ours],
    ['csv-parse', csvParse],
  ] as const) {
    const started = performance.now();
    const count = await run();
    times[name]!.push(performance.now() - started);
    if (count !== rows + 1) throw new Error(`${name} read ${count} records, expected ${rows + 1}`);
  }
}
const median = (values: number[]) => [...values].sort((a, b) => a - b)[1]!;
console.log(
  `\n| reader, ${rows.toLocaleString('en')} rows (${csvPath}) | median of 3 | rows/s |\n|---|---|---|`,
);
for (const [name, values] of Object.entries(times)) {
  const ms = median(values);
  console.log(
    `| ${name} | ${(ms / 1000).toFixed(2)} s | ${Math.round(rows / (ms / 1000)).toLocaleString('en')} |`,
  );
}
