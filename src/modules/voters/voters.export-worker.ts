import type { MessagePort } from 'node:worker_threads';
import SQLite from 'better-sqlite3';
import type { ExportFormat } from './voters.export.ts';
import { exportText } from './voters.export-format.ts';
import type { ExportRow } from './voters.repository.ts';

/** What an export worker thread is started with (see voters.export-threads.ts). */
export interface ExportWorkerData {
  /** The SQLite database file, opened read-only by the worker. */
  file: string;
  /** exportRangeStatement: the SQL, and its parameters before (after id, up to id, batch size). */
  sql: string;
  parameters: unknown[];
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
  /** Size of the buffers the text is encoded into, each posted (full, or a range's end) as one chunk. */
  chunkBytes: number;
  /** Chunks it may post before the request thread has written them (each written chunk returns one). */
  credits: number;
}

/** A piece of a range: UTF-8 text of the file (null when the range has no rows). */
export interface ExportChunk {
  range: number;
  bytes: Uint8Array | null;
  /** The range's last chunk. */
  last: boolean;
}

/**
 * The body of an export worker thread: reads its ranges with its own read-only connection, in keyset
 * batches, encodes their text into buffers of its own and posts each full buffer to the request thread
 * (transferred, not copied), never more than `credits` chunks ahead of what the request thread has taken.
 */
export async function runExportWorker(data: ExportWorkerData, port: MessagePort): Promise<void> {
  let credits = data.credits;
  let wake: (() => void) | undefined;
  const onCredit = () => {
    credits += 1;
    wake?.();
  };
  port.on('message', onCredit);
  const post = async (chunk: ExportChunk) => {
    while (credits === 0) await new Promise<void>((resolve) => (wake = resolve));
    credits -= 1;
    port.postMessage(chunk, chunk.bytes ? [chunk.bytes.buffer as ArrayBuffer] : []);
  };
  const db = new SQLite(data.file, { readonly: true, fileMustExist: true });
  try {
    db.pragma('busy_timeout = 5000');
    // Every page is read once, in order: a small cache is enough.
    db.pragma('cache_size = -2048');
    const statement = db.prepare(data.sql).raw(true);
    const encoder = new TextEncoder();
    let buffer = new Uint8Array(data.chunkBytes);
    for (let range = data.first; range < data.count; range += data.step) {
      const upTo = data.start + (range + 1) * data.width;
      let after = data.start + range * data.width;
      let used = 0;
      for (;;) {
        const rows = statement.all(...data.parameters, after, upTo, data.batchSize) as ExportRow[];
        const lastId = rows.length > 0 ? rows[rows.length - 1]![0] : upTo;
        let text = rows.length > 0 ? exportText(data.format, rows) : '';
        for (;;) {
          const { read, written } = encoder.encodeInto(text, buffer.subarray(used));
          used += written;
          if (read === text.length) break;
          // The buffer is full: it goes to the request thread, and the rest of the text into a new one.
          await post({ range, bytes: buffer.subarray(0, used), last: false });
          text = text.slice(read);
          buffer = new Uint8Array(data.chunkBytes);
          used = 0;
        }
        if (rows.length < data.batchSize || lastId >= upTo) break;
        after = lastId;
      }
      // The range's last piece is copied out at its size (the request thread would otherwise hold the whole
      // buffer until it collects it), and the buffer serves the next range.
      await post({ range, bytes: used > 0 ? buffer.slice(0, used) : null, last: true });
    }
  } finally {
    db.close();
    // Nothing else keeps the thread alive: it ends by itself.
    port.off('message', onCredit);
  }
}
