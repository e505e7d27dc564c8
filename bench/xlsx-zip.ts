/**
 * npm run bench:xlsx-zip [-- --rows 1000000]   (after: npm install --prefix /tmp/zipbench yazl fflate)
 *
 * Issue 13 keeps the hand-written zip of src/lib/xlsx.ts only where a measurement shows it is needed. This
 * makes the same sheet (voter-like rows, the export's XML from xlsxRows, in the export's batches) into an
 * .xlsx three ways, each in its own child process so that peak memory is its own, and reports time, peak RSS
 * and size:
 *   - ours: xlsxStream (pieces deflated by libuv's thread pool one ahead of the formatting);
 *   - yazl: the sheet as a read stream, deflated by yazl through zlib's streaming deflate;
 *   - fflate: its streaming Zip with ZipDeflate (deflate in JavaScript).
 * The libraries are not dependencies: they are loaded from ZIP_LIBS (default /tmp/zipbench/node_modules).
 */
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { Readable } from 'node:stream';
import { parseArgs } from 'node:util';
import { type Cell, xlsxRows, xlsxRun, xlsxStream } from '../src/lib/xlsx.ts';
import { exportColumns as columns } from '../src/modules/voter-exports/voter-exports.repository.ts';

const { values: args } = parseArgs({
  options: { rows: { type: 'string', default: '1000000' }, only: { type: 'string' } },
});
const rows = Number(args.rows);
const BATCH = 2000;
const libs = createRequire(`${process.env.ZIP_LIBS ?? '/tmp/zipbench/node_modules'}/`);

function* batchRows(): Generator<Cell[][]> {
  for (let start = 1; start <= rows; start += BATCH) {
    const batch: Cell[][] = [];
    for (let id = start; id < Math.min(start + BATCH, rows + 1); id += 1) {
      batch.push([
        id,
        `Voter Kumar ${id}`,
        `+9198${String(id).padStart(8, '0')}`,
        `voter${id}@rediffmail.com`,
        id % 3 ? 'Varanasi' : 'Lucknow',
        String(1 + (id % 300)),
        String(1 + (id % 60)),
        `H.No ${id % 999}, Gandhi Road, Varanasi`,
        '2026-11-24T10:00:00.000Z',
        '2026-11-24T10:00:00.000Z',
      ]);
    }
    yield batch;
  }
}

function* batches(): Generator<string> {
  for (const batch of batchRows()) yield xlsxRows(batch);
}

function* runs() {
  for (const batch of batchRows()) yield xlsxRun(batch);
}

const head = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>${xlsxRows([columns])}`;

async function ours(): Promise<number> {
  let size = 0;
  for await (const chunk of xlsxStream(columns, Readable.from(runs()))) size += chunk.length;
  return size;
}

async function yazl(): Promise<number> {
  const { ZipFile } = libs('yazl') as {
    ZipFile: new () => {
      addReadStream(stream: Readable, name: string): void;
      end(): void;
      outputStream: AsyncIterable<Buffer>;
    };
  };
  const zip = new ZipFile();
  zip.addReadStream(
    Readable.from(
      (function* () {
        yield head;
        yield* batches();
        yield '</sheetData></worksheet>';
      })(),
    ),
    'xl/worksheets/sheet1.xml',
  );
  zip.end();
  let size = 0;
  for await (const chunk of zip.outputStream) size += chunk.length;
  return size;
}

async function fflate(): Promise<number> {
  const { Zip, ZipDeflate } = libs('fflate') as {
    Zip: new (callback: (error: Error | null, chunk: Uint8Array, final: boolean) => void) => {
      add(file: unknown): void;
      end(): void;
    };
    ZipDeflate: new (
      name: string,
      options: { level: number },
    ) => { push(data: Uint8Array, final?: boolean): void };
  };
  let size = 0;
  let done!: () => void;
  const finished = new Promise<void>((resolve) => (done = resolve));
  const zip = new Zip((error: Error | null, chunk: Uint8Array, final: boolean) => {
    if (error) throw error;
    size += chunk.length;
    if (final) done();
  });
  const sheet = new ZipDeflate('xl/worksheets/sheet1.xml', { level: 6 });
  zip.add(sheet);
  const encoder = new TextEncoder();
  sheet.push(encoder.encode(head));
  for (const batch of batches()) sheet.push(encoder.encode(batch));
  sheet.push(encoder.encode('</sheetData></worksheet>'), true);
  zip.end();
  await finished;
  return size;
}

const ways = { ours, yazl, fflate } as const;
if (args.only) {
  const started = performance.now();
  const size = await ways[args.only as keyof typeof ways]();
  const ms = performance.now() - started;
  const peak = Math.round(
    Number(
      /VmHWM:\s+(\d+) kB/.exec(
        await import('node:fs').then((fs) => fs.readFileSync('/proc/self/status', 'utf8')),
      )?.[1],
    ) / 1024,
  );
  console.log(JSON.stringify({ ms, size, peak }));
} else {
  console.log(
    `\n| .xlsx of ${rows.toLocaleString('en')} rows | time | rows/s | peak RSS | size |\n|---|---|---|---|---|`,
  );
  for (const name of Object.keys(ways)) {
    const out = execFileSync(process.execPath, [
      ...process.execArgv,
      process.argv[1]!,
      '--rows',
      String(rows),
      '--only',
      name,
    ]);
    const { ms, size, peak } = JSON.parse(out.toString().trim().split('\n').pop()!) as {
      ms: number;
      size: number;
      peak: number;
    };
    console.log(
      `| ${name} | ${(ms / 1000).toFixed(2)} s | ${Math.round(rows / (ms / 1000)).toLocaleString('en')} | ${peak} MB | ${(size / 1e6).toFixed(1)} MB |`,
    );
  }
}
