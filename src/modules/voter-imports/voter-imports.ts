import { placeKeyColumns } from '../../lib/place.ts';
import { yieldToOthers } from '../../lib/pacing.ts';
import type { Db } from '../../db/connect.ts';
import { nowIso } from '../../db/connect.ts';
import { AppError, type FieldErrors } from '../../errors.ts';
import { CsvError, CsvReader, unguardFormula } from '../../lib/csv.ts';
import type { AuditActor } from '../audit/audit.repository.ts';
import { startVoterImport, type StagedVoter, type VoterImport } from './voter-imports.repository.ts';
import { nameKey } from '../voters/voters.repository.ts';
import { checkVoter, type VoterField } from '../voters/voters.rules.ts';
import {
  checkRecord,
  checkTags,
  householdKey,
  type RecordColumns,
  type RecordField,
} from '../voters/voter-record.rules.ts';
import { checkFieldValues, fieldDefs } from '../voters/voter-fields.ts';
import { linkNewVoters } from '../conversations/conversations.thread.ts';
import { PlacesSeen, type UnknownPlaces } from '../places/places.service.ts';
import {
  checkMapping,
  fallbackAliases,
  type FileColumns,
  fileError,
  headerAliases,
  headerColumns,
  type ImportMapping,
  mappableFields,
} from './import-headings.ts';

export interface ImportRowError {
  row: number;
  field: string;
  message: string;
}

/** Why a phone cell was left out, in the office's words (not the API's: no setting names in it). */
const PHONE_WORDS =
  'it is not a phone number the import can read: give a 10-digit mobile number (9812345678) or one with its country code (+919812345678).';

/** A cell left out of a row that was kept (contract, fifth part: "Imports keep every voter"). */
export interface ImportWarning {
  line: number;
  field: string;
  /** The cell as the file had it (at most 100 characters). */
  value: string;
  reason: string;
}

export type { ImportMapping } from './import-headings.ts';

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
    private readonly deps: { db: Db; defaultCountry: string; maxBytes: number; maxErrors: number },
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
    const { maxBytes, maxErrors, defaultCountry } = this.deps;
    const { failures } = options;
    let rowsRead = 0;
    const errors: ImportRowError[] = [];
    const warnings: ImportWarning[] = [];
    let failed = 0;
    let valid = 0;
    let columns: FileColumns | undefined;
    let sawHeader = false;
    let batch: StagedVoter[] = [];
    const places = new PlacesSeen();
    const defs = await fieldDefs(this.deps.db.kysely, workspaceId);

    const onRecord = (fields: string[], line: number) => {
      if (!sawHeader) {
        sawHeader = true;
        columns = headerColumns(fields, defs, options.mapping);
        failures?.header(fields);
        return;
      }
      rowsRead += 1;
      const { base, record, tags, custom } = columns!;
      const input: Partial<Record<VoterField, string>> = {};
      let blank = true;
      for (const [field, index] of base) {
        const raw = fields[index] ?? '';
        if (blank && raw.trim() !== '') blank = false;
        input[field] = unguardFormula(raw);
      }
      const recordInput: Partial<Record<RecordField, string>> = {};
      for (const [field, index] of record) {
        const raw = (fields[index] ?? '').trim();
        if (raw === '') continue; // an empty cell keeps what the voter has
        blank = false;
        recordInput[field] = unguardFormula(raw);
      }
      const tagCell = tags === undefined ? '' : unguardFormula((fields[tags] ?? '').trim());
      if (tagCell !== '') blank = false;
      const customInput: Record<string, string> = {};
      for (const [key, index] of custom) {
        const raw = (fields[index] ?? '').trim();
        if (raw === '') continue;
        blank = false;
        customInput[key] = unguardFormula(raw);
      }
      if (blank) return; // a row of empty cells, as spreadsheets leave behind
      const checked = checkVoter(input, { partial: false, defaultCountry });
      const rolled = record.length > 0 ? checkRecord(recordInput) : undefined;
      // The roll has no phones: a row without one is kept (by its EPIC number, or as a voter of its own).
      if ((input.phone ?? '').trim() === '') delete checked.errors.phone;
      const tagged = tagCell !== '' ? checkTags(tagCell) : undefined;
      const valued = custom.length > 0 ? checkFieldValues(defs, customInput, true) : undefined;
      const all = mergedErrors(checked.errors, rolled?.errors, tagged?.errors, valued?.errors);
      // A bad optional cell is left out of its row, and the row is kept: only a row without a name is refused.
      const problems: FieldErrors | undefined = all?.name ? { name: all.name } : undefined;
      if (all && !problems) {
        for (const field in all) {
          if (warnings.length >= maxErrors) break;
          const raw =
            field === 'tags'
              ? tagCell
              : field.startsWith('fields.')
                ? customInput[field.slice(7)]
                : ((input as Record<string, string | undefined>)[field] ??
                  (recordInput as Record<string, string | undefined>)[field]);
          const alone =
            field === 'phone' && !rolled?.values.epic_number
              ? ' The row has no EPIC number either: it is a voter of its own, added again if the row is imported again.'
              : '';
          warnings.push({
            line,
            field,
            value: String(raw ?? '').slice(0, 100),
            reason: `left out: ${field === 'phone' ? PHONE_WORDS : `it ${all[field]!.join(' ')}`}${alone}`,
          });
        }
      }
      if (problems) {
        for (const field in problems) {
          for (const message of problems[field]!) {
            if (errors.length < maxErrors) errors.push({ row: line, field, message });
          }
        }
        failed += 1;
        failures?.row(
          fields,
          Object.entries(problems)
            .map(([field, messages]) => `${field}: ${messages.join(' ')}`)
            .join('; '),
        );
        return;
      }
      const v = checked.values;
      const r: Partial<RecordColumns> = rolled?.values ?? {};
      valid += 1;
      places.add(v);
      const keys = placeKeyColumns({ constituency: v.constituency, ward: v.ward, booth: v.booth });
      // Every row an object of one shape, its properties written out (spreads of a few objects per row were a
      // fifth of a million-row file's checks).
      batch.push({
        line,
        name: v.name!,
        name_key: nameKey(v.name!),
        phone: v.phone ?? null,
        email: v.email ?? null,
        constituency: v.constituency ?? null,
        constituency_key: keys.constituency_key ?? null,
        booth: v.booth ?? null,
        booth_key: keys.booth_key ?? null,
        ward: v.ward ?? null,
        ward_key: keys.ward_key ?? null,
        address: v.address ?? null,
        // The record's columns written out too (StagedVoter's type lists them from db/schema.voters.ts: a column
        // added there is a type error here until it is written).
        epic_number: r.epic_number ?? null,
        part_number: r.part_number ?? null,
        serial_number: r.serial_number ?? null,
        page_number: r.page_number ?? null,
        house_number: r.house_number ?? null,
        relation_name: r.relation_name ?? null,
        relation_type: r.relation_type ?? null,
        gender: r.gender ?? null,
        name_local: r.name_local ?? null,
        language: r.language ?? options.language ?? null,
        birth_date: r.birth_date ?? null,
        birth_key: r.birth_key ?? null,
        support_level: r.support_level ?? null,
        household_key: householdKey({
          part_number: r.part_number ?? null,
          house_number: r.house_number ?? null,
          address: v.address ?? null,
        }),
        tags: tagged?.tags ? JSON.stringify(tagged.tags.map((t) => [t.key, t.label])) : null,
        fields:
          valued && valued.values.size > 0
            ? JSON.stringify(
                [...valued.values].map(([key, value]) => [key, value!.value_text, value!.value_number]),
              )
            : null,
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
      const current = staging;
      const { imported } = options.dryRun
        ? await current.preview()
        : await current.apply(
            nowIso(),
            audit &&
              ((created) => {
                const left = current.skipped().length;
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
      staging = undefined;
      if (!options.dryRun) await linkNewVoters(this.deps.db.kysely, workspaceId);
      const unknown_places = await places.unknown(this.deps.db.kysely, workspaceId);
      const skipped = current.skipped();
      for (const problem of skipped) {
        if (errors.length < maxErrors) errors.push(problem);
      }
      return {
        imported,
        updated: valid - imported - skipped.length,
        failed: failed + skipped.length,
        errors,
        warnings,
        unknown_places,
        ignored_columns: columns?.ignored ?? [],
      };
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

/** The problems of a row's checks in one object (a later check's field replaces an earlier's), or undefined. */
function mergedErrors(...all: Array<FieldErrors | undefined>): FieldErrors | undefined {
  let merged: FieldErrors | undefined;
  for (const errors of all) {
    if (!errors) continue;
    for (const field in errors) (merged ??= {})[field] = errors[field]!;
  }
  return merged;
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
