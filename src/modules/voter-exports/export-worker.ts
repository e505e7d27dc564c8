import type { MessagePort } from 'node:worker_threads';
import SQLite from 'better-sqlite3';
import { sheetPieceSync } from '../../lib/xlsx.ts';
import { type ExportFormat, exportText } from './export-format.ts';
import { type SideColumns, sideReader } from './export-side.ts';
import type { ExportRow } from './voter-exports.repository.ts';

/** What an export worker thread is started with (see export-threads.ts). */
export interface ExportWorkerData {
  /** The SQLite database file, opened read-only by the worker. */
  file: string;
  /** exportRangeStatement: the SQL, and its parameters before (after id, up to id, batch size). */
  sql: string;
  parameters: unknown[];
  /** The tags' and custom fields' columns, filled per batch (export-side.ts). */
  side: SideColumns;
  format: ExportFormat;
  /** Range r holds the ids in (start + r * width, start + (r + 1) * width]; there are `count` ranges. */
  start: number;
  width: number;
  count: number;
  /** This worker reads ranges first, first + step, first + 2 * step, ... in that order. */
  first: number;
  step: number;
  /** Rows per read (keyset batches: a small batch keeps the worker's heap small). */
  batchSize: number;
  /** Size of the buffer the text is encoded into; a full buffer, or a range's end, makes one chunk. */
  chunkBytes: number;
  /**
   * Chunks it may post before the request thread has written them. Each written chunk returns a credit,
   * with the chunk's ArrayBuffer.
   */
  credits: number;
  /**
   * One Int32 the request thread sets to 1 when the export ends early (shared by the export's workers). A
   * worker checks it between reads and stops by itself: `Worker.terminate()` during a better-sqlite3 call
   * can abort the whole process (better-sqlite3 throws into a terminating isolate).
   */
  stop: SharedArrayBuffer;
}

/** Thrown inside a worker to unwind when the request thread has asked it to stop. */
class Stopped extends Error {}

/** A piece of a range, in the range's order. */
export interface ExportChunk {
  range: number;
  /**
   * CSV: the text, UTF-8. Excel: the sheet rows' XML deflated on its own (see SheetPiece), with the CRC-32
   * and length of that XML in `crc` and `size`. Null when the range has no rows.
   */
  bytes: Uint8Array | null;
  crc: number;
  size: number;
  /** The range's last chunk. */
  last: boolean;
}

/**
 * A copy of zlib's output in an ArrayBuffer of its own, which can be transferred to the request thread. The
 * Buffer deflateRawSync returns cannot always be: on Node.js 24 its memory is marked untransferable and
 * postMessage throws DataCloneError (which ended every threaded Excel export there). The deflated piece is
 * about a tenth of the chunk, so the copy is small.
 */
function ownCopy(bytes: Uint8Array): Uint8Array {
  return new Uint8Array(bytes);
}

/**
 * The body of an export worker thread: reads its ranges with its own read-only connection, in keyset
 * batches, and encodes their text into a buffer of its own. A full buffer (or a range's end) becomes one
 * chunk for the request thread, never more than `credits` ahead of what it has taken: for CSV the buffer
 * itself is transferred (not copied) and comes back with the credit; for Excel the buffer is deflated here
 * and the deflated bytes go.
 */
export async function runExportWorker(data: ExportWorkerData, port: MessagePort): Promise<void> {
  let credits = data.credits;
  let wake: (() => void) | undefined;
  // CSV buffers come back with their credits, once their bytes are on the socket, and serve again.
  const spare: Uint8Array[] = [];
  const onCredit = (returned: ArrayBuffer | null) => {
    credits += 1;
    if (returned?.byteLength === data.chunkBytes && spare.length < data.credits) {
      spare.push(new Uint8Array(returned));
    }
    wake?.();
  };
  port.on('message', onCredit);
  let buffer: Uint8Array = new Uint8Array(data.chunkBytes);
  let used = 0;
  const stop = new Int32Array(data.stop);
  const checkStop = () => {
    if (Atomics.load(stop, 0) !== 0) throw new Stopped('the export was stopped');
  };
  /** Posts what the buffer holds (after waiting for a credit) and leaves it empty. */
  const post = async (range: number, last: boolean) => {
    for (checkStop(); credits === 0; checkStop()) await new Promise<void>((resolve) => (wake = resolve));
    credits -= 1;
    let chunk: ExportChunk;
    if (used === 0) {
      chunk = { range, bytes: null, crc: 0, size: 0, last };
    } else if (data.format === 'excel') {
      const piece = sheetPieceSync(buffer.subarray(0, used));
      chunk = { range, bytes: ownCopy(piece.deflated), crc: piece.crc, size: piece.size, last };
    } else {
      chunk = { range, bytes: buffer.subarray(0, used), crc: 0, size: used, last };
      buffer = spare.pop() ?? new Uint8Array(data.chunkBytes);
    }
    used = 0;
    port.postMessage(chunk, chunk.bytes ? [chunk.bytes.buffer as ArrayBuffer] : []);
  };
  const db = new SQLite(data.file, { readonly: true, fileMustExist: true });
  try {
    db.pragma('busy_timeout = 5000');
    // Every page is read once, in order: a small cache is enough.
    db.pragma('cache_size = -2048');
    const statement = db.prepare(data.sql).raw(true);
    const fill = sideReader(db, data.side);
    const encoder = new TextEncoder();
    for (let range = data.first; range < data.count; range += data.step) {
      const upTo = data.start + (range + 1) * data.width;
      let after = data.start + range * data.width;
      for (;;) {
        checkStop();
        const rows = statement.all(...data.parameters, after, upTo, data.batchSize) as ExportRow[];
        const lastId = rows.length > 0 ? (rows[rows.length - 1]![0] as number) : upTo;
        fill(rows, after, lastId);
        let text = rows.length > 0 ? exportText(data.format, rows) : '';
        for (;;) {
          const { read, written } = encoder.encodeInto(text, buffer.subarray(used));
          used += written;
          if (read === text.length) break;
          // The buffer is full: out it goes, and the rest of the text follows.
          await post(range, false);
          text = text.slice(read);
        }
        if (rows.length < data.batchSize || lastId >= upTo) break;
        after = lastId;
      }
      await post(range, true);
    }
  } catch (error) {
    if (!(error instanceof Stopped)) throw error;
  } finally {
    db.close();
    // Nothing else keeps the thread alive: it ends by itself.
    port.off('message', onCredit);
  }
}
