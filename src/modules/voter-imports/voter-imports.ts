import { yieldToOthers } from '../../lib/pacing.ts';
import type { Db } from '../../db/connect.ts';
import { nowIso } from '../../db/connect.ts';
import { AppError } from '../../errors.ts';
import { CsvError, CsvReader } from '../../lib/csv.ts';
import { erasedMark } from '../opt-outs/opt-outs.rules.ts';
import { recordImportedConsent } from '../voters/voter-consent.ts';
import { type FailedRowSink, type ImportRowError, ImportRows, type ImportWarning } from './import-rows.ts';
import type { AuditActor } from '../audit/audit.repository.ts';
import { startVoterImport, type VoterImport } from './voter-imports.repository.ts';
import { fieldDefs } from '../voters/voter-fields.ts';
import { linkNewVoters } from '../conversations/conversations.thread.ts';
import { type UnknownPlaces } from '../places/places.service.ts';
import {
  checkMapping,
  fallbackAliases,
  fileError,
  headerAliases,
  type ImportMapping,
  mappableFields,
} from './import-headings.ts';

export type { ImportMapping } from './import-headings.ts';
export type { FailedRowSink, ImportRowError, ImportWarning } from './import-rows.ts';

export interface ImportResult {
  /** Voters this import created. */
  imported: number;
  /** The other valid rows: each matched a voter that already existed (or an earlier row of the file). */
  updated: number;
  /** Rows refused (no name, or a repeat of another row's identity); the first IMPORT_MAX_ERRORS problems are in `errors`. */
  failed: number;
  errors: ImportRowError[];
  /** Cells left out of rows that were kept (a bad optional cell), the first IMPORT_MAX_ERRORS of them. */
  warnings: ImportWarning[];
  /** The file's places that match no place of the workspace, per kind it keeps places of (at most 100 each). */
  unknown_places: UnknownPlaces;
  /** The header's columns no voter field took, as the file names them. */
  ignored_columns: string[];
}

/** How far an import has read its file. */
export interface ImportProgress {
  bytes_read: number;
  rows_read: number;
}

export interface ImportOptions {
  /** Every check and the same counts, but nothing is written. */
  dryRun?: boolean;
  /** Awaited after each chunk of the file; a job renews its lease here, and may throw to stop. */
  progress?: (progress: ImportProgress) => Promise<void>;
  failures?: FailedRowSink;
  /** Record `voters.imported` once the rows are applied (a dry run records nothing). */
  audit?: { actor: AuditActor; fileName: string };
  /** The office's own heading -> field choices, beside (and before) the headings the import knows. */
  mapping?: ImportMapping | undefined;
  /** The language of the file's rows that give none (`language` field of the upload: `en` or `hi`). */
  language?: string | undefined;
}

/** What the import reads: the file part's byte stream, and whether the upload limit cut it short. */
export interface ImportSource {
  stream: AsyncIterable<Buffer>;
  truncated(): boolean;
}

// Small batches: rows that wait long in memory survive into V8's old generation and grow the heap.
const STAGE_BATCH = 2_000;

/**
 * The streaming voter import: bytes -> UTF-8 text -> CSV records -> the same checks as the API
 * (checkVoter) -> staged in batches -> one upsert at the end. Nothing is applied before the whole file has
 * been read, so a file refused part-way (too large, not UTF-8, an unclosed quote) changes nothing.
 */
export class VoterImporter {
  constructor(
    private readonly deps: {
      db: Db;
      defaultCountry: string;
      maxBytes: number;
      maxErrors: number;
      /** APP_KEY: erased people's addresses are kept as keyed hashes (their opt-outs). */
      appKey: Buffer;
    },
  ) {}

  /** An upload's `mapping` checked (422 on `mapping`), and remembered as the workspace's last. */
  async mapping(workspaceId: number, text: string): Promise<ImportMapping> {
    const { kysely } = this.deps.db;
    const mapping = checkMapping(text, await fieldDefs(kysely, workspaceId));
    await kysely
      .updateTable('workspaces')
      .set({ import_mapping: JSON.stringify(mapping) })
      .where('id', '=', workspaceId)
      .execute();
    return mapping;
  }

  /** What an import can fill (GET /api/voters/import/columns). */
  async columns(workspaceId: number) {
    const { kysely } = this.deps.db;
    const defs = await fieldDefs(kysely, workspaceId);
    const row = await kysely
      .selectFrom('workspaces')
      .select('import_mapping')
      .where('id', '=', workspaceId)
      .executeTakeFirst();
    return {
      fields: [...mappableFields, ...defs.map((d) => `field:${d.key}`)],
      headings: { ...headerAliases },
      fallbacks: { ...fallbackAliases },
      last_mapping: row?.import_mapping ? (JSON.parse(row.import_mapping) as Record<string, string>) : null,
    };
  }

  async run(workspaceId: number, source: ImportSource, options: ImportOptions = {}): Promise<ImportResult> {
    const { maxErrors, defaultCountry } = this.deps;
    const rows = new ImportRows(await fieldDefs(this.deps.db.kysely, workspaceId), {
      defaultCountry,
      maxErrors,
      mapping: options.mapping,
      language: options.language,
      failures: options.failures,
      erased: await this.erasedTest(workspaceId),
    });
    const reader = new CsvReader((fields, line) => rows.onRecord(fields, line));
    const staged: { staging?: VoterImport } = {};
    try {
      const bytes = await this.readAll(workspaceId, source, reader, rows, staged, options);
      if (rows.valid === 0 && rows.failed === 0) throw fileError('it has a header row but no voter rows.');
      staged.staging ??= await startVoterImport(this.deps.db, workspaceId);
      await staged.staging.stage(rows.take());
      await options.progress?.({ bytes_read: bytes, rows_read: rows.rowsRead });
      return await this.finish(workspaceId, staged, rows, options);
    } catch (error) {
      await staged.staging?.abort();
      if (error instanceof CsvError) throw fileError(error.message);
      if ((error as { code?: string }).code === 'ERR_ENCODING_INVALID_ENCODED_DATA') {
        throw fileError('it is not UTF-8 text: save it as "CSV UTF-8".');
      }
      throw error;
    }
  }

  /**
   * Whether an address is an erased person's, or undefined when the workspace has erased nobody (most never do:
   * their rows are not hashed at all).
   */
  private async erasedTest(workspaceId: number): Promise<((address: string) => boolean) | undefined> {
    const rows = await this.deps.db.kysely
      .selectFrom('opt_outs')
      .select('address')
      .where('workspace_id', '=', workspaceId)
      .where('source', '=', 'erasure')
      .execute();
    if (rows.length === 0) return undefined;
    const marks = new Set(rows.map((r) => r.address));
    return (address) => marks.has(erasedMark(this.deps.appKey, address));
  }

  /**
   * Reads the whole upload into `reader`, staging the rows in batches (a staging started in `staged` at the
   * first). The number of bytes read; a file too large, not text or without a header is refused.
   */
  private async readAll(
    workspaceId: number,
    source: ImportSource,
    reader: CsvReader,
    rows: ImportRows,
    staged: { staging?: VoterImport },
    options: ImportOptions,
  ): Promise<number> {
    const { maxBytes } = this.deps;
    const decoder = new TextDecoder('utf-8', { fatal: true });
    let bytes = 0;
    let sawText = false;
    const feed = (text: string) => {
      if (text.includes('\u0000')) throw fileError('it is not a CSV text file (it holds binary data).');
      if (!sawText && text.trim() !== '') sawText = true;
      reader.push(text);
    };
    const iterator = source.stream[Symbol.asyncIterator]();
    for (;;) {
      let next: IteratorResult<Buffer>;
      try {
        next = await iterator.next();
      } catch (error) {
        throw readError(error, maxBytes);
      }
      if (next.done) break;
      bytes += next.value.length;
      if (bytes > maxBytes || source.truncated()) throw tooLarge(maxBytes);
      feed(decoder.decode(next.value, { stream: true }));
      await options.progress?.({ bytes_read: bytes, rows_read: rows.rowsRead });
      if (rows.batch.length >= STAGE_BATCH) {
        staged.staging ??= await startVoterImport(this.deps.db, workspaceId);
        await staged.staging.stage(rows.take());
        // A file already buffered streams without a wait for I/O: let other requests in between batches.
        await yieldToOthers();
      }
    }
    if (source.truncated()) throw tooLarge(maxBytes);
    feed(decoder.decode());
    reader.end();
    if (!sawText || !rows.sawHeader)
      throw fileError('it is empty: send a CSV with a header row and voter rows.');
    return bytes;
  }

  /** Applies the staged rows (or previews them, on a dry run), and says what the import did. */
  private async finish(
    workspaceId: number,
    staged: { staging?: VoterImport },
    rows: ImportRows,
    options: ImportOptions,
  ): Promise<ImportResult> {
    const staging = staged.staging!;
    const { maxErrors } = this.deps;
    const { valid, failed, errors } = rows;
    const audit = options.audit;
    const { imported } = options.dryRun
      ? await staging.preview()
      : await staging.apply(
          nowIso(),
          audit &&
            ((created) => {
              const left = staging.skipped().length;
              return {
                workspaceId,
                actor: audit.actor,
                action: 'voters.imported',
                details: {
                  file_name: audit.fileName,
                  imported: created,
                  updated: valid - created - left,
                  failed: failed + left,
                },
              };
            }),
        );
    // Applied (or previewed): nothing is left to abort.
    staged.staging = undefined;
    if (!options.dryRun) {
      await linkNewVoters(this.deps.db.kysely, workspaceId);
      await recordImportedConsent(this.deps.db.kysely, workspaceId, rows.consents);
      // An erased person imported again with consent given: the erasure's opt-out of their address is lifted.
      if (rows.returned.length > 0)
        await this.deps.db.kysely
          .deleteFrom('opt_outs')
          .where('workspace_id', '=', workspaceId)
          .where('source', '=', 'erasure')
          .where(
            'address',
            'in',
            rows.returned.map((a) => erasedMark(this.deps.appKey, a)),
          )
          .execute();
    }
    const unknown_places = await rows.places.unknown(this.deps.db.kysely, workspaceId);
    const skipped = staging.skipped();
    for (const problem of skipped) {
      if (errors.length < maxErrors) errors.push(problem);
    }
    return {
      imported,
      updated: valid - imported - skipped.length,
      failed: failed + skipped.length,
      errors,
      warnings: rows.warnings,
      unknown_places,
      ignored_columns: rows.columns?.ignored ?? [],
    };
  }
}

export function tooLarge(maxBytes: number): AppError {
  return new AppError('payload_too_large', `The file is larger than ${maxBytes} bytes (IMPORT_MAX_BYTES).`, {
    max_bytes: maxBytes,
  });
}

/** A failure while reading the upload itself (a broken multipart body, the client went away). */
export function readError(error: unknown, maxBytes: number): Error {
  if (error instanceof AppError) return error;
  const status = (error as { statusCode?: number }).statusCode;
  if (status === 413) return tooLarge(maxBytes);
  return new AppError('bad_request', 'The uploaded file could not be read: the multipart body is malformed.');
}
