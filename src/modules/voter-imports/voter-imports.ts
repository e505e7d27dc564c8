import { placeKeyColumns } from '../../lib/place.ts';
import { yieldToOthers } from '../../lib/pacing.ts';
import type { Db } from '../../db/connect.ts';
import { nowIso } from '../../db/connect.ts';
import { AppError, validationError } from '../../errors.ts';
import { CsvError, CsvReader, unguardFormula } from '../../lib/csv.ts';
import type { AuditActor } from '../audit/audit.repository.ts';
import { startVoterImport, type StagedVoter, type VoterImport } from './voter-imports.repository.ts';
import { nameKey } from '../voters/voters.repository.ts';
import { checkVoter, type VoterField, voterFields } from '../voters/voters.rules.ts';
import { linkNewVoters } from '../conversations/conversations.thread.ts';
import { PlacesSeen, type UnknownPlaces } from '../places/places.service.ts';

export interface ImportRowError {
  row: number;
  field: string;
  message: string;
}

export interface ImportResult {
  /** Voters this import created. */
  imported: number;
  /** The other valid rows: each matched a voter that already existed (or an earlier row of the file). */
  updated: number;
  /** Rows refused; the first IMPORT_MAX_ERRORS problems are in `errors`. */
  failed: number;
  errors: ImportRowError[];
  /** The file's places that match no place of the workspace, per kind it keeps places of (at most 100 each). */
  unknown_places: UnknownPlaces;
}

/** How far an import has read its file. */
export interface ImportProgress {
  bytes_read: number;
  rows_read: number;
}

/** Receives the header and every refused row as the file had them (an import job's errors.csv). */
export interface FailedRowSink {
  header(fields: string[]): void;
  row(fields: string[], error: string): void;
}

export interface ImportOptions {
  /** Every check and the same counts, but nothing is written. */
  dryRun?: boolean;
  /** Awaited after each chunk of the file; a job renews its lease here, and may throw to stop. */
  progress?: (progress: ImportProgress) => Promise<void>;
  failures?: FailedRowSink;
  /** Record `voters.imported` once the rows are applied (a dry run records nothing). */
  audit?: { actor: AuditActor; fileName: string };
}

/** What the import reads: the file part's byte stream, and whether the upload limit cut it short. */
export interface ImportSource {
  stream: AsyncIterable<Buffer>;
  truncated(): boolean;
}

// Small batches: rows that wait long in memory survive into V8's old generation and grow the heap.
const STAGE_BATCH = 2_000;

const fileError = (message: string) =>
  validationError({ file: [message] }, `The file cannot be imported: ${message}`);

/**
 * The streaming voter import: bytes -> UTF-8 text -> CSV records -> the same checks as the API
 * (checkVoter) -> staged in batches -> one upsert at the end. Nothing is applied before the whole file has
 * been read, so a file refused part-way (too large, not UTF-8, an unclosed quote) changes nothing.
 */
export class VoterImporter {
  constructor(
    private readonly deps: { db: Db; defaultCountry: string; maxBytes: number; maxErrors: number },
  ) {}

  async run(workspaceId: number, source: ImportSource, options: ImportOptions = {}): Promise<ImportResult> {
    const { maxBytes, maxErrors, defaultCountry } = this.deps;
    const { failures } = options;
    let rowsRead = 0;
    const errors: ImportRowError[] = [];
    let failed = 0;
    let valid = 0;
    let columns: [VoterField, number][] | undefined;
    let sawHeader = false;
    let batch: StagedVoter[] = [];
    const places = new PlacesSeen();

    const onRecord = (fields: string[], line: number) => {
      if (!sawHeader) {
        sawHeader = true;
        columns = headerColumns(fields);
        failures?.header(fields);
        return;
      }
      rowsRead += 1;
      const input: Partial<Record<VoterField, string>> = {};
      let blank = true;
      for (const [field, index] of columns!) {
        const raw = fields[index] ?? '';
        if (blank && raw.trim() !== '') blank = false;
        input[field] = unguardFormula(raw);
      }
      if (blank) return; // a row of empty cells, as spreadsheets leave behind
      const checked = checkVoter(input, { partial: false, defaultCountry });
      let bad = false;
      for (const field in checked.errors) {
        bad = true;
        for (const message of checked.errors[field]!) {
          if (errors.length < maxErrors) errors.push({ row: line, field, message });
        }
      }
      if (bad) {
        failed += 1;
        failures?.row(
          fields,
          Object.entries(checked.errors)
            .map(([field, messages]) => `${field}: ${messages.join(' ')}`)
            .join('; '),
        );
        return;
      }
      const v = checked.values;
      valid += 1;
      places.add(v);
      batch.push({
        line,
        name: v.name!,
        name_key: nameKey(v.name!),
        phone: v.phone!,
        email: v.email ?? null,
        constituency: v.constituency ?? null,
        booth: v.booth ?? null,
        ward: v.ward ?? null,
        constituency_key: null,
        booth_key: null,
        ward_key: null,
        ...placeKeyColumns({ constituency: v.constituency, ward: v.ward, booth: v.booth }),
        address: v.address ?? null,
      });
    };

    const reader = new CsvReader(onRecord);
    const decoder = new TextDecoder('utf-8', { fatal: true });
    let staging: VoterImport | undefined;
    let bytes = 0;
    let sawText = false;
    try {
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
        await options.progress?.({ bytes_read: bytes, rows_read: rowsRead });
        if (batch.length >= STAGE_BATCH) {
          staging ??= await startVoterImport(this.deps.db, workspaceId);
          const rows = batch;
          batch = [];
          await staging.stage(rows);
          // A file already buffered streams without a wait for I/O: let other requests in between batches.
          await yieldToOthers();
        }
      }
      if (source.truncated()) throw tooLarge(maxBytes);
      feed(decoder.decode());
      reader.end();
      if (!sawText || !sawHeader)
        throw fileError('it is empty: send a CSV with a header row and voter rows.');
      if (valid === 0 && failed === 0) throw fileError('it has a header row but no voter rows.');
      staging ??= await startVoterImport(this.deps.db, workspaceId);
      await staging.stage(batch);
      batch = [];
      await options.progress?.({ bytes_read: bytes, rows_read: rowsRead });
      const audit = options.audit;
      const { imported } = options.dryRun
        ? await staging.preview()
        : await staging.apply(
            nowIso(),
            audit &&
              ((created) => ({
                workspaceId,
                actor: audit.actor,
                action: 'voters.imported',
                details: { file_name: audit.fileName, imported: created, updated: valid - created, failed },
              })),
          );
      staging = undefined;
      if (!options.dryRun) await linkNewVoters(this.deps.db.kysely, workspaceId);
      const unknown_places = await places.unknown(this.deps.db.kysely, workspaceId);
      return { imported, updated: valid - imported, failed, errors, unknown_places };
    } catch (error) {
      await staging?.abort();
      if (error instanceof CsvError) throw fileError(error.message);
      if ((error as { code?: string }).code === 'ERR_ENCODING_INVALID_ENCODED_DATA') {
        throw fileError('it is not UTF-8 text: save it as "CSV UTF-8".');
      }
      throw error;
    }
  }
}

/** The header row: which column holds which voter field (names trimmed, any case; others ignored). */
function headerColumns(header: string[]): [VoterField, number][] {
  const names = header.map((h) => h.trim().toLowerCase());
  const columns: [VoterField, number][] = [];
  for (const field of voterFields) {
    const index = names.indexOf(field);
    if (index >= 0) columns.push([field, index]);
  }
  for (const field of voterFields) {
    const at = names.flatMap((name, i) => (name === field ? [i + 1] : []));
    if (at.length > 1)
      throw fileError(
        `the header row (line 1) names the "${field}" column ${at.length} times (columns ${at.join(', ')}); keep one.`,
      );
  }
  const missing = (['name', 'phone'] as const).filter((f) => !names.includes(f));
  if (missing.length > 0) {
    throw fileError(
      `the header row (line 1) has no ${missing.map((m) => `"${m}"`).join(' or ')} column; ` +
        `it names the columns, in any order: ${voterFields.join(', ')}.`,
    );
  }
  return columns;
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
