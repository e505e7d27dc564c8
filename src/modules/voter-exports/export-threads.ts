import { once } from 'node:events';
import { resolve } from 'node:path';
import type { Worker } from 'node:worker_threads';
import { startThread } from '../../lib/threads.ts';
import type { Db } from '../../db/connect.ts';
import { type SheetPiece, SHEET_MAX_ROWS } from '../../lib/xlsx.ts';
import type { ExportFormat } from './export-format.ts';
import type { ExportChunk, ExportWorkerData } from './export-worker.ts';
import {
  exportRangeStatement,
  type ExportShape,
  sideColumns,
  voterIdSpan,
} from './voter-exports.repository.ts';
import { hasExactFilters, type VoterFilters } from '../voters/voters.search.ts';
import { countVoters } from '../voters/voters.list.ts';

export interface ExportThreadSettings {
  /** Worker threads for one export; 0: every export runs in the request's thread. */
  readonly threads: number;
  /** Exports of fewer voters run in the request's thread: starting threads would cost more than it saves. */
  readonly minVoters: number;
}

/** A range holds about this many of the workspace's rows. */
const RANGE_ROWS = 2000;
/** Rows per read in a worker: batches this small keep its heap (and GC work) small. */
const READ_ROWS = 128;
/** Text per chunk. Excel's is deflated by the worker (to about a tenth), in pieces of this size. */
const CHUNK_BYTES = { csv: 256 * 1024, excel: 512 * 1024 };
/** Chunks a worker may have posted that the request thread has not yet written. */
const CREDITS = 6;
/**
 * A worker's live data is one read of rows and its text: 24 MB of old generation leave it room to spare.
 * A young generation of 8 MB instead of 4 reads and formats ~8% faster in a worker alone, but end to end
 * (two threads on two cores beside the request thread and the client) the difference was lost in the
 * noise, while the server's peak RSS was a few MB higher.
 */
const WORKER_LIMITS = { maxOldGenerationSizeMb: 24, maxYoungGenerationSizeMb: 4 };
/** How long a worker asked to stop may take to end by itself before it is terminated. */
const STOP_WAIT_MS = 30_000;
const workerModule = new URL('./export-worker', import.meta.url);

const threadCounts = { started: 0, running: 0 };
/** Threads promised to exports that have started or are about to start them (see threadedExport). */
let threadsTaken = 0;

/** Export worker threads started, and still running, in this process (every export ends its own). */
export function exportThreadCounts(): { started: number; running: number } {
  return { ...threadCounts };
}

/**
 * An export read and formatted by worker threads, or undefined when it runs in the request's thread: not
 * SQLite on a file (an in-memory database cannot be opened from another thread), threads turned off, fewer
 * than `minVoters` matching voters, a search, an Excel export longer than a sheet (SHEET_MAX_ROWS), or the
 * process's export threads (`threads` in all, not per export) all busy with other exports. A paused export's
 * threads hold their heaps and chunks until it ends, so many exports at once must not each start threads
 * (twenty paused threaded exports took the server to 373 MB); an export in the request's thread holds one
 * batch. (A search's FTS subquery is evaluated again by every
 * statement: over id ranges it would run once per range instead of once per batch of matches. At a million
 * voters a common term took 12 s that way, and 0.7-2.4 s even through FTS rowid ranges, against 0.06 s in
 * one thread.)
 *
 * The workspace's id span is cut into consecutive ranges of about RANGE_ROWS of its voters; the ranges go
 * round-robin to the threads, each reading its own with its own read-only connection. The chunks are put
 * out range by range, so the file is the same as the request thread's own export.
 */
async function threadedExport<T>(
  db: Db,
  workspaceId: number,
  filters: VoterFilters,
  shape: ExportShape,
  format: ExportFormat,
  settings: ExportThreadSettings,
  out: (chunk: ExportChunk & { bytes: Uint8Array }) => T,
): Promise<AsyncGenerator<T> | undefined> {
  if (settings.threads === 0 || db.raw.dialect !== 'sqlite' || db.raw.sqlite.memory) return undefined;
  if (filters.search?.trim()) return undefined;
  const span = await voterIdSpan(db.kysely, workspaceId);
  if (span.total < settings.minVoters || span.min === null || span.max === null) return undefined;
  const total = hasExactFilters(filters) ? await countVoters(db.kysely, workspaceId, filters) : span.total;
  if (total < settings.minVoters) return undefined;
  // A workbook longer than a sheet is written in this thread: xlsxStream starts each new sheet at the end of
  // a run of rows, and a thread's pieces may end inside one.
  if (format === 'excel' && total > SHEET_MAX_ROWS) return undefined;

  const ids = span.max - span.min + 1;
  const width = Math.max(1, Math.ceil((RANGE_ROWS * ids) / Math.max(1, span.total)));
  const count = Math.ceil(ids / width);
  const threads = Math.min(settings.threads, count);
  if (threadsTaken + threads > settings.threads) return undefined;
  const { sql, parameters } = exportRangeStatement(db, workspaceId, filters, shape);
  const plan: ExportWorkerData = {
    file: resolve(db.raw.sqlite.name),
    sql,
    parameters,
    side: sideColumns(workspaceId, shape),
    format,
    start: span.min - 1,
    width,
    count,
    first: 0,
    step: 1,
    batchSize: READ_ROWS,
    chunkBytes: CHUNK_BYTES[format],
    credits: CREDITS,
    stop: new SharedArrayBuffer(4),
  };
  // Taken now (nothing is awaited from here until the consumer starts the generator) and given back when
  // the generator ends.
  threadsTaken += threads;
  return orderedChunks(plan, threads, out, () => (threadsTaken -= threads));
}

/** The CSV lines of an export from worker threads (see threadedExport), or undefined. */
export function threadedCsv(
  db: Db,
  workspaceId: number,
  filters: VoterFilters,
  shape: ExportShape,
  settings: ExportThreadSettings,
): Promise<AsyncGenerator<Buffer> | undefined> {
  return threadedExport(db, workspaceId, filters, shape, 'csv', settings, ({ bytes }) =>
    Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength),
  );
}

/** The sheet rows of an Excel export, deflated by worker threads (see threadedExport), or undefined. */
export function threadedSheet(
  db: Db,
  workspaceId: number,
  filters: VoterFilters,
  shape: ExportShape,
  settings: ExportThreadSettings,
): Promise<AsyncGenerator<SheetPiece> | undefined> {
  return threadedExport(db, workspaceId, filters, shape, 'excel', settings, ({ bytes, crc, size }) => ({
    deflated: bytes,
    crc,
    size,
  }));
}

/**
 * Starts `threads` workers on the plan (worker i takes ranges i, i + threads, ...) and yields their chunks
 * in range order. A chunk is acknowledged (one credit back to its worker, with the chunk's memory) when
 * the consumer asks for the next one, so memory stays at a few chunks per worker whatever the client's
 * speed; the consumer must be done with a chunk by then (sendDownload is: it waits for the socket). A
 * worker's error ends the generator with that error; however it ends (done, failed, or returned early
 * because the client went away), every worker is asked to stop and ends by itself, and one that has not
 * within STOP_WAIT_MS is terminated.
 */
async function* orderedChunks<T>(
  plan: ExportWorkerData,
  threads: number,
  out: (chunk: ExportChunk & { bytes: Uint8Array }) => T,
  done: () => void,
): AsyncGenerator<T> {
  const chunks = new ChunkQueues();
  const workers: Worker[] = [];
  const exits: Promise<unknown>[] = [];
  try {
    for (let first = 0; first < threads; first += 1) {
      const worker = chunks.start(
        { ...plan, first, step: threads },
        Math.ceil((plan.count - first) / threads),
      );
      workers.push(worker);
      // Waited for at the end; a worker's error is handled by its 'error' listener, not here.
      exits.push(once(worker, 'exit').catch(() => {}));
    }
    for (let range = 0; range < plan.count; range += 1) {
      const worker = workers[range % threads]!;
      for (;;) {
        const chunk = await chunks.next(range);
        if (chunk.bytes) {
          yield out({ ...chunk, bytes: chunk.bytes });
          // Asked for the next chunk: this one is on the socket. Its memory goes back to its worker (freed
          // now instead of at this thread's next garbage collection, or reused there).
          const memory = chunk.bytes.buffer as ArrayBuffer;
          worker.postMessage(memory, [memory]);
        } else {
          worker.postMessage(null);
        }
        if (chunk.last) break;
      }
      chunks.drop(range);
    }
  } finally {
    chunks.finished = true;
    await stopWorkers(plan, workers, exits);
    done();
  }
}

/** The chunks the workers of one export have sent, by range, and the first error among them. */
class ChunkQueues {
  private readonly queues = new Map<number, ExportChunk[]>();
  private failure: unknown;
  private wake: (() => void) | undefined;
  /** Set once the consumer is done: a worker that ends early then is no failure. */
  finished = false;

  /** Starts a worker on `data`, whose `ranges` ranges' chunks it queues. */
  start(data: ExportWorkerData, ranges: number): Worker {
    const worker = startThread(workerModule, 'runExportWorker', data, WORKER_LIMITS);
    threadCounts.started += 1;
    threadCounts.running += 1;
    let rangesLeft = ranges;
    worker.on('message', (chunk: ExportChunk) => {
      let queue = this.queues.get(chunk.range);
      if (!queue) this.queues.set(chunk.range, (queue = []));
      queue.push(chunk);
      if (chunk.last) rangesLeft -= 1;
      this.signal();
    });
    worker.on('error', (error) => {
      this.failure ??= error;
      this.signal();
    });
    worker.once('exit', (code) => {
      threadCounts.running -= 1;
      if (rangesLeft > 0 && !this.finished) {
        this.failure ??= new Error(`an export worker stopped (exit code ${code}) before its last range`);
      }
      this.signal();
    });
    return worker;
  }

  /** The next chunk of `range`, once it has come; a worker's error instead, once there is one. */
  async next(range: number): Promise<ExportChunk> {
    let chunk = this.queues.get(range)?.shift();
    while (!chunk) {
      if (this.failure !== undefined) throw this.failure;
      await new Promise<void>((resolve) => (this.wake = resolve));
      chunk = this.queues.get(range)?.shift();
    }
    return chunk;
  }

  drop(range: number): void {
    this.queues.delete(range);
  }

  private signal(): void {
    const resolve = this.wake;
    this.wake = undefined;
    resolve?.();
  }
}

/**
 * Asks the workers to stop (those done have ended already) and wakes any waiting for a credit; they close
 * their connections and end between two reads. Terminating one inside a better-sqlite3 call can abort the
 * process, so terminate() is only the last resort for a worker that never ends by itself within STOP_WAIT_MS.
 */
async function stopWorkers(
  plan: ExportWorkerData,
  workers: Worker[],
  exits: Promise<unknown>[],
): Promise<void> {
  Atomics.store(new Int32Array(plan.stop), 0, 1);
  for (const worker of workers) worker.postMessage(null);
  await Promise.all(
    workers.map(async (worker, i) => {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<'late'>(
        (resolve) => (timer = setTimeout(() => resolve('late'), STOP_WAIT_MS)),
      );
      if ((await Promise.race([exits[i], late])) === 'late') await worker.terminate();
      clearTimeout(timer);
    }),
  );
}
