import type { Db } from '../../db/connect.ts';
import { AppError, validationError } from '../../errors.ts';
import { fieldErrors, refuseNul, validatorCompiler } from '../../http/validation.ts';
import { xlsxRun, xlsxStream } from '../../lib/xlsx.ts';
import { csvLines, type ExportFormat, exportFormats } from './export-format.ts';
import { type ExportThreadSettings, threadedCsv, threadedSheet } from './export-threads.ts';
import { type AuditActor, recordAudit } from '../audit/audit.repository.ts';
import {
  copyVoterRows,
  copyVotersCsv,
  exportShape,
  type ExportShape,
  exportVoterBatches,
  type ExportRow,
} from './voter-exports.repository.ts';
import { checkVoterFilters, type VoterFilters, withPlaces } from '../voters/voters.search.ts';
import { countVoters } from '../voters/voters.list.ts';
import { VoterFiltersSchema } from '../voters/voters.schemas.ts';

/** The file of an export. A chunk of `body` is the consumer's until it asks for the next (see Download). */
export interface ExportFile {
  contentType: string;
  filename: string;
  body: AsyncGenerator<Buffer>;
}

/**
 * Rows per read of an export in the request's thread. What a paused export holds is about one read's text
 * (and its bytes): 256 voters are about 30 KB of CSV, 200 KB of sheet XML (2000 held 3 MB of rows, text and
 * bytes per paused export, and twenty paused exports took the server 150 MB up).
 */
const IN_THREAD_ROWS = 256;
/**
 * The most bytes of CSV formatted in this thread written to the socket at once (a paused export's socket
 * holds no more). Chunks from worker threads (256 KB, a fixed number in the process) go as they are.
 */
export const EXPORT_CHUNK_BYTES = 64 * 1024;

/** Seconds a client refused by the export limit is told to wait. */
const RETRY_AFTER_SECONDS = 10;

/**
 * Exports running per workspace, held to EXPORT_MAX_CONCURRENT: a file holds a database connection (a
 * PostgreSQL COPY) or worker threads for as long as its client reads, so one workspace may not take them
 * all. In memory, per process.
 */
export class ExportGate {
  private readonly running = new Map<number, number>();

  constructor(private readonly max: number) {}

  /** Takes one of the workspace's slots, or throws 429 `rate_limit_exceeded`; call the result once done. */
  enter(workspaceId: number): () => void {
    const count = this.running.get(workspaceId) ?? 0;
    if (count >= this.max) {
      throw new AppError(
        'rate_limit_exceeded',
        `This workspace already has ${count} exports running, the most it may run at once (EXPORT_MAX_CONCURRENT): retry when one has finished.`,
        { max_concurrent: this.max },
        { 'retry-after': String(RETRY_AFTER_SECONDS), 'x-ratelimit-reset': String(RETRY_AFTER_SECONDS) },
      );
    }
    this.running.set(workspaceId, count + 1);
    let left = false;
    return () => {
      if (left) return;
      left = true;
      const now = (this.running.get(workspaceId) ?? 1) - 1;
      if (now > 0) this.running.set(workspaceId, now);
      else this.running.delete(workspaceId);
    };
  }
}

const checkFilters = validatorCompiler({
  schema: VoterFiltersSchema,
  httpPart: 'body',
  method: 'GET',
  url: '/api/voters/export',
}) as ((value: unknown) => boolean) & { errors?: Parameters<typeof fieldErrors>[0] | null };

/** The `filters` query parameter: a JSON object with any of constituency, booth, ward, search. */
export function parseExportFilters(raw: string | undefined): Record<string, unknown> {
  if (raw === undefined || raw.trim() === '') return {};
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    throw validationError({ filters: ['must be a JSON object, e.g. {"constituency":"Varanasi"}.'] });
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw validationError({ filters: ['must be a JSON object, e.g. {"constituency":"Varanasi"}.'] });
  }
  if (!checkFilters(value)) {
    const details = Object.create(null) as Record<string, string[]>;
    for (const [path, messages] of Object.entries(fieldErrors(checkFilters.errors ?? [], 'body'))) {
      details[path === 'body' ? 'filters' : `filters.${path}`] = messages;
    }
    throw validationError(details, `The request has invalid fields: ${Object.keys(details).join(', ')}.`);
  }
  refuseNul([value, 'filters']);
  return value as Record<string, unknown>;
}

async function* csvBody(
  columns: readonly string[],
  text: AsyncIterable<string | Buffer>,
): AsyncGenerator<Buffer> {
  yield Buffer.from(columns.join(',') + '\n', 'utf8');
  for await (const chunk of text) {
    if (typeof chunk !== 'string') yield chunk;
    else yield* atMost(Buffer.from(chunk, 'utf8'), EXPORT_CHUNK_BYTES);
  }
}

/** `bytes` in pieces of at most `most` bytes (views, not copies). */
function* atMost(bytes: Buffer, most: number): Generator<Buffer> {
  if (bytes.length <= most) yield bytes;
  else for (let at = 0; at < bytes.length; at += most) yield bytes.subarray(at, at + most);
}

/** The formatted next batch, or undefined after the last: the batch's rows are not kept. */
async function nextPiece<U>(
  batches: AsyncGenerator<ExportRow[]>,
  format: (rows: ExportRow[]) => U,
): Promise<U | undefined> {
  const next = await batches.next();
  return next.done ? undefined : format(next.value);
}

/**
 * An export's text in pieces: from worker threads when `threaded` gives them (see threadedExport; asked only
 * when the body is first pulled), else read and formatted by `format` in this thread, IN_THREAD_ROWS rows at
 * a time (only the text of one read is held while the consumer waits, not its rows).
 */
async function* exportPieces<T, U>(
  threaded: () => Promise<AsyncGenerator<T> | undefined> | undefined,
  db: Db,
  workspaceId: number,
  filters: VoterFilters,
  shape: ExportShape,
  format: (rows: ExportRow[]) => U,
): AsyncGenerator<T | U> {
  const pieces = await threaded();
  if (pieces) return yield* pieces;
  const batches = exportVoterBatches(db, workspaceId, filters, shape, IN_THREAD_ROWS);
  try {
    for (
      let piece = await nextPiece(batches, format);
      piece !== undefined;
      piece = await nextPiece(batches, format)
    ) {
      yield piece;
    }
  } finally {
    await batches.return(undefined);
  }
}

async function* sheetRuns(batches: AsyncGenerator<ExportRow[]>) {
  for await (const rows of batches) yield xlsxRun(rows);
}

/**
 * A streamed export of the workspace's voters that match `filters`: rows are read in id order, one batch
 * at a time, as the client takes the bytes (the consumer pulls the generator, so a slow client slows the
 * reads instead of filling memory).
 */
export function exportVoters(
  db: Db,
  workspaceId: number,
  filters: VoterFilters,
  shape: ExportShape,
  format: ExportFormat,
  threads?: ExportThreadSettings,
  today = new Date(),
): ExportFile {
  const { contentType, extension } = exportFormats[format];
  const { columns } = shape;
  let body: AsyncGenerator<Buffer>;
  if (db.raw.dialect === 'postgres') {
    // The database writes the CSV itself; the sheet's rows come from COPY too (see copyVoterRows).
    body =
      format === 'csv'
        ? copyVotersCsv(db.kysely, db.raw.bulkFor, workspaceId, filters, shape)
        : xlsxStream(
            columns,
            sheetRuns(copyVoterRows(db.kysely, db.raw.bulkFor, workspaceId, filters, shape)),
          );
  } else {
    body =
      format === 'csv'
        ? csvBody(
            columns,
            exportPieces(
              () => threads && threadedCsv(db, workspaceId, filters, shape, threads),
              db,
              workspaceId,
              filters,
              shape,
              csvLines,
            ),
          )
        : xlsxStream(
            columns,
            exportPieces(
              () => threads && threadedSheet(db, workspaceId, filters, shape, threads),
              db,
              workspaceId,
              filters,
              shape,
              xlsxRun,
            ),
          );
  }
  return { contentType, filename: `voters-${today.toISOString().slice(0, 10)}.${extension}`, body };
}

/**
 * What the export route calls: the per-workspace limit, the audit entry and the file. The entry
 * (`voters.exported`: format, filters, the number of matching voters) is recorded when the export starts,
 * before any byte leaves: personal data going out is on record even when the download is cut short, and an
 * export writes nothing else to share a transaction with.
 */
export class VoterExports {
  private readonly gate: ExportGate;

  constructor(private readonly deps: { db: Db; settings: ExportThreadSettings & { maxConcurrent: number } }) {
    this.gate = new ExportGate(deps.settings.maxConcurrent);
  }

  /**
   * The file, and `leave` to call once it has been sent (or not). `includeSensitive` (politicians only, checked
   * by the route) adds support_level and the sensitive custom fields, and is audited as
   * `voters.exported_sensitive` instead of `voters.exported`.
   */
  async start(
    workspaceId: number,
    actor: AuditActor,
    given: Record<string, unknown>,
    format: ExportFormat,
    includeSensitive = false,
  ): Promise<{ file: ExportFile; leave: () => void }> {
    const { db, settings } = this.deps;
    const filters = await checkVoterFilters(db.kysely, workspaceId, given, true, 'filters.');
    const leave = this.gate.enter(workspaceId);
    try {
      // The places read once: every batch, thread and count of the export compares keys, not subqueries.
      const placed = await withPlaces(db.kysely, workspaceId, filters);
      const rows = await countVoters(db.kysely, workspaceId, placed);
      const shape = await exportShape(db.kysely, workspaceId, includeSensitive);
      await db.kysely.transaction().execute((trx) =>
        recordAudit(trx, {
          workspaceId,
          actor,
          action: includeSensitive ? 'voters.exported_sensitive' : 'voters.exported',
          details: { format, filters, rows, ...(includeSensitive ? { include_sensitive: true } : {}) },
        }),
      );
      return { file: exportVoters(db, workspaceId, placed, shape, format, settings), leave };
    } catch (error) {
      leave();
      throw error;
    }
  }
}
