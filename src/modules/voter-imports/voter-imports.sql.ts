import type { AuditEntry } from '../audit/audit.repository.ts';
import {
  integerRecordColumns,
  type RecordColumns,
  recordColumns as recordColumnsOfVoters,
} from '../voters/voter-record.rules.ts';

/**
 * The import's writes, shared by both databases: rows staged as the file streams in, then one set-based upsert
 * (voter-imports.sqlite.ts, voter-imports.postgres.ts). Here: the staged row, the staging table's columns and
 * the SQL both apply with.
 */

/** A row as staged: the voter's columns (the record's null where the file has no value), tags and fields. */
export interface StagedVoter extends RecordColumns {
  /** Line of the file where the row starts: the later of two rows with one identity wins. */
  line: number;
  name: string;
  name_key: string;
  /** null for a row from the roll without one (it has an EPIC number). */
  phone: string | null;
  email: string | null;
  constituency: string | null;
  constituency_key: string | null;
  booth: string | null;
  booth_key: string | null;
  ward: string | null;
  ward_key: string | null;
  address: string | null;
  household_key: string | null;
  /** JSON `[[key, label], ...]`: the row's tags (replacing the voter's), or null to keep them. */
  tags: string | null;
  /** JSON `[[key, value_text, value_number], ...]`: custom field values given, or null. */
  fields: string | null;
}

/**
 * An import in progress: rows are staged as the file streams in, and only `apply` touches `voters`, so a
 * file refused part-way (413, not UTF-8, ...) is `abort`ed and leaves the voters as they were.
 */
export interface VoterImport {
  stage(rows: readonly StagedVoter[]): Promise<void>;
  /**
   * Upserts the staged rows on the identity (the later line wins; a field a row leaves empty is kept);
   * returns how many voters were created. `audit` gives the audit entry for that count, written with the
   * rows: in the same transaction on PostgreSQL (the rows are committed with their entry or not at all), right
   * after the last chunk on SQLite.
   */
  apply(now: string, audit?: (imported: number) => AuditEntry): Promise<{ imported: number }>;
  /** A dry run: how many voters `apply` would create; then the staged rows are dropped and nothing is written. */
  preview(): Promise<{ imported: number }>;
  abort(): Promise<void>;
  /** Rows left out at apply (or preview) because their roll numbers belong to another voter. */
  skipped(): ImportProblem[];
}

export interface ImportProblem {
  row: number;
  field: string;
  message: string;
}

/** The voter record's columns an import writes (merged as the optional fields are), and the household it finds. */
export const recordColumns = [...recordColumnsOfVoters, 'household_key'] as const;

export const stagedColumns = [
  'line',
  'name',
  'name_key',
  'phone',
  'email',
  'constituency',
  'constituency_key',
  'booth',
  'booth_key',
  'ward',
  'ward_key',
  'address',
  ...recordColumns,
  'tags',
  'fields',
] as const;

/** The staged columns that are columns of `voters` (tags and fields go to tables of their own). */
export const voterColumns = stagedColumns.slice(1, -2) as ReadonlyArray<(typeof stagedColumns)[number]>;

export const integerColumns = new Set<string>(['line', ...integerRecordColumns]);

/** The staging table's columns: integers as integers, every other one text. */
export const stagingColumnsSql = stagedColumns
  .map((c) => `${c} ${integerColumns.has(c) ? 'INTEGER' : 'TEXT'}`)
  .join(', ');

/** The optional fields: an import row with none of them (an empty cell, or a column the file lacks) keeps it. */
export const mergedColumns = [
  'email',
  'constituency',
  'constituency_key',
  'booth',
  'booth_key',
  'ward',
  'ward_key',
  'address',
  ...recordColumns,
] as const;

/** An import changes only what the file says: the name (same identity, maybe other case) and each value given. */
export const upsertSet = [
  'name = excluded.name',
  ...mergedColumns.map((c) => `${c} = coalesce(excluded.${c}, voters.${c})`),
  'updated_at = excluded.updated_at',
].join(', ');

/** A row that would not change is left alone: its updated_at stays, and no search-index work is done. */
export function changedCondition(distinct: 'IS NOT' | 'IS DISTINCT FROM'): string {
  return [
    `voters.name ${distinct} excluded.name`,
    ...mergedColumns.map((c) => `(excluded.${c} IS NOT NULL AND voters.${c} ${distinct} excluded.${c})`),
  ].join(' OR ');
}

/** A staged row whose EPIC number a voter of the workspace holds: it updates that voter (rollUpdate). */
export const epicHeld = (s: string, ws: string) =>
  `(${s}.epic_number IS NOT NULL AND EXISTS (SELECT 1 FROM voters e WHERE e.workspace_id = ${ws} AND e.epic_number = ${s}.epic_number))`;

/**
 * Rows whose EPIC number a voter holds update that voter, whatever their name and phone: every field the
 * row gives except the name and phone (the roll's identity is the EPIC number; a phone is set only on a
 * voter that has none and no one else has it with that name).
 */
export function rollUpdate(table: string, ws: string, now: string, lines: string): string {
  // Driven by the chunk's EPIC numbers (an index seek each, and one into the staging table for the row's
  // values): an UPDATE ... FROM let SQLite walk every voter of the workspace for each chunk, and the chunks
  // shrank to the pacer's least as the table grew.
  const values = [
    ...mergedColumns.map((c) => `coalesce(s.${c}, voters.${c})`),
    `CASE WHEN voters.phone IS NULL AND s.phone IS NOT NULL AND NOT EXISTS (SELECT 1 FROM voters o
       WHERE o.workspace_id = ${ws} AND o.phone = s.phone AND o.name_key = voters.name_key) THEN s.phone ELSE voters.phone END`,
    now,
  ];
  return `UPDATE voters SET (${[...mergedColumns, 'phone', 'updated_at'].join(', ')}) =
      (SELECT ${values.join(', ')} FROM ${table} s WHERE s.epic_number = voters.epic_number${lines})
    WHERE voters.workspace_id = ${ws}
      AND voters.epic_number IN (SELECT s.epic_number FROM ${table} s WHERE s.epic_number IS NOT NULL${lines})`;
}

/** A query that gives a row when two rows of `table` (of those `where` keeps) have the same `columns`. */
export const repeatsSql = (table: string, columns: string, where = 'true') =>
  `SELECT 1 FROM ${table} WHERE ${where} GROUP BY ${columns} HAVING count(*) > 1 LIMIT 1`;

/**
 * Before anything is applied: one row per EPIC number (the file's last), and rows whose (part, serial) another
 * voter holds, or a later row of the file, left out and reported. Returns the rows left out.
 */
export async function settleRollNumbers(
  run: (text: string, values: unknown[]) => Promise<Array<Record<string, unknown>>>,
  table: string,
  ws: string,
  values: unknown[],
): Promise<ImportProblem[]> {
  // Each search for the file's repeats (a lookup of the latest line for every row) runs only when a grouping says
  // there are some: a roll has none, and the searches were 3.5 of the 6.7 s spent settling a million rows.
  const repeats = async (given: string, columns: string) =>
    (await run(repeatsSql(table, columns, given), [])).length > 0;
  if (await repeats('epic_number IS NOT NULL', 'epic_number'))
    await run(
      `DELETE FROM ${table} WHERE epic_number IS NOT NULL AND line < (SELECT max(t.line) FROM ${table} t WHERE t.epic_number = ${table}.epic_number)`,
      [],
    );
  const inFile = (await repeats(
    'part_number IS NOT NULL AND serial_number IS NOT NULL',
    'part_number, serial_number',
  ))
    ? await run(
        `SELECT s.line AS line, (SELECT max(t.line) FROM ${table} t WHERE t.part_number = s.part_number AND t.serial_number = s.serial_number) AS later
         FROM ${table} s WHERE s.part_number IS NOT NULL AND s.serial_number IS NOT NULL
           AND s.line < (SELECT max(t.line) FROM ${table} t WHERE t.part_number = s.part_number AND t.serial_number = s.serial_number)`,
        [],
      )
    : [];
  const taken = await run(
    `SELECT s.line AS line FROM ${table} s JOIN voters v ON v.workspace_id = ${ws}
       AND v.part_number = s.part_number AND v.serial_number = s.serial_number
     WHERE s.part_number IS NOT NULL AND s.serial_number IS NOT NULL
       AND NOT (s.epic_number IS NOT NULL AND v.epic_number = s.epic_number)
       AND NOT (s.phone IS NOT NULL AND v.phone = s.phone AND v.name_key = s.name_key AND NOT ${epicHeld('s', ws)})`,
    values,
  );
  const problems: ImportProblem[] = [
    ...inFile.map((r) => ({
      row: Number(r.line),
      field: 'serial_number',
      message: `line ${Number(r.later)} of the file has the same part_number and serial_number; the later line is kept.`,
    })),
    ...taken.map((r) => ({
      row: Number(r.line),
      field: 'serial_number',
      message: 'another voter of the workspace has this part_number and serial_number.',
    })),
  ];
  const lines = [...new Set(problems.map((p) => p.row))];
  for (let i = 0; i < lines.length; i += 500)
    await run(`DELETE FROM ${table} WHERE line IN (${lines.slice(i, i + 500).join(', ')})`, []);
  return problems.sort((a, b) => a.row - b.row);
}

/**
 * The rows' tags and custom field values, written after their voters (a voter found by EPIC number, or by
 * name and phone). A row's tags replace the voter's; each field given replaces its value. Within one file the
 * later row wins. On PostgreSQL, `oneRowPerVoter` (no two rows of the file have one voter, and a row names each
 * field once) lets the field values go in without DISTINCT ON. They still go in by voter id: each insert then lands
 * beside the last in the tables' b-trees (in the hash join's order, the tags took 10.8 s instead of 4.9, the
 * values 24.3 instead of 14.0, at a million rows).
 */
export function sideWrites(
  table: string,
  ws: string,
  lines: string,
  pg: boolean,
  oneRowPerVoter = false,
): string[] {
  const elements = (column: string) =>
    pg ? `jsonb_array_elements(x.${column}::jsonb) AS j(e)` : `json_each(x.${column}) AS j`;
  const at = (i: number) => (pg ? `(j.e->>${i})` : `json_extract(j.value, '$[${i}]')`);
  const num = pg ? `(j.e->>2)::double precision` : at(2);
  // The row's voter: the one holding its EPIC number, else the one with its name and phone. PostgreSQL has it in
  // voters_import_ids already (found once in apply); SQLite seeks it (two index seeks a row).
  const source = pg ? `${table} s JOIN voters_import_ids i ON i.line = s.line` : `${table} s`;
  const target = pg
    ? 'i.voter_id'
    : `coalesce(
      (SELECT v.id FROM voters v WHERE v.workspace_id = ${ws} AND v.epic_number = s.epic_number),
      (SELECT v.id FROM voters v WHERE v.workspace_id = ${ws} AND v.phone = s.phone AND v.name_key = s.name_key))`;
  // The file's last row for its voter that gives tags: its tags are the voter's. Rows with one EPIC number are
  // one row already (settleRollNumbers); rows with one name and phone are found through SQLite's staging index
  // (PostgreSQL's statements join the whole file: a hash anti-join, which needs no index).
  const lastTags = `s.tags IS NOT NULL AND NOT EXISTS (SELECT 1 FROM ${table} l WHERE l.phone = s.phone
      AND l.name_key = s.name_key AND l.line > s.line AND l.tags IS NOT NULL)`;
  const tagged = `(SELECT s.line AS line, s.tags AS tags, ${target} AS id FROM ${source} WHERE ${lastTags}${lines}) x`;
  return [
    `INSERT INTO voter_tag_names (workspace_id, key, label)
       SELECT ${ws}, ${at(0)}, ${at(1)} FROM (SELECT s.line AS line, s.tags AS tags FROM ${table} s
         WHERE s.tags IS NOT NULL${lines}) x, ${elements('tags')}
       WHERE true ORDER BY x.line ON CONFLICT DO NOTHING`,
    `DELETE FROM voter_tags WHERE voter_id IN (SELECT x.id FROM ${tagged} WHERE x.id IS NOT NULL)`,
    `INSERT INTO voter_tags (workspace_id, tag_key, voter_id)
       SELECT ${ws}, ${at(0)}, x.id FROM ${tagged}, ${elements('tags')}
       WHERE x.id IS NOT NULL${pg ? ' ORDER BY x.id' : ''} ON CONFLICT DO NOTHING`,
    `INSERT INTO voter_field_values (voter_id, workspace_id, field_key, value_text, value_number)
       SELECT ${pg && !oneRowPerVoter ? `DISTINCT ON (x.id, ${at(0)})` : ''} x.id, ${ws}, ${at(0)}, ${at(1)}, ${num}
       FROM (SELECT s.line AS line, s.fields AS fields, ${target} AS id FROM ${source}
         WHERE s.fields IS NOT NULL${lines}) x, ${elements('fields')}
       WHERE x.id IS NOT NULL
       ORDER BY x.id${pg && oneRowPerVoter ? '' : `, ${at(0)}, x.line ${pg ? 'DESC' : 'ASC'}`}
       ON CONFLICT (voter_id, field_key) DO UPDATE SET value_text = excluded.value_text, value_number = excluded.value_number`,
  ];
}

/** What the staged rows hold, for the apply steps they need (a file of the old columns takes none of them). */
export class StagedKinds {
  /** An EPIC or a part number: the roll's identities are settled and applied. */
  roll = false;
  /** Tags or custom field values: written after their voters. */
  side = false;

  add(rows: readonly StagedVoter[]): void {
    for (const r of rows) {
      if (!this.roll && (r.epic_number !== null || r.part_number !== null)) this.roll = true;
      if (!this.side && (r.tags !== null || r.fields !== null)) this.side = true;
    }
  }
}

/** An import of at least this many rows refreshes the table's statistics on PostgreSQL. */
export const ANALYZE_AFTER_ROWS = 10_000;

/**
 * The staged voters that the workspace does not have yet: what an apply would create. A row whose EPIC number
 * a voter holds updates that voter; a row without a phone (from the roll) is a voter of its own, by its EPIC
 * number, or by its line where it has neither.
 */
export const newIdentities = (table: string, workspace: string) =>
  `SELECT count(*) AS imported FROM (SELECT DISTINCT phone, name_key, CASE WHEN phone IS NULL THEN coalesce(epic_number, CAST(line AS TEXT)) END AS epic
     FROM ${table} s WHERE NOT ${epicHeld('s', workspace)}) s
   WHERE s.phone IS NULL OR NOT EXISTS (SELECT 1 FROM voters v WHERE v.workspace_id = ${workspace} AND v.phone = s.phone AND v.name_key = s.name_key)`;
