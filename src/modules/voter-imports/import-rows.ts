import type { FieldErrors } from '../../errors.ts';
import { unguardFormula } from '../../lib/csv.ts';
import { placeKeyColumns } from '../../lib/place.ts';
import { PlacesSeen } from '../places/places.service.ts';
import { checkFieldValues, type VoterFieldDef } from '../voters/voter-fields.ts';
import {
  checkRecord,
  checkTags,
  householdKey,
  type RecordColumns,
  type RecordField,
} from '../voters/voter-record.rules.ts';
import { nameKey } from '../voters/voters.repository.ts';
import { checkVoter, type VoterField } from '../voters/voters.rules.ts';
import { type FileColumns, headerColumns, type ImportMapping } from './import-headings.ts';
import type { StagedVoter } from './voter-imports.repository.ts';

/** A refused row's problem. */
export interface ImportRowError {
  row: number;
  field: string;
  message: string;
}

/** A cell left out of a row that was kept (contract, fifth part: "Imports keep every voter"). */
export interface ImportWarning {
  line: number;
  field: string;
  /** The cell as the file had it (at most 100 characters). */
  value: string;
  reason: string;
}

/** Receives the header and every refused row as the file had them (an import job's errors.csv). */
export interface FailedRowSink {
  header(fields: string[]): void;
  row(fields: string[], error: string): void;
}

/** How the rows with a consent cell know their voter, to record it once the rows are applied. */
export interface ImportConsent {
  status: 'given' | 'withdrawn';
  phone: string | null;
  name_key: string;
  epic_number: string | null;
}

const CONSENT_WORDS: Record<string, 'given' | 'withdrawn'> = {
  given: 'given',
  yes: 'given',
  y: 'given',
  true: 'given',
  '1': 'given',
  हाँ: 'given',
  हां: 'given',
  withdrawn: 'withdrawn',
  no: 'withdrawn',
  n: 'withdrawn',
  false: 'withdrawn',
  '0': 'withdrawn',
  नहीं: 'withdrawn',
};

/** Why a phone cell was left out, in the office's words (not the API's: no setting names in it). */
const PHONE_WORDS =
  'it is not a phone number the import can read: give a 10-digit mobile number (9812345678) or one with its country code (+919812345678).';

/** A row's cells by what they fill, formula guards taken off; `blank` when every cell is empty. */
interface RowCells {
  input: Partial<Record<VoterField, string>>;
  recordInput: Partial<Record<RecordField, string>>;
  tagCell: string;
  customInput: Record<string, string>;
  blank: boolean;
}

/** A row's values once checked, and the problems of its cells. */
interface CheckedRow {
  checked: ReturnType<typeof checkVoter>;
  rolled: ReturnType<typeof checkRecord> | undefined;
  tagged: ReturnType<typeof checkTags> | undefined;
  valued: ReturnType<typeof checkFieldValues> | undefined;
  all: FieldErrors | undefined;
}

/**
 * The rows of an import's file as the CSV reader gives them: the header names the columns; each row after it is
 * checked as the API checks a voter, and staged (a bad optional cell left out with a warning), or refused (no
 * name) with its errors. It counts as it goes; the import takes the staged rows in batches.
 */
export class ImportRows {
  rowsRead = 0;
  failed = 0;
  valid = 0;
  sawHeader = false;
  columns: FileColumns | undefined;
  readonly errors: ImportRowError[] = [];
  readonly warnings: ImportWarning[] = [];
  readonly places = new PlacesSeen();
  /** The rows staged since the import last took them. */
  batch: StagedVoter[] = [];

  constructor(
    private readonly defs: VoterFieldDef[],
    private readonly settings: {
      defaultCountry: string;
      maxErrors: number;
      mapping: ImportMapping | undefined;
      language: string | undefined;
      failures: FailedRowSink | undefined;
      /** Whether an address (phone or email) is an erased person's: such a row comes in only with consent given. */
      erased: ((address: string) => boolean) | undefined;
    },
  ) {}

  /** The rows with a consent cell, by how the voter is known: recorded once the rows are applied. */
  readonly consents: ImportConsent[] = [];
  /** Erased addresses that came back with consent given: their erasure opt-out is lifted. */
  readonly returned: string[] = [];

  /** One record of the file (`line` its line number): the header, or a voter's row. */
  onRecord(fields: string[], line: number): void {
    if (!this.sawHeader) {
      this.sawHeader = true;
      this.columns = headerColumns(fields, this.defs, this.settings.mapping);
      this.settings.failures?.header(fields);
      return;
    }
    this.rowsRead += 1;
    const cells = this.cells(fields);
    if (cells.blank) return; // a row of empty cells, as spreadsheets leave behind
    const row = this.check(cells);
    const consent = this.consentOf(fields, line);
    if (this.settings.erased && this.refusedAsErased(row, consent, line)) return;
    // A bad optional cell is left out of its row, and the row is kept: only a row without a name is refused.
    const problems: FieldErrors | undefined = row.all?.name ? { name: row.all.name } : undefined;
    if (problems) return this.refuse(fields, line, problems);
    if (row.all) this.warn(line, cells, row);
    this.stage(line, row);
    if (consent) {
      const v = row.checked.values;
      this.consents.push({
        status: consent,
        phone: v.phone ?? null,
        name_key: nameKey(v.name!),
        epic_number: row.rolled?.values.epic_number ?? null,
      });
    }
  }

  /** The row's consent cell: given or withdrawn (also yes/no, हाँ/नहीं), else nothing (a warning when not empty). */
  private consentOf(fields: string[], line: number): 'given' | 'withdrawn' | undefined {
    const index = this.columns!.consent;
    if (index === undefined) return undefined;
    const raw = unguardFormula((fields[index] ?? '').trim());
    if (raw === '') return undefined;
    const value = CONSENT_WORDS[raw.toLowerCase()];
    if (!value && this.warnings.length < this.settings.maxErrors)
      this.warnings.push({
        line,
        field: 'consent',
        value: raw.slice(0, 100),
        reason: 'left out: it must be given or withdrawn (yes or no).',
      });
    return value;
  }

  /**
   * A row with an erased person's phone or email comes in only with consent given (the contract's fourth part).
   * It is refused without going to the failed rows' file (which would keep the person again): the error names
   * the line only.
   */
  private refusedAsErased(row: CheckedRow, consent: string | undefined, line: number): boolean {
    const v = row.checked.values;
    const addresses = [v.phone, v.email].filter((a): a is string => !!a && this.settings.erased!(a));
    if (addresses.length === 0) return false;
    if (consent === 'given') {
      this.returned.push(...addresses);
      return false;
    }
    if (this.errors.length < this.settings.maxErrors)
      this.errors.push({
        row: line,
        field: 'consent',
        message:
          'this person asked to be erased: the row is imported only with consent "given" (a consent column).',
      });
    this.failed += 1;
    return true;
  }

  /** Takes the rows staged so far. */
  take(): StagedVoter[] {
    const rows = this.batch;
    this.batch = [];
    return rows;
  }

  private cells(fields: string[]): RowCells {
    const { base, record, tags, custom } = this.columns!;
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
    return { input, recordInput, tagCell, customInput, blank };
  }

  private check({ input, recordInput, tagCell, customInput }: RowCells): CheckedRow {
    const { record, custom } = this.columns!;
    const checked = checkVoter(input, { partial: false, defaultCountry: this.settings.defaultCountry });
    const rolled = record.length > 0 ? checkRecord(recordInput) : undefined;
    // The roll has no phones: a row without one is kept (by its EPIC number, or as a voter of its own).
    if ((input.phone ?? '').trim() === '') delete checked.errors.phone;
    const tagged = tagCell !== '' ? checkTags(tagCell) : undefined;
    const valued = custom.length > 0 ? checkFieldValues(this.defs, customInput, true) : undefined;
    const all = mergedErrors(checked.errors, rolled?.errors, tagged?.errors, valued?.errors);
    return { checked, rolled, tagged, valued, all };
  }

  /** A warning for each cell left out of a row that is kept. */
  private warn(
    line: number,
    { input, recordInput, tagCell, customInput }: RowCells,
    { rolled, all }: CheckedRow,
  ) {
    for (const field in all) {
      if (this.warnings.length >= this.settings.maxErrors) break;
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
      this.warnings.push({
        line,
        field,
        value: String(raw ?? '').slice(0, 100),
        reason: `left out: ${field === 'phone' ? PHONE_WORDS : `it ${all![field]!.join(' ')}`}${alone}`,
      });
    }
  }

  /** A refused row: its errors, counted, and the row as the file had it for the failed rows' file. */
  private refuse(fields: string[], line: number, problems: FieldErrors): void {
    for (const field in problems) {
      for (const message of problems[field]!) {
        if (this.errors.length < this.settings.maxErrors) this.errors.push({ row: line, field, message });
      }
    }
    this.failed += 1;
    this.settings.failures?.row(
      fields,
      Object.entries(problems)
        .map(([field, messages]) => `${field}: ${messages.join(' ')}`)
        .join('; '),
    );
  }

  private stage(line: number, { checked, rolled, tagged, valued }: CheckedRow): void {
    const v = checked.values;
    const r: Partial<RecordColumns> = rolled?.values ?? {};
    this.valid += 1;
    this.places.add(v);
    const keys = placeKeyColumns({ constituency: v.constituency, ward: v.ward, booth: v.booth });
    // Every row an object of one shape, its properties written out (spreads of a few objects per row were a
    // fifth of a million-row file's checks).
    this.batch.push({
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
      language: r.language ?? this.settings.language ?? null,
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
