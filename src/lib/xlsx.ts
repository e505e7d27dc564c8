import { promisify } from 'node:util';
import { crc32, deflateRaw, deflateRawSync, constants as zlibConstants } from 'node:zlib';
import { guardFormula, mayNeedGuard } from './csv.ts';

/**
 * A streaming .xlsx writer: worksheets of inline strings (`t="inlineStr"`, so no shared-strings table
 * grows in memory) deflated into a zip as the rows arrive. The zip is written by hand (local headers with a
 * data descriptor, then the central directory), so memory stays at one batch of rows whatever the count.
 *
 * A sheet holds at most SHEET_MAX_ROWS rows under its header (Excel opens no more than 1,048,576 rows a
 * sheet): a longer export goes on in sheets "Voters 2", "Voters 3", ..., each with the header again, so a
 * state's roll of ten million voters is a workbook Excel opens whole. The workbook's list of sheets is
 * written after them, once their number is known; [Content_Types].xml, first as usual, gives every other
 * .xml part the worksheet type by default. Each sheet's XML stays far under 4 GiB, so no ZIP64 is needed
 * until the compressed workbook itself nears 4 GiB (some 80 million voters).
 */

export type Cell = string | number | null;

const MAX_32 = 0xffffffff;

/** Data rows a sheet holds under its header row: Excel's limit is 1,048,576 rows a sheet. */
export const SHEET_MAX_ROWS = 1_048_575;

const NS = 'http://schemas.openxmlformats.org/spreadsheetml/2006/main';
const REL_NS = 'http://schemas.openxmlformats.org/officeDocument/2006/relationships';
const PKG_REL_NS = 'http://schemas.openxmlformats.org/package/2006/relationships';
const XML_HEAD = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n';

const WORKSHEET_TYPE = 'application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml';

/** The parts written before the sheets: none depends on how many sheets there are. */
const staticParts: [string, string][] = [
  [
    '[Content_Types].xml',
    `${XML_HEAD}<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">` +
      '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>' +
      // Every .xml part not named below is a worksheet, however many sheets follow.
      `<Default Extension="xml" ContentType="${WORKSHEET_TYPE}"/>` +
      '<Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>' +
      '<Override PartName="/xl/styles.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.styles+xml"/>' +
      '</Types>',
  ],
  [
    '_rels/.rels',
    `${XML_HEAD}<Relationships xmlns="${PKG_REL_NS}">` +
      `<Relationship Id="rId1" Type="${REL_NS}/officeDocument" Target="xl/workbook.xml"/>` +
      '</Relationships>',
  ],
  [
    'xl/styles.xml',
    `${XML_HEAD}<styleSheet xmlns="${NS}">` +
      '<fonts count="1"><font><sz val="11"/><name val="Calibri"/></font></fonts>' +
      '<fills count="2"><fill><patternFill patternType="none"/></fill><fill><patternFill patternType="gray125"/></fill></fills>' +
      '<borders count="1"><border><left/><right/><top/><bottom/><diagonal/></border></borders>' +
      '<cellStyleXfs count="1"><xf numFmtId="0" fontId="0" fillId="0" borderId="0"/></cellStyleXfs>' +
      '<cellXfs count="1"><xf numFmtId="0" fontId="0" fillId="0" borderId="0" xfId="0"/></cellXfs>' +
      '<cellStyles count="1"><cellStyle name="Normal" xfId="0" builtinId="0"/></cellStyles>' +
      '</styleSheet>',
  ],
];

/** The workbook and its relationships, written after its `sheets` sheets: "Voters", "Voters 2", ... */
function workbookParts(sheets: number): [string, string][] {
  const numbers = Array.from({ length: sheets }, (_, i) => i + 1);
  return [
    [
      'xl/workbook.xml',
      `${XML_HEAD}<workbook xmlns="${NS}" xmlns:r="${REL_NS}"><sheets>` +
        numbers
          .map((n) => `<sheet name="Voters${n === 1 ? '' : ` ${n}`}" sheetId="${n}" r:id="rId${n}"/>`)
          .join('') +
        '</sheets></workbook>',
    ],
    [
      'xl/_rels/workbook.xml.rels',
      `${XML_HEAD}<Relationships xmlns="${PKG_REL_NS}">` +
        numbers
          .map(
            (n) =>
              `<Relationship Id="rId${n}" Type="${REL_NS}/worksheet" Target="worksheets/sheet${n}.xml"/>`,
          )
          .join('') +
        `<Relationship Id="rId${sheets + 1}" Type="${REL_NS}/styles" Target="styles.xml"/>` +
        '</Relationships>',
    ],
  ];
}

// Characters XML 1.0 cannot carry at all are dropped; & < > are escaped, and so is CR: a reader turns a literal
// CR (or CR LF) into LF, so only a character reference keeps it.
/* eslint-disable no-control-regex -- matching the control characters is the point */
const XML_SPECIAL = /[&<>\r\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff]/;
const XML_SPECIAL_G = /[&<>\r\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff]/g;
/* eslint-enable no-control-regex */
const escapes: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '\r': '&#13;' };

function xmlText(value: string): string {
  return XML_SPECIAL.test(value) ? value.replace(XML_SPECIAL_G, (c) => escapes[c] ?? '') : value;
}

function cell(value: Cell): string {
  if (value === null) return '<c/>';
  if (typeof value === 'number') return `<c><v>${value}</v></c>`;
  const text = xmlText(mayNeedGuard(value) ? guardFormula(value) : value);
  // Leading or trailing spaces survive only with xml:space="preserve".
  const space = text.length > 0 && (text.charCodeAt(0) <= 32 || text.charCodeAt(text.length - 1) <= 32);
  return space
    ? `<c t="inlineStr"><is><t xml:space="preserve">${text}</t></is></c>`
    : `<c t="inlineStr"><is><t>${text}</t></is></c>`;
}

function row(values: readonly Cell[]): string {
  let out = '<row>';
  for (const value of values) out += cell(value);
  return out + '</row>';
}

/** The sheet XML of a batch of rows (`<row>` elements). */
export function xlsxRows(rows: readonly (readonly Cell[])[]): string {
  let text = '';
  for (const values of rows) text += row(values);
  return text;
}

/** A run of sheet rows made in this thread, as `xlsxStream` takes it: the XML and how many rows it holds. */
export interface SheetRun {
  xml: string;
  rows: number;
}

/** The SheetRun of a batch of rows. */
export function xlsxRun(rows: readonly (readonly Cell[])[]): SheetRun {
  return { xml: xlsxRows(rows), rows: rows.length };
}

function dosDateTime(date: Date): { time: number; date: number } {
  return {
    time: (date.getUTCHours() << 11) | (date.getUTCMinutes() << 5) | (date.getUTCSeconds() >> 1),
    date: ((date.getUTCFullYear() - 1980) << 9) | ((date.getUTCMonth() + 1) << 5) | date.getUTCDate(),
  };
}

interface Entry {
  name: Buffer;
  crc: number;
  compressed: number;
  size: number;
  offset: number;
}

class ZipWriter {
  readonly entries: Entry[] = [];
  offset = 0;
  private readonly stamp = dosDateTime(new Date());

  localHeader(name: Buffer, streamed: boolean, crc = 0, compressed = 0, size = 0): Buffer {
    const header = Buffer.alloc(30);
    header.writeUInt32LE(0x04034b50, 0);
    header.writeUInt16LE(20, 4); // version needed
    header.writeUInt16LE(0x0800 | (streamed ? 0x0008 : 0), 6); // UTF-8 names; sizes in a data descriptor
    header.writeUInt16LE(8, 8); // deflate
    header.writeUInt16LE(this.stamp.time, 10);
    header.writeUInt16LE(this.stamp.date, 12);
    header.writeUInt32LE(crc, 14);
    header.writeUInt32LE(compressed, 18);
    header.writeUInt32LE(size, 22);
    header.writeUInt16LE(name.length, 26);
    header.writeUInt16LE(0, 28);
    return Buffer.concat([header, name]);
  }

  /** A small part whose content is known: deflated at once, sizes in the local header. */
  whole(path: string, content: string): Buffer {
    const name = Buffer.from(path, 'utf8');
    const data = Buffer.from(content, 'utf8');
    const compressed = deflateRawSync(data);
    const crc = crc32(data);
    const header = this.localHeader(name, false, crc, compressed.length, data.length);
    this.entries.push({ name, crc, compressed: compressed.length, size: data.length, offset: this.offset });
    this.offset += header.length + compressed.length;
    return Buffer.concat([header, compressed]);
  }

  dataDescriptor(entry: Entry): Buffer {
    const d = Buffer.alloc(16);
    d.writeUInt32LE(0x08074b50, 0);
    d.writeUInt32LE(entry.crc, 4);
    d.writeUInt32LE(entry.compressed, 8);
    d.writeUInt32LE(entry.size, 12);
    return d;
  }

  centralDirectory(): Buffer {
    const parts: Buffer[] = [];
    let size = 0;
    for (const e of this.entries) {
      const h = Buffer.alloc(46);
      h.writeUInt32LE(0x02014b50, 0);
      h.writeUInt16LE(20, 4); // version made by
      h.writeUInt16LE(20, 6); // version needed
      h.writeUInt16LE(0x0800, 8);
      h.writeUInt16LE(8, 10);
      h.writeUInt16LE(this.stamp.time, 12);
      h.writeUInt16LE(this.stamp.date, 14);
      h.writeUInt32LE(e.crc, 16);
      h.writeUInt32LE(e.compressed, 20);
      h.writeUInt32LE(e.size, 24);
      h.writeUInt16LE(e.name.length, 28);
      // extra, comment, disk, internal attributes: 0
      h.writeUInt32LE(0, 38); // external attributes
      h.writeUInt32LE(e.offset, 42);
      parts.push(h, e.name);
      size += h.length + e.name.length;
    }
    const end = Buffer.alloc(22);
    end.writeUInt32LE(0x06054b50, 0);
    end.writeUInt16LE(this.entries.length, 8);
    end.writeUInt16LE(this.entries.length, 10);
    end.writeUInt32LE(size, 12);
    end.writeUInt32LE(this.offset, 16);
    parts.push(end);
    return Buffer.concat(parts);
  }
}

/** A small ZIP of whole files (names and UTF-8 texts), built in memory: a person's access export. */
export function zipOf(files: readonly [string, string][]): Buffer {
  const zip = new ZipWriter();
  const parts = files.map(([name, content]) => zip.whole(name, content));
  return Buffer.concat([...parts, zip.centralDirectory()]);
}

/**
 * A run of the sheet's rows deflated on its own: raw deflate ending in a sync flush (byte-aligned, no final
 * block, no reference to earlier text), so that pieces deflated apart, in another thread or in any order,
 * make one deflate stream when put end to end. `crc` and `size` are those of its text (UTF-8).
 */
export interface SheetPiece {
  deflated: Uint8Array;
  crc: number;
  size: number;
}

const PIECE_OPTIONS = { level: 1, memLevel: 9, finishFlush: zlibConstants.Z_SYNC_FLUSH };
const deflateRawAsync = promisify(deflateRaw);

/** The piece of some sheet XML, deflated in this thread (for worker threads). */
export function sheetPieceSync(text: Uint8Array): SheetPiece {
  return { deflated: deflateRawSync(text, PIECE_OPTIONS), crc: crc32(text), size: text.length };
}

/** The piece of some sheet XML, deflated in libuv's thread pool. */
async function sheetPiece(text: string | Uint8Array): Promise<SheetPiece> {
  const data = typeof text === 'string' ? Buffer.from(text, 'utf8') : text;
  return { deflated: await deflateRawAsync(data, PIECE_OPTIONS), crc: crc32(data), size: data.length };
}

const CRC_POLY = 0xedb88320;

/** a * b modulo the CRC-32 polynomial (zlib's multmodp, bits reflected). */
function multModP(a: number, b: number): number {
  let m = 0x80000000;
  let p = 0;
  for (;;) {
    if (a & m) {
      p ^= b;
      if ((a & (m - 1)) === 0) break;
    }
    m >>>= 1;
    b = b & 1 ? (b >>> 1) ^ CRC_POLY : b >>> 1;
  }
  return p >>> 0;
}

/** x^(2^k) modulo the polynomial, k = 0..31 (zlib's x2n_table). */
const X2N: number[] = [];
for (let k = 0, p = 0x40000000; k < 32; k += 1, p = multModP(p, p)) X2N.push(p);

/** The CRC-32 of A followed by B, from the CRC-32 of each and B's length (zlib's crc32_combine). */
export function crc32Combine(crcA: number, crcB: number, lengthB: number): number {
  // x^(8 * lengthB) mod p: x^(2^3) for each byte, by squaring.
  let p = 0x80000000;
  for (let n = lengthB, k = 3; n > 0; n = Math.floor(n / 2), k += 1) {
    if (n % 2 === 1) p = multModP(X2N[k % 32]!, p);
  }
  return (multModP(p, crcA) ^ crcB) >>> 0;
}

/** A chunk, unless it is empty (a run of rows may deflate to nothing yet). */
function* nonEmpty(chunk: Buffer): Generator<Buffer> {
  if (chunk.length > 0) yield chunk;
}

// A final, empty block (fixed Huffman codes, only the end-of-block code): ends the sheet's deflate stream.
const FINAL_BLOCK = Buffer.from([0x03, 0x00]);

/**
 * Yields the bytes of an .xlsx workbook: a header row of `columns`, then the rows of `sheetRows` as they
 * arrive: runs of `xlsxRun` (deflated here, off the event loop) or pieces already deflated elsewhere
 * (sheetPieceSync in a worker thread). They are pulled one ahead of the consumer, so its backpressure reaches
 * whoever produces them. A run that would take a sheet past `maxRows` rows starts the next sheet (with the
 * header again); a deflated piece, which may end inside a row, always goes on in the current one (its
 * producer keeps to one sheet's rows).
 */
export async function* xlsxStream(
  columns: readonly string[],
  sheetRows: AsyncIterable<SheetRun | SheetPiece>,
  maxRows = SHEET_MAX_ROWS,
): AsyncGenerator<Buffer> {
  const zip = new ZipWriter();
  for (const [path, content] of staticParts) yield zip.whole(path, content);

  let sheets = 0;
  let entry: Entry;
  let header: Buffer;
  let rowsInSheet = 0;
  const add = (piece: SheetPiece): Buffer => {
    entry.crc = crc32Combine(entry.crc, piece.crc, piece.size);
    entry.size += piece.size;
    entry.compressed += piece.deflated.length;
    if (entry.size > MAX_32 || entry.compressed > MAX_32) {
      throw new Error('xlsx sheet over 4 GiB: ZIP64 is not supported');
    }
    const { buffer, byteOffset, byteLength } = piece.deflated;
    return Buffer.from(buffer, byteOffset, byteLength);
  };
  async function* openSheet(): AsyncGenerator<Buffer> {
    sheets += 1;
    rowsInSheet = 0;
    const name = Buffer.from(`xl/worksheets/sheet${sheets}.xml`, 'utf8');
    entry = { name, crc: 0, compressed: 0, size: 0, offset: zip.offset };
    header = zip.localHeader(name, true);
    zip.offset += header.length;
    yield header;
    yield add(await sheetPiece(`${XML_HEAD}<worksheet xmlns="${NS}"><sheetData>${row(columns)}`));
  }
  async function* closeSheet(): AsyncGenerator<Buffer> {
    yield add(await sheetPiece('</sheetData></worksheet>'));
    entry.compressed += FINAL_BLOCK.length;
    yield FINAL_BLOCK;
    const descriptor = zip.dataDescriptor(entry);
    zip.entries.push(entry);
    zip.offset = entry.offset + header.length + entry.compressed + descriptor.length;
    yield descriptor;
  }

  yield* openSheet();
  // XML made in this thread is deflated one piece ahead: the thread pool deflates a run of rows while this
  // thread reads and formats the next. A piece deflated elsewhere is yielded before the next is asked for
  // (its memory is the producer's again once it is).
  let pending: Promise<SheetPiece> | undefined;
  for await (const rows of sheetRows) {
    // `rows` is not referred to past this point: while the consumer waits, XML text is held only until
    // its deflate is done.
    const ready = pending;
    const run = 'xml' in rows ? rows : undefined;
    const count = run?.rows ?? 0;
    // Pieces are deflated independently of the sheet they go in: the next one starts before the sheet is known.
    pending = run && sheetPiece(run.xml);
    pending?.catch(() => {}); // awaited below; failing early must not be an unhandled rejection meanwhile
    const piece = run ? undefined : (rows as SheetPiece);
    if (ready) yield* nonEmpty(add(await ready));
    if (rowsInSheet > 0 && rowsInSheet + count > maxRows) {
      yield* closeSheet();
      yield* openSheet();
    }
    rowsInSheet += count;
    if (piece) yield* nonEmpty(add(piece));
  }
  if (pending) yield* nonEmpty(add(await pending));
  yield* closeSheet();
  for (const [path, content] of workbookParts(sheets)) yield zip.whole(path, content);
  yield zip.centralDirectory();
}
