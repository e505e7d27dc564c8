/** The voters' tables: voters and their record, custom fields, tags, search, counts and import jobs. */
import type { ColumnType, Generated, Selectable } from 'kysely';
import type { VoterImportStatus } from '../domain.ts';

/**
 * The voter record's columns on `voters` (migration 035; the contract's fourth part), each with its SQL type: the
 * one list the API's fields, imports, exports and the row type are read from (voter-record.rules.ts).
 * `birth_date` is a known birth date (null when only an age was given); `birth_key` is birth_date, or 1 January
 * of the estimated birth year: what age filters compare.
 */
export const voterRecordColumns = {
  epic_number: 'text',
  part_number: 'integer',
  serial_number: 'integer',
  page_number: 'integer',
  house_number: 'text',
  relation_name: 'text',
  relation_type: 'text',
  gender: 'text',
  name_local: 'text',
  language: 'text',
  birth_date: 'text',
  birth_key: 'text',
  support_level: 'integer',
} as const;

export type VoterRecordColumn = keyof typeof voterRecordColumns;

/** A record column's value as stored: a number for an integer column, else text; null when not known. */
export type RecordValue<C extends VoterRecordColumn> = (typeof voterRecordColumns)[C] extends 'integer'
  ? number | null
  : string | null;

/** The record's columns on the row type: optional on insert. */
export type VoterRecordColumns = {
  [C in VoterRecordColumn]: ColumnType<RecordValue<C>, RecordValue<C> | undefined, RecordValue<C>>;
};

/** A workspace's custom voter field (migration 035); `choices` is a JSON array for a choice field. */
export interface VoterFieldTable {
  workspace_id: number;
  key: string;
  label: string;
  type: string;
  choices: string | null;
  sensitive: number;
  created_at: string;
}

/** One voter's value of one custom field: text, date, choice and boolean in value_text, numbers in value_number. */
export interface VoterFieldValueTable {
  voter_id: number;
  workspace_id: number;
  field_key: string;
  value_text: string | null;
  value_number: number | null;
}

/** The label a tag key was first written with. */
export interface VoterTagNameTable {
  workspace_id: number;
  key: string;
  label: string;
}

/** One tag of one voter, by key. */
export interface VoterTagTable {
  workspace_id: number;
  tag_key: string;
  voter_id: number;
}

/** A bulk tagging by filters, applied in chunks by the worker. */
export interface VoterTagJobTable {
  id: Generated<number>;
  workspace_id: number;
  status: string;
  add_tags: string;
  remove_tags: string;
  filters: string;
  total: Generated<number>;
  changed: Generated<number>;
  after_id: Generated<number>;
  error: string | null;
  created_by: number | null;
  created_at: string;
  updated_at: string;
  /** JSON: the values a bulk edit sets (`{ language?, support_level?, fields? }`), or null (migration 041). */
  set_values: ColumnType<string | null, string | null | undefined, string | null>;
}
export type VoterTagJobRow = Selectable<VoterTagJobTable>;

export interface VoterTable extends VoterRecordColumns {
  id: Generated<number>;
  workspace_id: number;
  name: string;
  /** Lower-cased name with spaces collapsed; (workspace_id, phone, name_key) is unique. */
  name_key: string;
  /** E.164; null for a voter imported from the roll without one (migration 035). */
  phone: string | null;
  email: string | null;
  constituency: string | null;
  /** Lower-cased constituency, for the case-insensitive exact filter. */
  constituency_key: string | null;
  booth: string | null;
  ward: string | null;
  /** Case-folded ward and booth (migration 034), as constituency_key: what filters and coverage compare. */
  ward_key: string | null;
  booth_key: string | null;
  address: string | null;
  created_at: string;
  updated_at: string;
  /** The user who added the voter (migration 032); null by import or before. */
  created_by: ColumnType<number | null, number | null | undefined, number | null>;
  /** `p:<part>:<house>` or `a:<address>` (voter-record.rules.ts householdKey). */
  household_key: ColumnType<string | null, string | null | undefined, string | null>;
  /** given | withdrawn | unknown, with the notice version, source and time it was recorded (migration 044). */
  consent_status: ColumnType<string, string | undefined, string>;
  consent_notice_version: ColumnType<number | null, number | null | undefined, number | null>;
  consent_source: ColumnType<string | null, string | null | undefined, string | null>;
  consent_at: ColumnType<string | null, string | null | undefined, string | null>;
}
export type VoterRow = Selectable<VoterTable>;

/** Kept by triggers: the exact number of voters of each workspace. */
export interface VoterCountTable {
  workspace_id: number;
  total: number;
}

/** Kept by triggers (migration 007): how many of a workspace's voters have an id in each block of 4,096 ids. */
export interface VoterBlockTable {
  workspace_id: number;
  /** id >> 12 */
  block: number;
  total: number;
}

/**
 * PostgreSQL only (migration 037): appended by triggers, one row per statement, tag or value; a count is the
 * sum of a group's deltas (voter-value-counts.ts).
 */
export interface VoterValueCountTable {
  workspace_id: number;
  /** 'booth', 'part', 'voted_booth' and 'voted_part': turnout's counts (migration 045). */
  kind: 'tag' | 'field' | 'booth' | 'part' | 'voted_booth' | 'voted_part';
  key: string;
  value: string;
  delta: number;
}

export interface VoterSearchTable {
  voter_id: number;
  workspace_id: number;
  name: string;
  email: string | null;
  phone: string | null;
  name_local: string | null;
}

export interface VoterFtsTable {
  rowid: number;
  name: string;
  email: string | null;
  phone: string | null;
  name_local: string | null;
}

/** An import job (`Prefer: respond-async`); see migration 011. */
export interface VoterImportTable {
  id: Generated<number>;
  workspace_id: number;
  user_id: number | null;
  /** The uploader's client address (for the audit entry). */
  ip: string | null;
  status: VoterImportStatus;
  file_name: string;
  /** Names the stored upload (and `<file_key>.errors`, its errors.csv). */
  file_key: string;
  bytes: number;
  bytes_read: Generated<number>;
  rows_read: Generated<number>;
  imported: Generated<number>;
  updated: Generated<number>;
  failed: Generated<number>;
  /** JSON text: the first IMPORT_MAX_ERRORS { row, field, message }. */
  errors: Generated<string>;
  /** JSON text: the file's values that match no place (migration 034). */
  unknown_places: Generated<string>;
  /** JSON array of the file's header names no field took (migration 035). */
  ignored_columns: Generated<string>;
  /** JSON: the heading -> field mapping the upload was sent with (migration 041). */
  mapping: ColumnType<string | null, string | null | undefined, string | null>;
  /** JSON text: the first IMPORT_MAX_ERRORS { line, field, value, reason } cells left out (migration 041). */
  warnings: Generated<string>;
  message: string | null;
  attempts: Generated<number>;
  lease_owner: string | null;
  /** Epoch milliseconds. */
  lease_until: number | null;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
}
export type VoterImportRow = Selectable<VoterImportTable>;

/** PostgreSQL's store of import files, in chunks. */
export interface VoterImportFileTable {
  file_key: string;
  seq: number;
  data: Buffer;
}
